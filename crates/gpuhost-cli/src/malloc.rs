//! The process's allocators, set once at start.
//!
//! The binary's own (Rust) heap is mimalloc ([`Mimalloc`], the `#[global_allocator]` in main.rs).
//! `gpuhost serve` is CPU-bound under load (bench/h200-runs/2026-12-02-s16/: 14 of the H200
//! host's 16 cores busy at 16 connections), and each request makes and frees about 130 heap
//! blocks (its Store's contexts, wasmtime's instance, hyper's request). Instructions a request on
//! the tokio workers, counted with callgrind on softcuda (`N=150 WARM=60 QPS=4
//! scripts/probes/serve-callgrind.sh`), glibc's malloc → the `mimalloc` crate's `MiMalloc` →
//! [`Mimalloc`]: trusted 210.9k → 193.9k → 188.7k (of which the allocator 31.8k → 16.3k →
//! 11.6k), sandboxed 203.9k → 187.6k → 183.4k (30.5k → 14.8k → 11.3k), the native handler 38.0k
//! → 36.1k → 34.6k. A block freed on another thread than the one that made it (a warm Store
//! made by one request's task, dropped by another's) goes back without a lock.
//!
//! Large blocks: a guest's `buffer.write` and `buffer.read` each pass through freshly allocated
//! host buffers of the transfer's size (wasmtime lifts a `list<u8>` into a new `Vec`; a read's
//! bytes go to a new `Vec` before they are lowered into the guest). Served by fresh mappings,
//! every 64 MiB transfer would first take 16 384 page faults. mimalloc serves blocks up to 2 GiB
//! from its arenas and gives a freed range back to the system (`MADV_DONTNEED`) only after it has
//! gone unused for its purge delay (1 s), so a guest's transfers reuse resident memory while
//! they run and the memory goes back once they stop. `gpuhost bench --guest --quick` on softcuda,
//! glibc (tuned below) → [`Mimalloc`], medians of three runs each, alternated: guest write
//! 4.5 → 4.8 GB/s, read 3.0 → 3.4, read-stream 4.3 → 4.6; page faults of the whole run 280k →
//! 236k; peak RSS 532 → 616 MB. The last test below holds the reuse.
//!
//! glibc's malloc still serves the C side and the shared libraries (softcuda, NVIDIA's driver):
//! [`tune`] keeps its large blocks in the heap for reuse, as it did for the whole process before
//! (measured then with `gpuhost bench --guest --quick` on softcuda: guest writes 0.9–1.3 →
//! 3.1–3.3 GB/s, reads 0.7–1.0 → 1.9–2.0 GB/s), at the price of up to 1 GiB of free heap top
//! kept. Set `GPUHOST_SYSTEM_MALLOC=1` (or any `MALLOC_*` tunable of your own) to leave glibc's
//! defaults alone.

use std::alloc::{GlobalAlloc, Layout};

use libmimalloc_sys as mi;

/// mimalloc, asked for an alignment only where a type needs more than every block has: the
/// `mimalloc` crate's own `MiMalloc` passes every request to `mi_malloc_aligned`, which takes a
/// block of more than 1 KiB whose size class is not a power of two (and a small one when the
/// next free block is not aligned as asked) through its over-allocating path, 28 of the 130
/// blocks a serve request makes (callgrind on softcuda).
pub struct Mimalloc;

/// The alignment every block of mimalloc has: its size classes are multiples of the word, and
/// its pages start aligned.
const BLOCK_ALIGN: usize = std::mem::size_of::<usize>();

