//! cuLaunchKernel: checks the configuration against the device and kernel limits as NVIDIA's
//! driver does, packs the parameters at ptxvm's offsets, and queues the run on the stream. A
//! fault while running makes the context's error sticky. A library kernel (CUkernel) given as
//! the function launches as its function in the stream's context.

use std::ffi::c_void;
use std::sync::Arc;

use cudarc::driver::sys::CUresult;

use crate::abi::CuResult;
use crate::context::Context;
use crate::device;
use crate::driver;
use crate::memory::{self, Block};
use crate::module;
use crate::stream::{self, Stream};

/// `CU_LAUNCH_PARAM_END`, `CU_LAUNCH_PARAM_BUFFER_POINTER`, `CU_LAUNCH_PARAM_BUFFER_SIZE`.
const PARAM_END: usize = 0;
const PARAM_BUFFER_POINTER: usize = 1;
const PARAM_BUFFER_SIZE: usize = 2;

/// One cuLaunchKernel call.
pub(crate) struct Request {
    /// CUfunction handle value.
    pub(crate) function: u64,
    /// Blocks per grid.
    pub(crate) grid: [u32; 3],
    /// Threads per block.
    pub(crate) block: [u32; 3],
    /// Dynamic shared memory bytes.
    pub(crate) shared: u32,
    /// CUstream handle value.
    pub(crate) stream: u64,
    /// `kernelParams`.
    pub(crate) params: *mut *mut c_void,
    /// `extra`.
    pub(crate) extra: *mut *mut c_void,
}

fn invalid() -> CUresult {
    CUresult::CUDA_ERROR_INVALID_VALUE
}

/// The parameter buffer from `kernelParams` (one pointer per parameter) or from `extra`
/// (`CU_LAUNCH_PARAM_BUFFER_POINTER`/`_SIZE` pairs ending with `CU_LAUNCH_PARAM_END`).
///
/// # Safety
/// `params`, if non-null, holds one readable pointer per kernel parameter, each to a value of
/// the parameter's size; `extra`, if non-null, is a `CU_LAUNCH_PARAM_END`-terminated list.
unsafe fn pack(
    info: &ptxvm::KernelInfo,
    params: *mut *mut c_void,
    extra: *mut *mut c_void,
) -> CuResult<Vec<u8>> {
    let size = info
        .params
        .iter()
        .map(|p| (p.offset + p.size) as usize)
        .max()
        .unwrap_or(0);
    let mut buf = vec![0u8; size];
    if !params.is_null() && !extra.is_null() {
        return Err(invalid());
    }
    if !params.is_null() {
        for (i, p) in info.params.iter().enumerate() {
            // SAFETY: `params` has one entry per parameter (caller contract).
            let src = unsafe { params.add(i).read() };
            if src.is_null() {
                return Err(invalid());
            }
            // SAFETY: `src` points to `p.size` readable bytes; `buf` has room by construction.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    src.cast::<u8>(),
                    buf.as_mut_ptr().add(p.offset as usize),
                    p.size as usize,
                )
            };
        }
        return Ok(buf);
    }
    if extra.is_null() {
        return if info.params.is_empty() {
            Ok(buf)
        } else {
            Err(invalid())
        };
    }
    let (mut pointer, mut given) = (std::ptr::null::<u8>(), None::<usize>);
    for i in (0..).step_by(2) {
        // SAFETY: the list is read pairwise up to its END marker (caller contract).
        let key = unsafe { extra.add(i).read() }.addr();
        if key == PARAM_END {
            break;
        }
        // SAFETY: every key other than END is followed by its value.
        let value = unsafe { extra.add(i + 1).read() };
        match key {
            PARAM_BUFFER_POINTER => pointer = value.cast(),
            PARAM_BUFFER_SIZE if !value.is_null() => {
                // SAFETY: the value of BUFFER_SIZE points to a size_t.
                given = Some(unsafe { value.cast::<usize>().read() });
            }
            _ => return Err(invalid()),
        }
    }
    let given = given.ok_or_else(invalid)?;
    if pointer.is_null() || given < size {
        return Err(invalid());
    }
    // SAFETY: the buffer holds `given >= size` readable bytes.
    unsafe { std::ptr::copy_nonoverlapping(pointer, buf.as_mut_ptr(), size) };
    Ok(buf)
}

/// Checks the configuration as NVIDIA's driver does: every limit breach is
/// `CUDA_ERROR_INVALID_VALUE`, returned at once and not sticky.
fn check_config(
    f: &module::Function,
    grid: [u32; 3],
    block: [u32; 3],
    shared: u32,
) -> CuResult<()> {
    if grid.contains(&0) || block.contains(&0) {
        return Err(invalid());
    }
    let over = |v: [u32; 3], max: [u32; 3]| v.iter().zip(max).any(|(&a, m)| a > m);
    if over(grid, device::MAX_GRID_DIM) || over(block, device::MAX_BLOCK_DIM) {
        return Err(invalid());
    }
    let threads = u64::from(block[0]) * u64::from(block[1]) * u64::from(block[2]);
    // Beyond the kernel's own `.maxntid` too (the H200 answered so, session 42), where a block
    // its registers cannot hold is CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES.
    if threads > u64::from(f.max_threads()) {
        return Err(invalid());
    }
    if shared > f.max_dynamic_shared() {
        return Err(invalid());
    }
    Ok(())
}

