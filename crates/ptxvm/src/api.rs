//! The public contract softcuda codes against (docs/ARCHITECTURE.md): module metadata, the
//! memory trait, launch parameters, statistics and faults.

use std::fmt;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

/// A kernel's interface and resource needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelInfo {
    /// Mangled PTX entry name.
    pub name: String,
    /// Parameters in declaration order.
    pub params: Vec<ParamInfo>,
    /// Bytes of `.shared` memory the kernel declares statically (dynamic comes at launch).
    pub static_shared_bytes: u32,
    /// Bytes of `.local` memory per thread (locals, call frames).
    pub local_bytes_per_thread: u32,
    /// From `.maxntid`/`.reqntid`, the product of the dimensions.
    pub max_threads_per_block: Option<u32>,
    /// Registers the decoded kernel uses (declared plus hidden ones).
    pub num_regs: u32,
}

/// One kernel parameter's place in the packed parameter buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParamInfo {
    /// Name as declared.
    pub name: String,
    /// Byte offset in the buffer.
    pub offset: u32,
    /// Size in bytes.
    pub size: u32,
    /// Alignment in bytes.
    pub align: u32,
}

/// Where a module variable lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GlobalSpace {
    /// `.global`
    Global,
    /// `.const`
    Const,
}

/// A module-scope `.global` or `.const` variable; the driver allocates it and passes its
/// address back in `Launch::globals`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GlobalInfo {
    /// Name as declared.
    pub name: String,
    /// State space.
    pub space: GlobalSpace,
    /// Size in bytes.
    pub size: u64,
    /// Alignment in bytes.
    pub align: u32,
    /// Initial contents of the first `init.len()` bytes (at most `size`); the rest, and all of
    /// it when empty, is zero.
    pub init: Vec<u8>,
}

/// Device memory as the driver sees it.
///
/// `launch` reads, writes and atomically updates device memory through the host pointers this
/// trait returns, from several worker threads at once and without checking them further (beyond
/// alignment, below). That is why the trait is `unsafe` to implement: a wrong answer here is
/// undefined behaviour in the VM, not a kernel fault.
///
/// # Safety
///
/// For every `Some` an implementation returns, it promises, for the whole run of each `launch`
/// it is passed to (from the call that returned the pointer until that `launch` returns, since
/// the VM caches translations for the rest of the launch):
///
/// 1. **Valid for the whole range.** `translate(addr, len)`'s pointer `p` is valid for reads and
///    writes of `len` bytes, with provenance over all of them. `allocation(addr)`'s
///    `(base, len, p)` has `base <= addr < base + len` and `p` is valid for reads and writes of
///    `len` bytes; `p + (a - base)` is then the host byte of every device address `a` in the
///    range. The bytes are initialised (any bit pattern is fine: the VM treats them as plain
///    data).
/// 2. **Live.** The bytes are not freed, unmapped, made inaccessible or reused for anything
///    else until the launch returns.
/// 3. **Not aliased by Rust references.** While the launch runs, no `&` or `&mut` reference to
///    any of those bytes exists unless the bytes sit in an `UnsafeCell` (atomics, `Cell`s), and
///    no code the implementation controls accesses them other than atomically. The VM accesses
///    them with `std::sync::atomic` operations only, so concurrent kernel threads (and several
///    device addresses mapping the same host bytes) are data-race free. Accesses by a foreign
///    program that owns the memory (a CUDA host program racing its own kernel) are that
///    program's races, as on a GPU.
/// 4. **Shareable across threads.** The pointers may be used from any thread (`Memory: Sync`
///    already requires the same of `&self`).
///
/// Alignment is not part of the contract: before every access the VM checks the host pointer's
/// alignment itself and faults with [`FaultKind::MisalignedAddress`] rather than risk an
/// unaligned atomic. An implementation whose host addresses are congruent to the device
/// addresses modulo 16 (softcuda's identity mapping is) never sees that fault.
///
/// # Example
///
/// A sound implementation over memory that lives in `UnsafeCell`s (here atomics), so that
/// the `&self` the VM holds never aliases the bytes it writes:
///
/// ```
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use ptxvm::{Launch, Memory, Module};
///
/// struct Words(Box<[AtomicU64]>);
///
/// // SAFETY: the pointer is derived from the boxed slice, which covers [base, base + 8 * len)
/// // and lives as long as `self` (so across every launch that borrows it); the words are
/// // atomics, so the VM's writes through it alias no plain Rust reference.
/// unsafe impl Memory for Words {
///     fn translate(&self, addr: u64, len: u64) -> Option<*mut u8> {
///         let base = self.0.as_ptr() as u64;
///         let off = addr.checked_sub(base)?;
///         (off.checked_add(len)? <= 8 * self.0.len() as u64)
///             .then(|| self.0.as_ptr().cast::<u8>().wrapping_add(off as usize).cast_mut())
///     }
/// }
///
/// let mem = Words((0..4).map(|_| AtomicU64::new(0)).collect());
/// let m = Module::load(".version 7.0\n.target sm_80\n.address_size 64\n\
///     .visible .entry k(.param .u64 p) { .reg .b64 %rd<3>; ld.param.u64 %rd1, [p];\n\
///     mov.u64 %rd2, 42; st.global.u64 [%rd1+8], %rd2; ret; }").unwrap();
/// let params = (mem.0.as_ptr() as u64).to_le_bytes();
/// let l = Launch { kernel: 0, grid: [1, 1, 1], block: [1, 1, 1], dynamic_shared_bytes: 0,
///                  params: &params, globals: &[], workers: 1,
///                  cancel: None, deadline: None };
/// ptxvm::launch(&m, &l, &mem).unwrap();
/// assert_eq!(mem.0[1].load(Ordering::Relaxed), 42);
/// ```
pub unsafe trait Memory: Sync {
    /// Host pointer for `[addr, addr+len)` when the whole range lies inside one live
    /// allocation; `None` is an illegal address. See the trait's `# Safety` for what a `Some`
    /// promises.
    fn translate(&self, addr: u64, len: u64) -> Option<*mut u8>;

