//! Per-guest quotas (set by the embedder, defaults documented here) and the usage counted
//! against them. Every size or count a guest controls is capped by one of these.
//!
//! A module or buffer may be kept alive by more than its own handle (a kernel keeps its module
//! loaded, a bound launch its kernel and buffers): each holder carries a clone of one [`Charge`],
//! and the quota is released by the last holder dropped, when the device really frees it.

use std::ops::{Deref, DerefMut};
use std::sync::Arc;
use std::time::Duration;

use crate::bindings::WitError;
use crate::ctx::CudaCtxView;

/// Quotas for one guest (one Store). `Limits::default()` documents the defaults; the CLI exposes
/// each as a flag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Total bytes of module images (PTX text or cubin) the guest may have loaded at once.
    /// Default 16 MiB.
    pub max_module_bytes: u64,
    /// Modules loaded at once. Default 16.
    pub max_modules: u32,
    /// Size of one PTX text or cubin image. Default 4 MiB.
    pub max_ptx_bytes: u64,
    /// Live device buffers. Default 1024.
    pub max_buffers: u32,
    /// Bytes across live device buffers. Default 1 GiB.
    pub max_buffer_bytes: u64,
    /// Bytes moved by one `read` or `read-stream` (the guest's linear memory receives them).
    /// Default 64 MiB.
    pub max_transfer_bytes: u64,
    /// Bytes of the guest's linear memories that may be page-locked so its large writes are one
    /// DMA straight from guest memory (memories made by
    /// [`GuestMemoryCreator`](crate::GuestMemoryCreator), as [`Runtime`](crate::Runtime)'s
    /// are): in all, across the guest's memories (a component may have many, a core module
    /// each), pieces a memory reused from an earlier guest comes with included; writes beyond it
    /// are staged. 0 stages every write. Default 256 MiB.
    pub max_locked_memory_bytes: u64,
    /// Kernel launches enqueued and not yet observed complete. Default 1024.
    pub max_launches_in_flight: u32,
    /// Arguments of one launch. Default 64.
    pub max_launch_args: u32,
    /// Live streams plus events. Default 256.
    pub max_streams_and_events: u32,
    /// Live kernel handles plus bound launches (small host objects, each keeping a module
    /// loaded). Default 1024.
    pub max_kernels: u32,
    /// wasmtime fuel for the guest's CPU side (≈ one unit per wasm instruction); None: unmetered.
    /// Default 20 billion.
    pub fuel: Option<u64>,
    /// Linear memory of the guest, in bytes. Default 512 MiB.
    pub max_wasm_memory_bytes: usize,
    /// Confine the guest's kernels to its own memory (the PTX sandbox: every module is
    /// rewritten, buffers and globals come from one arena per guest, binary images are refused,
    /// launches are stopped past `max_kernel_time`). False marks the guest trusted: its PTX and
    /// cubins run unchanged, as native gpuhost code would. Default true.
    pub sandbox: bool,
    /// GPU time one launch may run before it is stopped (sandboxed guests): the next
    /// `synchronize` of its stream returns `time-limit`. Default 10 s.
    pub max_kernel_time: Duration,
    /// Bytes of module `.global`/`.const` variables across the guest's loaded modules
    /// (sandboxed guests: each module's globals are a block of the guest's memory). Default
    /// 64 MiB.
    pub max_globals_bytes: u64,
    /// Local memory one launch may make the device reserve: the kernel's local bytes per thread
    /// times the threads that can be resident at once (the launch's threads, at most the
    /// device's resident capacity). Sandboxed guests. Default 256 MiB.
    pub max_launch_local_bytes: u64,
    /// Launches of a trusted guest's burst on one stream collected into one CUDA graph at most
    /// (a longer burst is replayed as several); also the launch shapes each stream remembers as
    /// accepted by the driver. 0 turns graph batching off: every launch goes straight to its
    /// stream. Default 8: a full batch is issued at once, so the device runs one batch while
    /// the guest collects the next; on the H200 a burst of 32 bound launches cost 1.23–1.31 µs
    /// per kernel in batches of 8, 1.24–1.43 in 4, 1.64–1.69 in 16 and 1.87–1.90 in one batch of
    /// 32 (bench/h200-runs/2026-12-02-s14/27dee54/bench-guest-*.md).
    pub max_graph_batch: u32,
    /// Instantiated graphs one guest keeps for replay (least recently used dropped first).
    /// Default 8.
    pub max_cached_graphs: u32,
}