/// The allocations a kernel may touch, frozen at the start of its run.
struct Snapshot {
    ranges: Vec<(u64, u64, Arc<Block>)>,
}

impl Snapshot {
    fn containing(&self, addr: u64) -> Option<&(u64, u64, Arc<Block>)> {
        let i = self.ranges.partition_point(|r| r.0 <= addr);
        let r = self.ranges.get(i.checked_sub(1)?)?;
        (addr < r.1).then_some(r)
    }
}

// SAFETY: every pointer is `Block::at` of an allocation the snapshot holds an `Arc` to, so:
// (1) it keeps the block's provenance and `containing` bounds it to the allocation's own
// `[base, end)`, which the block's bytes back (zeroed at allocation, so initialised); (2) the
// `Arc`s keep every block alive until the snapshot drops, after `launch_with_output` returns,
// even if the program frees the allocation meanwhile; (3) softcuda's Rust code holds no
// references into device bytes (copies and memsets work through raw pointers), and what the
// CUDA program does to its own memory during a kernel is its race, as on a GPU; (4) `Block`
// is `Send + Sync`. Device and host addresses are equal, so alignment is preserved.
unsafe impl ptxvm::Memory for Snapshot {
    fn translate(&self, addr: u64, len: u64) -> Option<*mut u8> {
        let (base, end, block) = self.containing(addr)?;
        (addr.checked_add(len)? <= *end).then(|| block.at((addr - base) as usize))
    }

    fn allocation(&self, addr: u64) -> Option<(u64, u64, *mut u8)> {
        let (base, end, block) = self.containing(addr)?;
        Some((*base, end - base, block.at(0)))
    }

    fn texture(&self, handle: u64) -> Option<ptxvm::Texture> {
        crate::texobj::texture(handle)
    }

    fn surface(&self, handle: u64) -> Option<ptxvm::Surface> {
        crate::texobj::surface(handle)
    }
}

/// The `CUresult` a fault leaves in the context.
fn fault_code(kind: &ptxvm::FaultKind) -> CUresult {
    match kind {
        ptxvm::FaultKind::IllegalAddress { .. } => CUresult::CUDA_ERROR_ILLEGAL_ADDRESS,
        ptxvm::FaultKind::MisalignedAddress { .. } => CUresult::CUDA_ERROR_MISALIGNED_ADDRESS,
        ptxvm::FaultKind::Trap => CUresult::CUDA_ERROR_ILLEGAL_INSTRUCTION,
        ptxvm::FaultKind::AssertFailed(_) => CUresult::CUDA_ERROR_ASSERT,
        ptxvm::FaultKind::StackOverflow => CUresult::CUDA_ERROR_HARDWARE_STACK_ERROR,
        ptxvm::FaultKind::Timeout => CUresult::CUDA_ERROR_LAUNCH_TIMEOUT,
        _ => CUresult::CUDA_ERROR_LAUNCH_FAILED,
    }
}

/// Checks cuLaunchKernelEx's attributes (`CUlaunchAttributeID`, first 16 bytes of the value):
/// hints and orderings the one-stream-one-thread model already meets are accepted; what needs
/// a feature softcuda lacks (cooperative grids, clusters, programmatic events) is
/// `CUDA_ERROR_NOT_SUPPORTED`; an unknown id is `CUDA_ERROR_INVALID_VALUE`.
pub(crate) fn check_attributes(attrs: &[(u32, [u32; 4])]) -> CuResult<()> {
    for &(id, v) in attrs {
        match id {
            // Ignore, access policy window, synchronization policy, cluster scheduling
            // preference, programmatic stream serialization, priority, memory sync domain map
            // and domain, shared-memory carveout: hints, or orderings one stream already keeps.
            0 | 1 | 3 | 5 | 6 | 8 | 9 | 10 | 14 => {}
            // Cooperative launch: only `false` is honoured.
            2 if v[0] == 0 => {}
            // Cluster dimension: 1×1×1 (or unset) only.
            4 if v[..3].iter().all(|&d| d <= 1) => {}
            // Cooperative grids, clusters, programmatic and completion events, device-updatable
            // nodes: features softcuda lacks.
            2 | 4 | 7 | 11..=13 | 15 | 16 => return Err(CUresult::CUDA_ERROR_NOT_SUPPORTED),
            _ => return Err(CUresult::CUDA_ERROR_INVALID_VALUE),
        }
    }
    Ok(())
}

/// A kernel launch with its parameters packed: what a graph kernel node holds.
#[derive(Debug, Clone)]
pub(crate) struct Packed {
    /// CUfunction handle value.
    pub(crate) function: u64,
    pub(crate) grid: [u32; 3],
    pub(crate) block: [u32; 3],
    pub(crate) shared: u32,
    /// The parameter buffer at ptxvm's offsets.
    pub(crate) params: Vec<u8>,
}

