//! The process's allocators, chosen and tuned once at start.
//!
//! The binary's own (Rust) heap is jemalloc (`tikv-jemallocator`, the `#[global_allocator]` in
//! main.rs). `gpuhost serve` is CPU-bound under load, and each request makes and frees a few
//! hundred heap blocks (its Store's contexts, wasmtime's instance, hyper's request), many of them
//! freed on another tokio worker than the one that made them (a warm Store is built by one
//! request's task and dropped by another's). A CPU profile of serve on the H200 (perf,
//! `scripts/probes/serve-profile.sh`, session 25) put glibc's malloc and free, with the arena
//! locks its cross-thread frees contend on, at 25–34 µs of a request's 115–230 µs of CPU;
//! with jemalloc they took 3–5 µs, and side by side the server's CPU per request fell from
//! 212–239 µs to 180–207 (bench/RESULTS.md, session 25).
//!
//! Large blocks: a guest's `buffer.write` and `buffer.read` each pass through freshly allocated
//! host buffers of the transfer's size (wasmtime lifts a `list<u8>` into a new `Vec`; a read's
//! bytes go to a new `Vec` before they are lowered into the guest). Served by fresh mappings,
//! every 64 MiB transfer would first take 16 384 page faults. jemalloc keeps a freed block's
//! pages for reuse, by any thread, and gives them back to the system only after they stay unused
//! for its decay time (10 s by default; `_RJEM_MALLOC_CONF=dirty_decay_ms:…` changes it: this
//! jemalloc is built with the `_rjem_` prefix, so it reads that variable, not `MALLOC_CONF`), so
//! a guest's transfers reuse resident memory while they run ([`JEMALLOC_CONF`]). The tests below
//! hold the reuse.
//!
//! glibc's malloc still serves the C side and the shared libraries (softcuda, NVIDIA's driver):
//! [`tune`] keeps its large blocks in the heap for reuse (measured with `gpuhost bench --guest
//! --quick` on softcuda when the whole process used glibc: guest writes 0.9–1.3 → 3.1–3.3 GB/s,
//! reads 0.7–1.0 → 1.9–2.0 GB/s), at the price of up to 1 GiB of free heap top kept. Set
//! `GPUHOST_SYSTEM_MALLOC=1` (or any `MALLOC_*` tunable of your own) to leave glibc's defaults
//! alone.

/// jemalloc's options, read when it starts (before `main`). Blocks of 8 MiB and more come from
/// one arena that every thread shares (jemalloc's default), so a block freed by one tokio worker
/// is reused by the next transfer on another. That arena gives freed pages back at once unless
/// a background thread purges instead, after the decay time: `background_thread:true` (one
/// thread). Without it, each 64 MiB guest read's fresh `Vec` took its 16 384 page faults again,
/// and the read ran at half its speed (3.2 against 6.4 GB/s on the H200, session 25); with
/// ordinary arenas for such blocks instead (`oversize_threshold:0`) a block was reused only by
/// the thread that freed it. jemalloc's other options are its defaults: collecting each thread's
/// cache of small blocks every 4 MiB allocated instead of every 64 KiB cut a serve request's
/// busy instructions by 5% under callgrind, but on an H100 host it moved neither req/s nor CPU
/// per request (bench/RESULTS.md, session 55), so it was taken out again. `_RJEM_MALLOC_CONF` is
/// read after this and overrides it.
// SAFETY: jemalloc (built with the `_rjem_` prefix by tikv-jemalloc-sys) reads this symbol as its
// `const char *malloc_conf`: a pointer to a NUL-terminated string that lives forever, as this is.
#[unsafe(export_name = "_rjem_malloc_conf")]
static JEMALLOC_CONF: &[u8; 48] = b"background_thread:true,max_background_threads:1\0";

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
    /// A guest transfer's size, and its pages.
    const BYTES: usize = 64 << 20;
    const PAGES: i64 = (BYTES / 4096) as i64;

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

    /// jemalloc's size_t option `name` (a NUL-terminated `opt.*` name), as the process runs it.
    fn jemalloc_opt(name: &[u8]) -> usize {
        assert_eq!(name.last(), Some(&0), "a C string");
        let mut value: usize = 0;
        let mut len = std::mem::size_of::<usize>();
        // SAFETY: `name` is NUL-terminated; `value` and `len` are ours and `len` is `value`'s
        // size, which is what mallctl writes for a size_t option; nothing is written (newp null).
        let rc = unsafe {
            tikv_jemalloc_sys::mallctl(
                name.as_ptr().cast(),
                (&mut value as *mut usize).cast(),
                &mut len,
                std::ptr::null_mut(),
                0,
            )
        };
        assert_eq!(rc, 0, "mallctl({name:?}) failed");
        value
    }

    #[test]
    fn jemalloc_runs_the_one_background_thread_that_jemalloc_conf_asks_for() {
        assert_eq!(
            jemalloc_opt(b"opt.max_background_threads\0"),
            1,
            "JEMALLOC_CONF's max_background_threads is not in effect"
        );
    }

    #[test]
    fn a_64_mib_block_freed_on_one_thread_is_reused_by_another_without_page_faults() {
        // As a guest's transfers go: each request's task on whichever tokio worker it runs.
        std::thread::spawn(|| fill(BYTES)).join().unwrap();
        let faults = std::thread::spawn(|| {
            let before = minor_faults();
            fill(BYTES);
            minor_faults() - before
        })
        .join()
        .unwrap();
        assert!(
            faults < PAGES / 16,
            "a 64 MiB block on a second thread took {faults} page faults after the first thread freed one: large blocks are not shared between threads"
        );
    }

    #[test]
    fn a_freed_64_mib_block_is_reused_without_page_faults() {
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
