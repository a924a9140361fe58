//! The process's allocator policy for large buffers, set once at start.
//!
//! A guest's `buffer.write` and `buffer.read` each pass through freshly allocated host buffers of
//! the transfer's size (wasmtime lifts a `list<u8>` into a new `Vec`; a read's bytes go to a new
//! `Vec` before they are lowered into the guest). glibc serves allocations over 32 MiB with a
//! fresh `mmap` and returns them with `munmap`, so every 64 MiB transfer first takes 16 384 page
//! faults. Keeping large blocks in the heap, reused, measured with `gpuhost bench --guest --quick`
//! on softcuda here (two runs each): guest writes 0.9–1.3 → 3.1–3.3 GB/s, reads 0.7–1.0 →
//! 1.9–2.0 GB/s (H200 figures in bench/RESULTS.md). The price: memory freed by large buffers stays in the process (up to 1 GiB
//! of free heap top is kept) instead of going back to the system at once.
//!
//! Set `GPUHOST_SYSTEM_MALLOC=1` (or any `MALLOC_*` tunable of your own) to leave glibc's
//! defaults alone.

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
