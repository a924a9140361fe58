//! The sandbox of one guest (Store), when `Limits::sandbox` is on: its modules are rewritten by
//! `ptxvm::sandbox` so that every access lands in the guest's own memory; that memory is one
//! gpuhost `Arena` (its buffers and its modules' globals blocks), the abort epoch and fault word
//! live in its `ControlBlock`, and each launch gets the rewriter's five hidden arguments.
//!
//! Hidden arguments (after the user's, in this order): the arena's base (as a zero-length anchor
//! buffer, so the arena outlives the launch), the bytes mapped now, the module's globals block
//! (0 when it has none), the control block (an anchor too), and the launch's epoch, tag and
//! start counter (`ptxvm::sandbox::launch_value`), with `LAUNCH_SKIPS_ENTRY_READ` on a launch
//! whose threads, each running until its first poll, stay within `SKIP_ENTRY_READ_WORK`
//! (`ptxvm::sandbox::skips_entry_read`). The tag names the kernel when it reports a fenced
//! access; the counter is its stream's (watchdog/).
//!
//! The rewritten kernels trust the arena's shape (base aligned to `MIN_ALIGN`, at least
//! `MIN_ARENA` mapped); [`Confinement::from_parts`] checks it once for each guest.

use std::sync::Arc;

use gpuhost::{Arg as GpuArg, DeviceBuffer, LaunchConfig as GpuConfig};
use ptxvm::sandbox::{Policy, SandboxedKernel};

use crate::bindings::WitError;
use crate::limits::{Limits, check_launch_local};
use crate::pool::Lent;
use crate::watchdog::{Stamp, StoreWatch};

/// Control block word where a kernel writes the tag of a launch that made a fenced access: in
/// the block's device window (kernels write it, the host reads it).
const CTL_FAULT_TAG: usize = ptxvm::sandbox::CTL_FAULT_TAG as usize;
const _: () = assert!(
    CTL_FAULT_TAG >= gpuhost::DEVICE_WINDOW
        && crate::watchdog::CTL_STOPPED_TAG + 4 <= gpuhost::DEVICE_WINDOW + gpuhost::CONTROL_BYTES
);
// Kernels count their starts where gpuhost keeps the counters it lets the host read.
const _: () = assert!(
    ptxvm::sandbox::CTL_STARTED as usize == gpuhost::START_COUNTER_OFFSET
        && ptxvm::sandbox::START_COUNTERS as usize == gpuhost::START_COUNTERS
);
/// Launch tags handed out per guest; later kernel names share the last one.
const MAX_TAGS: usize = ptxvm::sandbox::MAX_TAG as usize;
/// The hidden parameters the rewriter appends.
pub(crate) const HIDDEN: usize = ptxvm::sandbox::HIDDEN_PARAMS.len();

/// A sandboxed guest's memory, control block and watch.
pub(crate) struct Confinement {
    pub(crate) arena: Arc<gpuhost::Arena>,
    base_anchor: DeviceBuffer,
    ctl_anchor: DeviceBuffer,
    pub(crate) watch: Arc<StoreWatch>,
    /// Kernel names, by launch tag - 1.
    names: Vec<Arc<str>>,
    /// Where the arena and control block go when the guest is gone (None: they are freed).
    /// Last: fields drop in order, so the pair goes back once this value holds none of it.
    _back: Option<GiveBack>,
}

/// A pooled guest's pair, given back to its pool when dropped.
struct GiveBack {
    /// The loan: counted by the pool until the pair is back in it.
    lent: Lent,
    /// Taken (moved into the pool) when dropped.
    pair: Option<(Arc<gpuhost::Arena>, gpuhost::ControlBlock)>,
}

impl Drop for GiveBack {
    fn drop(&mut self) {
        // The pool resets the pair once nothing else holds it. Given after the confinement's
        // own handles (its anchors, its watch) are gone, and moved rather than cloned, a pair
        // with nothing in flight is free at once: the resetter's first pass resets it, not a
        // later tick.
        if let Some((arena, ctl)) = self.pair.take() {
            self.lent.pool.give(arena, ctl);
        }
    }
}

