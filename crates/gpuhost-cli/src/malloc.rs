//! The process's allocators, set once at start.
//!
//! The binary's own (Rust) heap is mimalloc (the `#[global_allocator]` in main.rs). `gpuhost
//! serve` is CPU-bound under load (bench/RESULTS.md, session 16: 14 of the H200 host's 16 cores
//! busy at 16 connections), and each request makes and frees about 140 heap blocks (its Store's
//! contexts, wasmtime's instance, hyper's request). Counted with callgrind on softcuda
//! (`scripts/probes/serve-callgrind.sh`, instructions a request on the tokio workers), glibc's
//! malloc and free took 31.8k of a trusted request's 210.9k, mimalloc 16.3k of 193.9k
//! (sandboxed 203.9k -> 187.6k, the native handler 38.0k -> 36.1k).
//!
//! Large blocks: a guest's `buffer.write` and `buffer.read` each pass through freshly allocated
//! host buffers of the transfer's size (wasmtime lifts a `list<u8>` into a new `Vec`; a read's
//! bytes go to a new `Vec` before they are lowered into the guest). Served by fresh mappings,
//! every 64 MiB transfer would first take 16 384 page faults. mimalloc serves blocks up to 2 GiB
//! from its arenas and gives a freed range back to the system (`MADV_DONTNEED`) only after it has
//! gone unused for its purge delay (1 s), so a guest's transfers reuse resident memory while
//! they run and the memory goes back once they stop (`gpuhost bench --guest --quick` on softcuda:
//! guest write/read bandwidth unchanged within this shared machine's noise, 16% fewer page faults,
//! peak RSS 533 -> 615 MB; the test below holds the reuse).
//!
//! glibc's malloc still serves the C side and the shared libraries (softcuda, NVIDIA's driver):
//! [`tune`] keeps its large blocks in the heap for reuse, as it did for the whole process before
//! (measured with `gpuhost bench --guest --quick` on softcuda: guest writes 0.9–1.3 → 3.1–3.3
//! GB/s, reads 0.7–1.0 → 1.9–2.0 GB/s), at the price of up to 1 GiB of free heap top kept.
//! Set `GPUHOST_SYSTEM_MALLOC=1` (or any `MALLOC_*` tunable of your own) to leave glibc's
//! defaults alone.

/// The binary's global allocator.
pub type Mimalloc = mimalloc::MiMalloc;

/// Applies the policy unless the user chose their own.
pub fn tune() {
    let own_choice = std::env::var_os("GPUHOST_SYSTEM_MALLOC").is_some()
        || std::env::vars_os().any(|(k, _)| k.to_string_lossy().starts_with("MALLOC_"));
    if own_choice {
        return;
    }
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: mallopt only changes glibc's tunables; called before any other thread exists.
        unsafe {
            libc::mallopt(libc::M_MMAP_MAX, 0);
            libc::mallopt(libc::M_TRIM_THRESHOLD, 1 << 30);
        }
    }
}

#[cfg(test)]
mod tests {
    /// Page faults this thread has taken so far.
    fn minor_faults() -> i64 {
        // SAFETY: getrusage writes the struct it is given, which is zeroed and ours.
        unsafe {
            let mut usage: libc::rusage = std::mem::zeroed();
            assert_eq!(libc::getrusage(libc::RUSAGE_THREAD, &mut usage), 0);
            usage.ru_minflt
        }
    }

    /// Writes `bytes` into a new block of that size (every page touched) and frees it.
    fn fill(bytes: usize) {
        let block = vec![1u8; bytes];
        std::hint::black_box(&block);
    }

    #[test]
    fn a_freed_64_mib_block_is_reused_without_page_faults() {
        const BYTES: usize = 64 << 20;
        const PAGES: i64 = (BYTES / 4096) as i64;
        fill(BYTES); // the first one faults its pages in
        let before = minor_faults();
        fill(BYTES);
        let faults = minor_faults() - before;
        // A block mapped afresh takes one fault a page (16 384; fewer with huge pages, but far
        // more than this bound); reused resident memory takes none.
        assert!(
            faults < PAGES / 16,
            "refilling a freed 64 MiB block took {faults} page faults: large blocks go back to the system on free (the binary's allocator is not keeping them)"
        );
    }
}