/// Threads one SM can hold at once on every architecture gpuhost targets (sm_50 and later).
pub(crate) const RESIDENT_THREADS_PER_SM: u64 = 2048;

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_module_bytes: 16 << 20,
            max_modules: 16,
            max_ptx_bytes: 4 << 20,
            max_buffers: 1024,
            max_buffer_bytes: 1 << 30,
            max_transfer_bytes: 64 << 20,
            max_locked_memory_bytes: 256 << 20,
            max_launches_in_flight: 1024,
            max_launch_args: 64,
            max_streams_and_events: 256,
            max_kernels: 1024,
            fuel: Some(20_000_000_000),
            max_wasm_memory_bytes: 512 << 20,
            sandbox: true,
            max_kernel_time: Duration::from_secs(10),
            max_globals_bytes: 64 << 20,
            max_launch_local_bytes: 256 << 20,
            max_graph_batch: 8,
            max_cached_graphs: 8,
        }
    }
}

/// What a guest holds now, counted against its [`Limits`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Usage {
    /// Bytes of live module images.
    pub module_bytes: u64,
    /// Live modules.
    pub modules: u32,
    /// Live buffers.
    pub buffers: u32,
    /// Bytes of live buffers.
    pub buffer_bytes: u64,
    /// Launches enqueued, not yet observed complete.
    pub launches_in_flight: u32,
    /// Live streams and events.
    pub streams_and_events: u32,
    /// Live kernel handles and bound launches.
    pub kernels: u32,
    /// Bytes of module globals (sandboxed guests).
    pub globals_bytes: u64,
    /// Instantiated graphs kept for replaying launch bursts.
    pub cached_graphs: u32,
}

/// What one module or buffer counts in its guest's quotas, shared by every handle keeping it
/// alive; [`Charge::release`] gives it back when the last of them goes.
#[derive(Clone)]
pub(crate) struct Charge(Arc<ChargeOf>);

#[derive(Clone, Copy)]
enum ChargeOf {
    /// A kernel of a bundle the embedder loaded: nothing counted against the guest's modules.
    Granted,
    /// Image bytes and globals bytes.
    Module(u64, u64),
    Buffer(u64),
}

impl Charge {
    /// The charge of a module image of `bytes` with `globals` bytes of globals, already
    /// reserved with [`Usage::add_module`] and [`Usage::add_globals`].
    pub(crate) fn module(bytes: u64, globals: u64) -> Self {
        Self(Arc::new(ChargeOf::Module(bytes, globals)))
    }

    /// The charge of a kernel of a granted bundle: the embedder loaded it, the guest pays none.
    pub(crate) fn granted() -> Self {
        Self(Arc::new(ChargeOf::Granted))
    }

    /// The charge of a buffer of `bytes`, already reserved with [`Usage::add_buffer`].
    pub(crate) fn buffer(bytes: u64) -> Self {
        Self(Arc::new(ChargeOf::Buffer(bytes)))
    }

    /// Drops this holder's share; the last share gives the reservation back to `usage`. (A
    /// Store's data is used by one thread at a time, so the count cannot change under us.)
    pub(crate) fn release(self, usage: &mut Usage) {
        if Arc::strong_count(&self.0) == 1 {
            match *self.0 {
                ChargeOf::Granted => {}
                ChargeOf::Module(bytes, globals) => {
                    usage.remove_module(bytes);
                    usage.remove_globals(globals);
                }
                ChargeOf::Buffer(bytes) => usage.remove_buffer(bytes),
            }
        }
    }
}

/// What holds a guest's quotas: a Store's gpuhost:cuda view (a bare pair in tests).
pub(crate) trait Quotas {
    /// The guest's limits and its usage counted against them.
    fn quotas(&mut self) -> (&Limits, &mut Usage);
}

impl Quotas for CudaCtxView<'_> {
    fn quotas(&mut self) -> (&Limits, &mut Usage) {
        (&self.ctx.limits, &mut self.ctx.usage)
    }
}

/// A sandboxed module's globals block counted in the globals quota while the module is being
/// made: charged by [`GlobalsCharge::new`], given back on drop unless committed, so a module
/// that fails to load leaves the quota as it was. Derefs to what it charged, for the work that
/// may fail.
pub(crate) struct GlobalsCharge<'q, Q: Quotas> {
    owner: &'q mut Q,
    bytes: u64,
    committed: bool,
}