/// A new block for `layout` from `plain` where every block is aligned enough, else `aligned`.
///
/// # Safety
/// `plain(size)` and `aligned(size, align)` must return null or a block of `size` bytes that
/// mi_free frees, `plain`'s aligned to [`BLOCK_ALIGN`] and `aligned`'s to `align`.
#[inline]
unsafe fn new_block(
    layout: Layout,
    plain: unsafe extern "C" fn(usize) -> *mut std::ffi::c_void,
    aligned: unsafe extern "C" fn(usize, usize) -> *mut std::ffi::c_void,
) -> *mut u8 {
    if layout.align() <= BLOCK_ALIGN {
        // SAFETY: the caller's promise; any size is allowed.
        unsafe { plain(layout.size()).cast() }
    } else {
        // SAFETY: the caller's promise; Layout's alignment is a power of two, as mimalloc's
        // aligned forms require.
        unsafe { aligned(layout.size(), layout.align()).cast() }
    }
}

// SAFETY: every method forwards to mimalloc's C allocator, which returns null or a block valid
// for the size asked and aligned as asked: to the word by mi_malloc, mi_zalloc and mi_realloc
// (every mimalloc block is), to any power of two by their `_aligned` forms (Layout's alignment
// is one); mi_free and mi_realloc take a block of either kind. A layout's alignment picks the
// same kind for a block's allocation and its reallocation.
unsafe impl GlobalAlloc for Mimalloc {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: mimalloc's plain and aligned allocation (see the impl's comment).
        unsafe { new_block(layout, mi::mi_malloc, mi::mi_malloc_aligned) }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: mimalloc's plain and aligned zeroed allocation (see the impl's comment).
        unsafe { new_block(layout, mi::mi_zalloc, mi::mi_zalloc_aligned) }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        // SAFETY: `ptr` is a live block of this allocator (GlobalAlloc's contract).
        unsafe { mi::mi_free(ptr.cast()) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if layout.align() <= BLOCK_ALIGN {
            // SAFETY: `ptr` is a live block of this allocator (GlobalAlloc's contract).
            unsafe { mi::mi_realloc(ptr.cast(), new_size).cast() }
        } else {
            // SAFETY: as above, and the alignment is a power of two.
            unsafe { mi::mi_realloc_aligned(ptr.cast(), new_size, layout.align()).cast() }
        }
    }
}

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
    fn every_block_is_aligned_as_its_layout_asks_through_alloc_zeroing_and_realloc() {
        use std::alloc::{GlobalAlloc, Layout};
        let heap = super::Mimalloc;
        for align in [1, 2, 8, 16, 32, 64, 128, 4096] {
            // Sizes of odd size classes (24, 40, 1500) as well as round ones; many blocks of each,
            // so a size class whose blocks fall off the alignment shows.
            for size in [1, 8, 24, 40, 64, 200, 1500, 4096, 70_000] {
                let layout = Layout::from_size_align(size, align).unwrap();
                let blocks: Vec<*mut u8> = (0..64)
                    .map(|i| {
                        // SAFETY: the layout has a non-zero size.
                        let p = unsafe {
                            if i % 2 == 0 {
                                heap.alloc(layout)
                            } else {
                                heap.alloc_zeroed(layout)
                            }
                        };
                        assert!(!p.is_null());
                        assert_eq!(p as usize % align, 0, "{size} bytes aligned to {align}");
                        if i % 2 == 1 {
                            // SAFETY: p is a live block of `size` bytes.
                            let bytes = unsafe { std::slice::from_raw_parts(p, size) };
                            assert!(bytes.iter().all(|&b| b == 0), "a zeroed block was not");
                        }
                        // SAFETY: p is a live block of `layout`; the new size is not zero.
                        let q = unsafe { heap.realloc(p, layout, size * 3) };
                        assert!(!q.is_null());
                        assert_eq!(
                            q as usize % align,
                            0,
                            "{size} -> {} bytes, {align}",
                            size * 3
                        );
                        q
                    })
                    .collect();
                let grown = Layout::from_size_align(size * 3, align).unwrap();
                for p in blocks {
                    // SAFETY: p is a live block of `grown`, freed once.
                    unsafe { heap.dealloc(p, grown) };
                }
            }
        }
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