    /// The whole live allocation containing `addr`, as `(base, len, host pointer of base)`.
    /// Optional: lets the VM cache one translation per allocation. The default says "unknown",
    /// and the VM then probes with `translate` over small aligned windows. A `Some` makes the
    /// trait's `# Safety` promises for all `len` bytes.
    fn allocation(&self, addr: u64) -> Option<(u64, u64, *mut u8)> {
        let _ = addr;
        None
    }

    /// The texture object `handle` names (`tex`, `txq`), if it is live. Optional: the default
    /// knows none, so every texture instruction faults with [`FaultKind::InvalidHandle`]. The
    /// texels are read through `translate`, so this promises nothing about memory.
    fn texture(&self, handle: u64) -> Option<crate::image::Texture> {
        let _ = handle;
        None
    }

    /// The surface object `handle` names (`suld`, `sust`, `suq`), if it is live; as `texture`.
    fn surface(&self, handle: u64) -> Option<crate::image::Surface> {
        let _ = handle;
        None
    }
}

/// One kernel launch.
#[derive(Debug, Clone)]
pub struct Launch<'a> {
    /// Index into `Module::kernels`.
    pub kernel: usize,
    /// Blocks per grid.
    pub grid: [u32; 3],
    /// Threads per block.
    pub block: [u32; 3],
    /// Bytes of `.extern .shared` memory.
    pub dynamic_shared_bytes: u32,
    /// Parameters packed at `ParamInfo` offsets.
    pub params: &'a [u8],
    /// Device address of each `GlobalInfo`, same order.
    pub globals: &'a [u64],
    /// CPU threads to spread blocks over.
    pub workers: usize,
    /// Backstop watchdog: when set and it becomes `true`, the launch stops between warp time
    /// slices with `FaultKind::Timeout`.
    pub cancel: Option<&'a AtomicBool>,
    /// Backstop watchdog: past this instant the launch stops with `FaultKind::Timeout`.
    pub deadline: Option<Instant>,
}

/// Work done by a launch.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LaunchStats {
    /// Sum over executed instructions of the lanes that executed them.
    pub lane_instructions: u64,
    /// Instructions dispatched (once per warp, whatever the active lanes).
    pub warp_instructions: u64,
}

/// Why a kernel stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum FaultKind {
    /// An access outside every live allocation (or outside shared/local memory).
    IllegalAddress {
        /// First byte accessed.
        addr: u64,
        /// Access size.
        len: u32,
    },
    /// An access not aligned to its size.
    MisalignedAddress {
        /// The address.
        addr: u64,
    },
    /// `trap` or `brkpt` executed.
    Trap,
    /// Threads of a block wait at different barriers, or some can never arrive.
    BarrierDivergence,
    /// The launch configuration cannot run this kernel.
    InvalidLaunch(String),
    /// Call nesting exceeded the per-thread return stack.
    StackOverflow,
    /// A device-side `assert` failed (`__assertfail` was called).
    AssertFailed(Box<AssertFailure>),
    /// `brx.idx` with an index past the end of its branch table.
    BadBranchIndex {
        /// The index.
        index: u64,
    },
    /// The launch was cancelled or ran past its deadline (`Launch::cancel`/`deadline`).
    Timeout,
    /// A texture or surface instruction's handle names no live object of its kind.
    InvalidHandle {
        /// The handle.
        handle: u64,
    },
    /// A `suld`/`sust` in `.trap` mode (the default) addressed a texel outside its surface.
    SurfaceOutOfBounds {
        /// Byte x, row and slice (or layer) of the access.
        at: [i64; 3],
    },
    /// An `mbarrier` arrival or wait on a word that holds no barrier: never initialised by
    /// `mbarrier.init`, or overwritten since (NVIDIA's hardware ends the launch with
    /// `CUDA_ERROR_LAUNCH_FAILED` there too).
    NotABarrier {
        /// The word's address.
        addr: u64,
    },
    /// An `mbarrier` arrival counting more arrivals than its phase still waits for (NVIDIA
    /// loses the context there too).
    BarrierOverArrival {
        /// The barrier's address.
        addr: u64,
    },
}