impl<'q, Q: Quotas> GlobalsCharge<'q, Q> {
    /// Reserves `bytes` of module globals; refused (nothing charged) when over the quota.
    pub(crate) fn new(owner: &'q mut Q, bytes: u64) -> Result<Self, WitError> {
        let (limits, usage) = owner.quotas();
        usage.add_globals(limits, bytes)?;
        Ok(Self {
            owner,
            bytes,
            committed: false,
        })
    }

    /// Keeps the charge, now the module exists; returns its bytes, which the module's
    /// [`Charge`] (or the guest's bundle module) gives back from then on.
    pub(crate) fn commit(mut self) -> u64 {
        self.committed = true;
        self.bytes
    }
}

impl<Q: Quotas> Deref for GlobalsCharge<'_, Q> {
    type Target = Q;
    fn deref(&self) -> &Q {
        self.owner
    }
}

impl<Q: Quotas> DerefMut for GlobalsCharge<'_, Q> {
    fn deref_mut(&mut self) -> &mut Q {
        self.owner
    }
}

impl<Q: Quotas> Drop for GlobalsCharge<'_, Q> {
    fn drop(&mut self) {
        if !self.committed {
            self.owner.quotas().1.remove_globals(self.bytes);
        }
    }
}

/// Counts one more of something capped at `limit`, or refuses naming `what`.
fn reserve(count: &mut u32, limit: u32, what: &str) -> Result<(), WitError> {
    if *count >= limit {
        return Err(over(what, u64::from(*count) + 1, limit.into()));
    }
    *count += 1;
    Ok(())
}

fn over(what: &str, want: u64, limit: u64) -> WitError {
    WitError::QuotaExceeded(format!(
        "{what}: this would make {want}, over the guest's limit of {limit}; free some first or ask the embedder to raise it"
    ))
}

impl Usage {
    /// Reserves one module of `bytes`; refused when over a quota.
    pub fn add_module(&mut self, l: &Limits, bytes: u64) -> Result<(), WitError> {
        if bytes > l.max_ptx_bytes {
            return Err(over("module image size (bytes)", bytes, l.max_ptx_bytes));
        }
        if self.modules >= l.max_modules {
            return Err(over(
                "loaded modules",
                u64::from(self.modules) + 1,
                l.max_modules.into(),
            ));
        }
        let total = self.module_bytes.saturating_add(bytes);
        if total > l.max_module_bytes {
            return Err(over("loaded module bytes", total, l.max_module_bytes));
        }
        self.modules += 1;
        self.module_bytes = total;
        Ok(())
    }

    /// Releases a module reserved by [`Usage::add_module`].
    pub fn remove_module(&mut self, bytes: u64) {
        self.modules = self.modules.saturating_sub(1);
        self.module_bytes = self.module_bytes.saturating_sub(bytes);
    }

    /// Reserves `bytes` of module globals; refused when over the quota.
    pub fn add_globals(&mut self, l: &Limits, bytes: u64) -> Result<(), WitError> {
        let total = self.globals_bytes.saturating_add(bytes);
        if total > l.max_globals_bytes {
            return Err(over("module globals bytes", total, l.max_globals_bytes));
        }
        self.globals_bytes = total;
        Ok(())
    }

    /// Releases globals reserved by [`Usage::add_globals`].
    pub fn remove_globals(&mut self, bytes: u64) {
        self.globals_bytes = self.globals_bytes.saturating_sub(bytes);
    }

    /// Reserves one buffer of `bytes`; refused when over a quota.
    pub fn add_buffer(&mut self, l: &Limits, bytes: u64) -> Result<(), WitError> {
        if self.buffers >= l.max_buffers {
            return Err(over(
                "live buffers",
                u64::from(self.buffers) + 1,
                l.max_buffers.into(),
            ));
        }
        let total = self.buffer_bytes.saturating_add(bytes);
        if total > l.max_buffer_bytes {
            return Err(over("buffer bytes", total, l.max_buffer_bytes));
        }
        self.buffers += 1;
        self.buffer_bytes = total;
        Ok(())
    }

    /// Releases a buffer reserved by [`Usage::add_buffer`].
    pub fn remove_buffer(&mut self, bytes: u64) {
        self.buffers = self.buffers.saturating_sub(1);
        self.buffer_bytes = self.buffer_bytes.saturating_sub(bytes);
    }