/// Bytes of a guest's arena under `limits`.
pub(crate) fn arena_bytes(limits: &Limits) -> u64 {
    let blocks = u64::from(limits.max_buffers).saturating_add(u64::from(limits.max_modules));
    limits
        .max_buffer_bytes
        .saturating_add(limits.max_globals_bytes)
        .saturating_add(blocks.saturating_mul(gpuhost::ARENA_ALIGN))
}

impl Confinement {
    /// The guest's arena (its buffer and globals quotas together, plus the rounding of each
    /// allocation to [`gpuhost::ARENA_ALIGN`]) and control block, both new.
    pub(crate) fn new(host: &Arc<gpuhost::Host>, limits: &Limits) -> Result<Self, gpuhost::Error> {
        let arena = host.arena(arena_bytes(limits))?;
        let ctl = host.control_block()?;
        Self::from_parts(arena, ctl, limits, None)
    }

    /// A confinement over `arena` and `ctl`, which no one else may hold (new, or reset by a
    /// [`crate::SandboxPool`]); when it drops they go back to the pool that lent them, if any. Refused when the arena
    /// does not have the shape rewritten kernels rely on (they do not check it themselves:
    /// `ptxvm::sandbox::Policy::check_arena_at_entry`). Its base never moves and its mapped
    /// part only grows, so once is enough.
    pub(crate) fn from_parts(
        arena: Arc<gpuhost::Arena>,
        ctl: gpuhost::ControlBlock,
        limits: &Limits,
        lent: Option<Lent>,
    ) -> Result<Self, gpuhost::Error> {
        use ptxvm::sandbox::{MIN_ALIGN, MIN_ARENA};
        if !arena.base().is_multiple_of(MIN_ALIGN) || arena.mapped() < MIN_ARENA {
            return Err(gpuhost::Error::Unsupported {
                feature: "sandboxed guests",
                reason: format!(
                    "the driver gave an arena at {:#x} with {} bytes mapped; the sandbox needs a base aligned to {MIN_ALIGN} bytes and at least {MIN_ARENA} bytes mapped (run the guest trusted, or use a driver with 2 MiB virtual-memory granularity)",
                    arena.base(),
                    arena.mapped()
                ),
            });
        }
        let back = lent.map(|lent| GiveBack {
            lent,
            pair: Some((arena.clone(), ctl.clone())),
        });
        Ok(Self {
            base_anchor: arena.anchor(),
            ctl_anchor: ctl.anchor(),
            arena,
            watch: StoreWatch::new(ctl, limits.max_kernel_time),
            names: Vec::new(),
            _back: back,
        })
    }

    /// The launch tag of kernel `name` (the same for every handle of that name).
    pub(crate) fn tag(&mut self, name: &str) -> (u32, Arc<str>) {
        if let Some(i) = self.names.iter().position(|n| &**n == name) {
            return (i as u32 + 1, self.names[i].clone());
        }
        if self.names.len() >= MAX_TAGS {
            return (MAX_TAGS as u32, Arc::from("(one of this guest's kernels)"));
        }
        let n: Arc<str> = Arc::from(name);
        self.names.push(n.clone());
        (self.names.len() as u32, n)
    }