/// What a failed device `assert` reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AssertFailure {
    /// The asserted expression, as the compiler wrote it.
    pub expression: String,
    /// The source file.
    pub file: String,
    /// The source line.
    pub line: u32,
    /// The function, as the compiler names it (`__PRETTY_FUNCTION__`).
    pub function: String,
}

/// A kernel fault, with where it happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault {
    /// What went wrong.
    pub kind: FaultKind,
    /// Kernel name.
    pub kernel: String,
    /// Block index of the faulting thread.
    pub block: [u32; 3],
    /// Thread index within the block.
    pub thread: [u32; 3],
    /// PTX source line of the faulting instruction (0 when not tied to one).
    pub line: u32,
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [bx, by, bz] = self.block;
        let [tx, ty, tz] = self.thread;
        let at = format!(
            "kernel {} block ({bx},{by},{bz}) thread ({tx},{ty},{tz}) at PTX line {}",
            self.kernel, self.line
        );
        match &self.kind {
            FaultKind::IllegalAddress { addr, len } => write!(
                f,
                "{at}: illegal address: {len}-byte access at {addr:#x} is outside every live \
                 allocation; check buffer sizes and index bounds"
            ),
            FaultKind::MisalignedAddress { addr } => write!(
                f,
                "{at}: misaligned address {addr:#x}; accesses must be aligned to their size"
            ),
            FaultKind::Trap => write!(f, "{at}: the kernel executed trap (an assertion failed?)"),
            FaultKind::BarrierDivergence => write!(
                f,
                "{at}: barrier divergence: not all threads of the block reach the same \
                 bar.sync; make __syncthreads() unconditional"
            ),
            FaultKind::InvalidLaunch(why) => {
                write!(f, "kernel {}: invalid launch: {why}", self.kernel)
            }
            FaultKind::StackOverflow => write!(f, "{at}: call stack overflow; reduce call nesting"),
            FaultKind::Timeout => write!(
                f,
                "kernel {}: stopped by the watchdog (cancelled or past its deadline); the kernel \
                 ran too long: bound its loops or raise the time limit",
                self.kernel
            ),
            FaultKind::AssertFailed(_) => {
                write!(f, "{}", self.assert_message().unwrap_or_default())
            }
            FaultKind::InvalidHandle { handle } => write!(
                f,
                "{at}: texture/surface handle {handle:#x} is not a live object of its kind; \
                 create it with cuTexObjectCreate/cuSurfObjectCreate and keep it until the \
                 kernel is done"
            ),
            FaultKind::SurfaceOutOfBounds { at: [x, y, z] } => write!(
                f,
                "{at}: surface access at byte x {x}, y {y}, z {z} is outside the surface; check \
                 the coordinates (x is in bytes) or use .clamp/.zero"
            ),
            FaultKind::BadBranchIndex { index } => write!(
                f,
                "{at}: brx.idx index {index} is past the end of its branch table"
            ),
            FaultKind::NotABarrier { addr } => write!(
                f,
                "{at}: mbarrier operation on shared word {addr:#x}, which holds no barrier; \
                 initialise it with mbarrier.init first, and do not overwrite it while it is in \
                 use"
            ),
            FaultKind::BarrierOverArrival { addr } => write!(
                f,
                "{at}: mbarrier arrival at {addr:#x} counts more arrivals than the phase still \
                 waits for; arrive with counts that add up to the count given to mbarrier.init"
            ),
        }
    }
}

impl Fault {
    /// For a failed device `assert`, the line NVIDIA's driver prints:
    /// `file:line: function: block: [x,y,z], thread: [x,y,z] Assertion `expr` failed.`
    pub fn assert_message(&self) -> Option<String> {
        let FaultKind::AssertFailed(a) = &self.kind else {
            return None;
        };
        let AssertFailure {
            expression,
            file,
            line,
            function,
        } = &**a;
        let [bx, by, bz] = self.block;
        let [tx, ty, tz] = self.thread;
        Some(format!(
            "{file}:{line}: {function}: block: [{bx},{by},{bz}], thread: [{tx},{ty},{tz}] \
             Assertion `{expression}` failed."
        ))
    }
}

impl std::error::Error for Fault {}