    /// Reserves one stream or event.
    pub fn add_stream_or_event(&mut self, l: &Limits) -> Result<(), WitError> {
        let (count, limit) = (&mut self.streams_and_events, l.max_streams_and_events);
        reserve(count, limit, "live streams and events")
    }

    /// Releases a stream or event.
    pub fn remove_stream_or_event(&mut self) {
        self.streams_and_events = self.streams_and_events.saturating_sub(1);
    }

    /// Reserves one kernel handle or bound launch.
    pub fn add_kernel(&mut self, l: &Limits) -> Result<(), WitError> {
        let (count, limit) = (&mut self.kernels, l.max_kernels);
        reserve(count, limit, "live kernel handles and bound launches")
    }

    /// Releases a kernel handle or bound launch.
    pub fn remove_kernel(&mut self) {
        self.kernels = self.kernels.saturating_sub(1);
    }

    /// Checks that one more launch fits.
    pub fn check_launch(&self, l: &Limits) -> Result<(), WitError> {
        if self.launches_in_flight >= l.max_launches_in_flight {
            let want = u64::from(self.launches_in_flight) + 1;
            return Err(over(
                "launches in flight (synchronize a stream)",
                want,
                l.max_launches_in_flight.into(),
            ));
        }
        Ok(())
    }
}

/// Checks the local memory a launch of `threads` threads makes the device reserve, at
/// `per_thread` bytes each, on a device of `sm_count` SMs: only resident threads hold local
/// memory at once, so the count is capped by the device's resident capacity.
pub fn check_launch_local(
    l: &Limits,
    kernel: &str,
    per_thread: u64,
    threads: u64,
    sm_count: u32,
) -> Result<(), WitError> {
    let resident = u64::from(sm_count.max(1)) * RESIDENT_THREADS_PER_SM;
    let bytes = per_thread.saturating_mul(threads.min(resident));
    if bytes > l.max_launch_local_bytes {
        return Err(WitError::QuotaExceeded(format!(
            "launch local memory of kernel {kernel}: {per_thread} bytes per thread x {} resident threads = {bytes} bytes, over the guest's limit of {}; use less local memory per thread (smaller local arrays, shallower calls) or fewer threads, or ask the embedder to raise it",
            threads.min(resident),
            l.max_launch_local_bytes
        )));
    }
    Ok(())
}