    /// The hidden arguments of a launch of `k` with `cfg` given `stamp` by its stream's watch.
    pub(crate) fn hidden<'a>(
        &'a self,
        k: &'a KernelSandbox,
        cfg: &GpuConfig,
        stamp: Stamp,
    ) -> [GpuArg<'a>; HIDDEN] {
        let globals = match &k.module.globals {
            Some(g) => GpuArg::Buffer(g, 0),
            None => GpuArg::U64(0),
        };
        [
            GpuArg::Buffer(&self.base_anchor, 0),
            GpuArg::U64(self.arena.mapped()),
            globals,
            GpuArg::Buffer(&self.ctl_anchor, 0),
            Self::launch_word(k, cfg, stamp),
        ]
    }

    /// The last hidden argument: the abort epoch a launch is given, its kernel's tag, its
    /// stream's start counter, and whether it may skip the entry's epoch read.
    pub(crate) fn launch_word(k: &KernelSandbox, cfg: &GpuConfig, stamp: Stamp) -> GpuArg<'static> {
        let skip = k.skip_entry_read(cfg);
        GpuArg::U64(ptxvm::sandbox::launch_value(
            stamp.epoch,
            k.tag,
            stamp.counter,
            skip,
        ))
    }

    /// The kernel the last stop caught in the middle of a loop, as "kernel NAME" (None when
    /// none was: every launch stopped was still queued, or ended by itself).
    pub(crate) fn stopped_kernel(&self) -> Option<Arc<str>> {
        let tag = self.watch.ctl().load_u32(crate::watchdog::CTL_STOPPED_TAG);
        let name = self.names.get((tag as usize).checked_sub(1)?)?;
        Some(Arc::from(format!("kernel {name}")))
    }

    /// A fenced access reported by a kernel since the last call, as the guest's error.
    pub(crate) fn take_fault(&self) -> Option<WitError> {
        let ctl = self.watch.ctl();
        let tag = ctl.load_u32(CTL_FAULT_TAG);
        if tag == 0 {
            return None;
        }
        ctl.store_u32(CTL_FAULT_TAG, 0);
        let name = self
            .names
            .get(tag as usize - 1)
            .map_or("(unknown)", |n| &**n);
        Some(WitError::MemoryFenced(format!(
            "kernel {name} accessed memory outside this guest's own (an address past its buffers, or not one of them): the access was redirected into the guest's memory, or skipped, instead of faulting the device, so results of the work synchronized here are wrong; check the kernel's indexing and the addresses passed to it"
        )))
    }
}

impl Drop for Confinement {
    fn drop(&mut self) {
        // Stop the guest's kernels; the anchors its launches hold keep its memory until they end.
        // The pool reuses them only once those launches and the watch are gone (`_back`, which
        // drops after every other field).
        self.watch.store_dropped();
    }
}