/// Checks a launch description and packs its parameters (cuLaunchKernel's and graph kernel
/// nodes' shared front half); configuration errors are `CUDA_ERROR_INVALID_VALUE`. `f` is the
/// function behind handle `function`.
///
/// # Safety
/// `params` / `extra` follow cuLaunchKernel's contract (see [`pack`]).
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn prepare(
    f: &module::Function,
    function: u64,
    grid: [u32; 3],
    block: [u32; 3],
    shared: u32,
    params: *mut *mut c_void,
    extra: *mut *mut c_void,
) -> CuResult<Packed> {
    check_config(f, grid, block, shared)?;
    // SAFETY: forwarded caller contract.
    let params = unsafe { pack(f.info(), params, extra) }?;
    Ok(Packed {
        function,
        grid,
        block,
        shared,
        params,
    })
}

/// cuLaunchKernel: validated and packed now, run on the stream's worker (or recorded as a
/// kernel node when the stream is capturing).
///
/// # Safety
/// `req.params` / `req.extra` follow cuLaunchKernel's contract (see [`pack`]).
pub(crate) unsafe fn launch(req: &Request) -> CuResult<()> {
    let function = if driver::has_tag(req.function, driver::Tag::Kernel) {
        // A CUkernel runs in the stream's context (the current one for a NULL stream), as
        // NVIDIA documents for context-less kernels.
        let (ctx, _) = stream::resolve(req.stream)?;
        crate::library::resolve(req.function, Some(&ctx))?
    } else {
        req.function
    };
    let f = module::get_function(function)?;
    let (ctx, s) = stream::resolve(req.stream)?;
    if f.module.ctx_id != ctx.id {
        return Err(CUresult::CUDA_ERROR_INVALID_HANDLE);
    }
    // SAFETY: forwarded caller contract.
    let packed = unsafe {
        prepare(
            &f, function, req.grid, req.block, req.shared, req.params, req.extra,
        )
    }?;
    if let Some(capture) = crate::capture::active(req.stream) {
        return capture.add(req.stream, crate::graph::NodeKind::Kernel(packed));
    }
    submit(&f, &ctx, &s, packed);
    Ok(())
}

/// Queues a packed launch on a stream (a graph kernel node's launch).
pub(crate) fn enqueue(packed: Packed, stream_handle: u64) -> CuResult<()> {
    let f = module::get_function(packed.function)?;
    let (ctx, s) = stream::resolve(stream_handle)?;
    if f.module.ctx_id != ctx.id {
        return Err(CUresult::CUDA_ERROR_INVALID_HANDLE);
    }
    submit(&f, &ctx, &s, packed);
    Ok(())
}

/// Queues the run of a checked, packed launch.
fn submit(f: &module::Function, ctx: &Arc<Context>, s: &Arc<Stream>, packed: Packed) {
    // NVIDIA prints pending device output at the start of a launch.
    ctx.printf.flush();
    let Packed {
        grid,
        block,
        shared,
        params,
        ..
    } = packed;
    let (vm, globals, kernel) = (Arc::clone(&f.module.vm), f.module.globals.clone(), f.index);
    let run_ctx = Arc::clone(ctx);
    ctx.submit(
        s,
        Box::new(move || {
            if run_ctx.sticky().is_some() {
                return;
            }
            // Begins once its block fits beside the kernels resident on the device (only with
            // SOFTCUDA_RESIDENT_THREADS set), then counts while it runs: calls that wait for
            // running kernels wait for it.
            let blocks = grid.iter().map(|&d| u64::from(d)).product();
            let per_block = block.iter().map(|&d| u64::from(d)).product();
            let _resident = crate::residency::enter(run_ctx.device, blocks, per_block);
            let _running = crate::running::start(run_ctx.device);
            let mem = Snapshot {
                ranges: memory::visible_to(&run_ctx.visible_ids()),
            };
            let launch = ptxvm::Launch {
                kernel,
                grid,
                block,
                dynamic_shared_bytes: shared,
                params: &params,
                globals: &globals,
                workers: driver::cores(),
                cancel: None,
                deadline: driver::watchdog().map(|d| std::time::Instant::now() + d),
            };
            let out = ptxvm::DeviceOutput::new(run_ctx.printf_room());
            // An interpreter bug must not pass for a kernel that ran: it faults the context.
            let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                ptxvm::launch_with_output(&vm, &launch, &mem, &out)
            }));
            let (text, used, _) = out.take();
            run_ctx.printf.append(&text, used);
            match run {
                Ok(Ok(_)) => {}
                Ok(Err(fault)) => {
                    if let Some(line) = fault.assert_message() {
                        run_ctx.printf.append_assert(&line);
                    }
                    run_ctx.poison(fault_code(&fault.kind), fault.to_string())
                }
                Err(panic) => {
                    let why = panic
                        .downcast_ref::<&str>()
                        .map(|s| s.to_string())
                        .or_else(|| panic.downcast_ref::<String>().cloned())
                        .unwrap_or_default();
                    run_ctx.poison(
                        CUresult::CUDA_ERROR_LAUNCH_FAILED,
                        format!("softcuda internal error while running the kernel: {why}; please report it"),
                    );
                }
            }
        }),
    );
}