/// Checks that `[offset, offset + len)` lies inside `size` bytes and converts it for gpuhost.
pub fn check_range(
    what: &str,
    offset: u64,
    len: u64,
    size: usize,
) -> Result<(usize, usize), WitError> {
    let size = size as u64;
    match offset.checked_add(len) {
        Some(end) if end <= size => Ok((offset as usize, len as usize)),
        _ => Err(WitError::OutOfBounds(format!(
            "{what}: bytes [{offset}, {offset} + {len}) do not fit in a buffer of {size} bytes"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffer_count_quota_refuses_one_past_the_limit_and_frees_on_remove() {
        let l = Limits {
            max_buffers: 2,
            ..Limits::default()
        };
        let mut u = Usage::default();
        u.add_buffer(&l, 8).unwrap();
        u.add_buffer(&l, 8).unwrap();
        assert!(matches!(
            u.add_buffer(&l, 8),
            Err(WitError::QuotaExceeded(_))
        ));
        u.remove_buffer(8);
        u.add_buffer(&l, 8).unwrap();
        assert_eq!(u.buffer_bytes, 16);
    }

    #[test]
    fn buffer_byte_quota_counts_the_total() {
        let l = Limits {
            max_buffer_bytes: 100,
            ..Limits::default()
        };
        let mut u = Usage::default();
        u.add_buffer(&l, 60).unwrap();
        assert!(
            matches!(u.add_buffer(&l, 41), Err(WitError::QuotaExceeded(m)) if m.contains("101"))
        );
        u.add_buffer(&l, 40).unwrap();
    }

    #[test]
    fn module_quota_checks_image_size_count_and_total() {
        let l = Limits {
            max_ptx_bytes: 10,
            max_modules: 2,
            max_module_bytes: 15,
            ..Limits::default()
        };
        let mut u = Usage::default();
        assert!(u.add_module(&l, 11).is_err());
        u.add_module(&l, 10).unwrap();
        assert!(u.add_module(&l, 6).is_err());
        u.add_module(&l, 5).unwrap();
        assert!(u.add_module(&l, 0).is_err());
        u.remove_module(5);
        assert_eq!((u.modules, u.module_bytes), (1, 10));
    }

    #[test]
    fn a_shared_charge_is_released_by_its_last_holder_only() {
        let l = Limits::default();
        let mut u = Usage::default();
        u.add_module(&l, 100).unwrap();
        let module = Charge::module(100, 0);
        let kernel = module.clone();
        module.release(&mut u);
        assert_eq!(
            (u.modules, u.module_bytes),
            (1, 100),
            "the kernel still holds it"
        );
        kernel.release(&mut u);
        assert_eq!((u.modules, u.module_bytes), (0, 0));
        u.add_buffer(&l, 8).unwrap();
        let buf = Charge::buffer(8);
        let bound = [buf.clone(), buf.clone()];
        buf.release(&mut u);
        let [a, b] = bound;
        a.release(&mut u);
        assert_eq!(u.buffers, 1, "one bound argument still holds it");
        b.release(&mut u);
        assert_eq!((u.buffers, u.buffer_bytes), (0, 0));
    }

    #[test]
    fn globals_quota_counts_the_total_and_is_released_with_the_module() {
        let l = Limits {
            max_globals_bytes: 100,
            ..Limits::default()
        };
        let mut u = Usage::default();
        u.add_module(&l, 10).unwrap();
        u.add_globals(&l, 60).unwrap();
        let first = Charge::module(10, 60);
        assert!(
            matches!(u.add_globals(&l, 41), Err(WitError::QuotaExceeded(m)) if m.contains("globals"))
        );
        first.release(&mut u);
        assert_eq!((u.modules, u.globals_bytes), (0, 0));
        u.add_globals(&l, 100).unwrap();
    }

    impl Quotas for (Limits, Usage) {
        fn quotas(&mut self) -> (&Limits, &mut Usage) {
            (&self.0, &mut self.1)
        }
    }

    #[test]
    fn globals_charge_is_given_back_on_drop_unless_committed() {
        let l = Limits {
            max_globals_bytes: 100,
            ..Limits::default()
        };
        let mut q = (l, Usage::default());
        drop(GlobalsCharge::new(&mut q, 60).unwrap());
        assert_eq!(q.1.globals_bytes, 0, "an uncommitted charge is undone");
        let committed = GlobalsCharge::new(&mut q, 60).unwrap().commit();
        assert_eq!((committed, q.1.globals_bytes), (60, 60));
        assert!(matches!(
            GlobalsCharge::new(&mut q, 41),
            Err(WitError::QuotaExceeded(m)) if m.contains("globals")
        ));
        assert_eq!(q.1.globals_bytes, 60, "a refused charge counts nothing");
    }

    #[test]
    fn launch_local_memory_counts_resident_threads_only() {
        let l = Limits {
            max_launch_local_bytes: 1 << 20,
            ..Limits::default()
        };
        // 256 bytes x 4096 threads = 1 MiB: fits exactly.
        check_launch_local(&l, "k", 256, 4096, 100).unwrap();
        assert!(matches!(
            check_launch_local(&l, "k", 256, 4097, 100),
            Err(WitError::QuotaExceeded(m)) if m.contains("kernel k")
        ));
        // A huge grid on a 1-SM device: only 2048 threads are resident.
        check_launch_local(&l, "k", 512, u64::MAX, 1).unwrap();
        assert!(check_launch_local(&l, "k", 513, u64::MAX, 1).is_err());
        assert!(check_launch_local(&l, "k", u64::MAX, 2, 1).is_err());
    }

    #[test]
    fn kernel_quota_refuses_one_past_the_limit() {
        let l = Limits {
            max_kernels: 1,
            ..Limits::default()
        };
        let mut u = Usage::default();
        u.add_kernel(&l).unwrap();
        assert!(matches!(u.add_kernel(&l), Err(WitError::QuotaExceeded(_))));
        u.remove_kernel();
        u.add_kernel(&l).unwrap();
    }

    #[test]
    fn range_check_rejects_overflow_and_accepts_exact_end() {
        assert_eq!(check_range("r", 60, 4, 64).unwrap(), (60, 4));
        assert!(check_range("r", 61, 4, 64).is_err());
        assert!(check_range("r", u64::MAX, 2, 64).is_err());
        assert_eq!(check_range("r", 64, 0, 64).unwrap(), (64, 0));
    }
}