/// Placeholders for the hidden arguments in launch checks that do not launch.
pub(crate) const HIDDEN_PLACEHOLDERS: [GpuArg<'static>; HIDDEN] = [GpuArg::U64(0); HIDDEN];

/// A sandboxed module of one guest: its globals block in the guest's arena and its kernels.
pub(crate) struct SandboxModule {
    pub(crate) globals: Option<DeviceBuffer>,
    /// Shared with the embedder's module cache, when it has one.
    pub(crate) kernels: Arc<[SandboxedKernel]>,
}

/// `LAUNCH_SKIPS_ENTRY_READ` for a launch with `cfg` of a kernel whose threads each run at most
/// `first_poll_span` instructions before they poll, when the whole launch's is small; else 0.
fn skip_entry_read(first_poll_span: u64, cfg: &GpuConfig) -> u64 {
    let dims = cfg.grid.iter().chain(&cfg.block);
    let threads = dims.fold(1u64, |n, &d| n.saturating_mul(u64::from(d)));
    ptxvm::sandbox::skips_entry_read(first_poll_span, threads)
}

/// The sandbox side of a kernel handle (and of a bound launch of it).
#[derive(Clone)]
pub(crate) struct KernelSandbox {
    pub(crate) module: Arc<SandboxModule>,
    pub(crate) user_params: usize,
    pub(crate) local_bytes: u64,
    pub(crate) tag: u32,
    pub(crate) name: Arc<str>,
    /// `ptxvm::sandbox::SandboxedKernel::first_poll_span`.
    pub(crate) first_poll_span: u64,
    /// The kernel's skip copy (`SandboxedKernel::skip_copy`), which the launches that may skip
    /// the entry's epoch read run instead: without the read, its branch and the compares.
    pub(crate) skip_copy: Option<Arc<gpuhost::Kernel>>,
    /// Whether the skip copy counts its launch's start (`SandboxedKernel::copy_counts_start`).
    pub(crate) copy_counts_start: bool,
}

impl KernelSandbox {
    /// `LAUNCH_SKIPS_ENTRY_READ` for a launch with `cfg` of this kernel, if it may skip the
    /// entry's epoch read; else 0.
    fn skip_entry_read(&self, cfg: &GpuConfig) -> u64 {
        skip_entry_read(self.first_poll_span, cfg)
    }

    /// What a launch with `cfg` adds to its stream's start counter (the watchdog counts it as
    /// issued): `ptxvm::sandbox::launch_starts`, or nothing for a launch of a skip copy that
    /// counts none (it never polls: it can neither run long nor be stopped).
    pub(crate) fn starts(&self, cfg: &GpuConfig) -> u32 {
        if !self.copy_counts_start && self.skip_copy_for(cfg).is_some() {
            return 0;
        }
        ptxvm::sandbox::launch_starts(cfg.grid, cfg.block)
    }

    /// The skip copy a launch with `cfg` runs instead of the kernel: when it may skip the
    /// entry's read and the kernel has one.
    pub(crate) fn skip_copy_for(&self, cfg: &GpuConfig) -> Option<&Arc<gpuhost::Kernel>> {
        self.skip_copy
            .as_ref()
            .filter(|_| self.skip_entry_read(cfg) != 0)
    }

    /// The user's argument count and the launch's local memory, checked against the quotas.
    pub(crate) fn check(
        &self,
        limits: &Limits,
        facts: &gpuhost::DeviceFacts,
        cfg: &GpuConfig,
        args: usize,
    ) -> Result<(), WitError> {
        if args != self.user_params {
            return Err(WitError::ArgMismatch(format!(
                "kernel {} takes {} arguments; {args} were given",
                self.name, self.user_params
            )));
        }
        let threads = [cfg.grid, cfg.block]
            .iter()
            .flatten()
            .fold(1u64, |n, d| n.saturating_mul(u64::from(*d)));
        check_launch_local(
            limits,
            &self.name,
            self.local_bytes,
            threads,
            facts.sm_count,
        )
    }
}

/// The sandbox's rewrite of PTX a sandboxed guest runs, its own module's or a granted bundle's
/// (one policy for both).
pub(crate) fn sandbox(ptx: &str) -> Result<ptxvm::sandbox::Sandboxed, ptxvm::Error> {
    ptxvm::sandbox::sandbox(ptx, &Policy::default())
}

/// Rewrites a guest's PTX; a refusal or parse error is `invalid-ptx` naming the line.
pub(crate) fn rewrite(ptx: &str) -> Result<ptxvm::sandbox::Sandboxed, WitError> {
    sandbox(ptx).map_err(|e| {
        WitError::InvalidPtx(format!(
            "the PTX sandbox refused this module: {e} (sandboxed guests may use only what the sandbox can confine)"
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(grid: [u32; 3], block: [u32; 3]) -> GpuConfig {
        GpuConfig {
            grid,
            block,
            shared_mem_bytes: 0,
        }
    }

    #[test]
    fn only_launches_whose_work_before_a_poll_is_small_skip_the_entry_read() {
        let skip = ptxvm::sandbox::LAUNCH_SKIPS_ENTRY_READ;
        let work = ptxvm::sandbox::SKIP_ENTRY_READ_WORK;
        let threads_65536 = cfg([256, 1, 1], [256, 1, 1]);
        assert_eq!(skip_entry_read(work >> 16, &threads_65536), skip);
        assert_eq!(skip_entry_read((work >> 16) + 1, &threads_65536), 0);
        assert_eq!(
            skip_entry_read(u64::MAX, &cfg([1; 3], [1; 3])),
            0,
            "never skips"
        );
        // Every dimension counts, without overflow.
        assert_eq!(skip_entry_read(4096, &cfg([2, 2, 2], [1024, 32, 2])), 0);
        let huge = cfg([u32::MAX; 3], [u32::MAX; 3]);
        assert_eq!(skip_entry_read(1, &huge), 0);
    }
}
