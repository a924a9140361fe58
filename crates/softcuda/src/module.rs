//! Modules and functions: PTX loaded through ptxvm into a context, the module's globals allocated
//! in that context, and one stable function handle per kernel.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI32, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use cudarc::driver::sys::{CUfunction_attribute as F, CUresult};

use crate::abi::CuResult;
use crate::context;
use crate::device;
use crate::driver::Tag;
use crate::handles::Table;
use crate::image::LoadError;
use crate::memory::{self, Kind};

/// A loaded module.
pub(crate) struct Module {
    /// Owning context's id.
    pub(crate) ctx_id: u64,
    /// The decoded program.
    pub(crate) vm: Arc<ptxvm::Module>,
    /// Device address of each of `vm.globals()`, same order.
    pub(crate) globals: Vec<u64>,
    /// Kernel index → function handle, so a name always yields the same handle.
    functions: Mutex<HashMap<usize, u64>>,
}

/// One kernel of a module, as a CUfunction.
pub(crate) struct Function {
    /// The module it belongs to.
    pub(crate) module: Arc<Module>,
    /// Index into the module's kernels.
    pub(crate) index: usize,
    /// `CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`.
    max_dynamic_shared: AtomicU32,
    /// `CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT`.
    carveout: AtomicI32,
}

static MODULES: Table<Module> = Table::new(Tag::Module);
static FUNCTIONS: Table<Function> = Table::new(Tag::Function);

impl Function {
    /// The kernel's description.
    pub(crate) fn info(&self) -> &ptxvm::KernelInfo {
        &self.module.vm.kernels()[self.index]
    }

    /// The most dynamic shared memory a launch may ask for.
    pub(crate) fn max_dynamic_shared(&self) -> u32 {
        self.max_dynamic_shared.load(Ordering::Relaxed)
    }

    /// Threads per block the kernel allows (its `.maxntid`, else the device limit).
    pub(crate) fn max_threads(&self) -> u32 {
        self.info()
            .max_threads_per_block
            .map_or(device::MAX_THREADS_PER_BLOCK, |m| {
                m.min(device::MAX_THREADS_PER_BLOCK)
            })
    }
}

pub(crate) fn load_error(e: &ptxvm::Error) -> LoadError {
    let code = match e {
        ptxvm::Error::Unsupported { .. } => CUresult::CUDA_ERROR_NOT_SUPPORTED,
        // NVIDIA's JIT linker answers a link error (undefined or multiply defined symbol) so.
        ptxvm::Error::Undefined { .. }
        | ptxvm::Error::Conflict { .. }
        | ptxvm::Error::Incompatible { .. } => CUresult::CUDA_ERROR_INVALID_SOURCE,
        _ => CUresult::CUDA_ERROR_INVALID_PTX,
    };
    (code, e.to_string())
}

/// Loads PTX text into the current context: decodes it and allocates its globals.
pub(crate) fn load(ptx: &str) -> Result<u64, LoadError> {
    let ctx = context::live().map_err(|c| (c, String::new()))?;
    let vm = ptxvm::Module::load(ptx).map_err(|e| load_error(&e))?;
    let mut globals = Vec::with_capacity(vm.globals().len());
    for g in vm.globals() {
        match memory::alloc(ctx.id, g.size.max(1), Kind::Device) {
            Ok(addr) => {
                let n = g.init.len().min(g.size as usize);
                if n > 0
                    && let Ok(span) = memory::span(addr, n as u64)
                {
                    // SAFETY: the span covers n fresh bytes that nothing else can see yet.
                    unsafe { std::ptr::copy_nonoverlapping(g.init.as_ptr(), span.ptr(), n) };
                }
                globals.push(addr);
            }
            Err(code) => {
                for addr in globals {
                    let _ = memory::free(addr, &[Kind::Device]);
                }
                return Err((
                    code,
                    format!(
                        "no device memory for global `{}` ({} bytes)",
                        g.name, g.size
                    ),
                ));
            }
        }
    }
    let (handle, _) = MODULES.insert_with(|_| {
        Arc::new(Module {
            ctx_id: ctx.id,
            vm: Arc::new(vm),
            globals,
            functions: Mutex::new(HashMap::new()),
        })
    });
    Ok(handle)
}

fn get(handle: u64) -> CuResult<Arc<Module>> {
    crate::driver::ensure_init()?;
    MODULES
        .get(handle)
        .ok_or(CUresult::CUDA_ERROR_INVALID_HANDLE)
}

/// The module behind `handle`, in a context that is usable (not faulted).
fn get_usable(handle: u64) -> CuResult<Arc<Module>> {
    let module = get(handle)?;
    let ctx = context::by_id(module.ctx_id).ok_or(CUresult::CUDA_ERROR_INVALID_HANDLE)?;
    ctx.check_usable()?;
    Ok(module)
}

/// cuModuleUnload: waits for the context's work (kernels may still use the globals), then frees.
pub(crate) fn unload(handle: u64) -> CuResult<()> {
    let module = get(handle)?;
    if let Some(ctx) = context::by_id(module.ctx_id) {
        ctx.synchronize()?;
    }
    MODULES.remove(handle);
    FUNCTIONS.remove_where(|f| Arc::ptr_eq(&f.module, &module));
    for &addr in &module.globals {
        let _ = memory::free(addr, &[Kind::Device]);
    }
    Ok(())
}

/// cuModuleGetFunction: the same handle every time for the same kernel.
pub(crate) fn function(handle: u64, name: &str) -> CuResult<u64> {
    let module = get_usable(handle)?;
    let index = module
        .vm
        .kernel_index(name)
        .ok_or(CUresult::CUDA_ERROR_NOT_FOUND)?;
    let mut functions = module
        .functions
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    if let Some(&f) = functions.get(&index) {
        return Ok(f);
    }
    let info = &module.vm.kernels()[index];
    let default_dynamic = device::MAX_SHARED_PER_BLOCK.saturating_sub(info.static_shared_bytes);
    let (f, _) = FUNCTIONS.insert_with(|_| {
        Arc::new(Function {
            module: Arc::clone(&module),
            index,
            max_dynamic_shared: AtomicU32::new(default_dynamic),
            carveout: AtomicI32::new(-1),
        })
    });
    functions.insert(index, f);
    Ok(f)
}

/// cuModuleGetGlobal: (address, size) of a `.global` or `.const` variable.
pub(crate) fn global(handle: u64, name: &str) -> CuResult<(u64, u64)> {
    let module = get_usable(handle)?;
    let i = module
        .vm
        .globals()
        .iter()
        .position(|g| g.name == name)
        .ok_or(CUresult::CUDA_ERROR_NOT_FOUND)?;
    Ok((module.globals[i], module.vm.globals()[i].size))
}

/// The live function behind `handle`.
pub(crate) fn get_function(handle: u64) -> CuResult<Arc<Function>> {
    crate::driver::ensure_init()?;
    FUNCTIONS
        .get(handle)
        .ok_or(CUresult::CUDA_ERROR_INVALID_HANDLE)
}

/// cuFuncGetAttribute for a raw `CUfunction_attribute`.
pub(crate) fn attribute(handle: u64, attr: u32) -> CuResult<i32> {
    let f = get_function(handle)?;
    let info = f.info();
    let clamp = |v: u64| i32::try_from(v).unwrap_or(i32::MAX);
    let const_bytes: u64 = f
        .module
        .vm
        .globals()
        .iter()
        .filter(|g| g.space == ptxvm::GlobalSpace::Const)
        .map(|g| g.size)
        .sum();
    let table: [(F, i32); 10] = [
        (
            F::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
            clamp(f.max_threads().into()),
        ),
        (
            F::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES,
            clamp(info.static_shared_bytes.into()),
        ),
        (F::CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES, clamp(const_bytes)),
        (
            F::CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES,
            clamp(info.local_bytes_per_thread.into()),
        ),
        (F::CU_FUNC_ATTRIBUTE_NUM_REGS, clamp(info.num_regs.into())),
        (
            F::CU_FUNC_ATTRIBUTE_PTX_VERSION,
            f.module.vm.target_arch().map_or(0, |v| clamp(v.into())),
        ),
        (F::CU_FUNC_ATTRIBUTE_BINARY_VERSION, 90),
        (F::CU_FUNC_ATTRIBUTE_CACHE_MODE_CA, 0),
        (
            F::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            clamp(f.max_dynamic_shared().into()),
        ),
        (
            F::CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT,
            f.carveout.load(Ordering::Relaxed),
        ),
    ];
    table
        .iter()
        .find(|(a, _)| *a as u32 == attr)
        .map(|&(_, v)| v)
        .ok_or(CUresult::CUDA_ERROR_INVALID_VALUE)
}

/// cuFuncSetAttribute: the dynamic shared memory limit (up to the opt-in maximum) and the
/// carveout preference are writable; everything else is `CUDA_ERROR_INVALID_VALUE`.
pub(crate) fn set_attribute(handle: u64, attr: u32, value: i32) -> CuResult<()> {
    let f = get_function(handle)?;
    if attr == F::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES as u32 {
        let v = u32::try_from(value).map_err(|_| CUresult::CUDA_ERROR_INVALID_VALUE)?;
        if u64::from(v) + u64::from(f.info().static_shared_bytes)
            > u64::from(device::MAX_SHARED_PER_BLOCK_OPTIN)
        {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        }
        f.max_dynamic_shared.store(v, Ordering::Relaxed);
        return Ok(());
    }
    if attr == F::CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT as u32 {
        if !(-1..=100).contains(&value) {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        }
        f.carveout.store(value, Ordering::Relaxed);
        return Ok(());
    }
    Err(CUresult::CUDA_ERROR_INVALID_VALUE)
}

/// cuFuncGetParamInfo: (offset, size) of parameter `index`.
pub(crate) fn param_info(handle: u64, index: usize) -> CuResult<(u64, u64)> {
    let f = get_function(handle)?;
    let p = f
        .info()
        .params
        .get(index)
        .ok_or(CUresult::CUDA_ERROR_INVALID_VALUE)?;
    Ok((p.offset.into(), p.size.into()))
}

/// Blocks of `block_size` threads that fit on one SM (threads, blocks, shared memory and
/// registers, with H100/H200 limits).
pub(crate) fn occupancy(handle: u64, block_size: i32, dynamic_shared: usize) -> CuResult<i32> {
    let f = get_function(handle)?;
    let bs = u32::try_from(block_size).map_err(|_| CUresult::CUDA_ERROR_INVALID_VALUE)?;
    if bs == 0 {
        return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
    }
    if bs > f.max_threads() {
        return Ok(0);
    }
    let warps = bs.div_ceil(device::WARP_SIZE);
    let by_threads = device::MAX_THREADS_PER_SM / (warps * device::WARP_SIZE);
    let shared = u64::from(f.info().static_shared_bytes) + dynamic_shared as u64;
    let by_shared = if shared == 0 {
        u64::from(device::MAX_BLOCKS_PER_SM)
    } else {
        u64::from(device::MAX_SHARED_PER_SM) / (shared + 1024)
    };
    let regs = u64::from(f.info().num_regs.max(1)) * u64::from(warps * device::WARP_SIZE);
    let by_regs = u64::from(device::REGISTERS) / regs;
    let n = u64::from(by_threads.min(device::MAX_BLOCKS_PER_SM))
        .min(by_shared)
        .min(by_regs);
    Ok(n as i32)
}

/// cuOccupancyMaxPotentialBlockSize: the block size (a multiple of the warp size, at most
/// `limit` when positive) with the most resident threads per SM, the largest on ties, and the
/// grid that fills every SM with it. `smem_for` gives the dynamic shared memory per block size.
pub(crate) fn potential_block_size(
    handle: u64,
    smem_for: &dyn Fn(u32) -> usize,
    limit: i32,
) -> CuResult<(i32, i32)> {
    let f = get_function(handle)?;
    let mut max = f.max_threads();
    if limit > 0 {
        max = max.min(limit as u32);
    }
    let mut best = (0i32, 0i32, 0u64);
    let mut bs = max - max % device::WARP_SIZE;
    while bs >= device::WARP_SIZE {
        let smem = smem_for(bs);
        if smem as u64 <= u64::from(f.max_dynamic_shared()) {
            let blocks = occupancy(handle, bs as i32, smem)?;
            let threads = blocks as u64 * u64::from(bs);
            if threads > best.2 {
                best = (blocks, bs as i32, threads);
            }
        }
        bs -= device::WARP_SIZE;
    }
    let sms = i32::try_from(crate::driver::cores()).unwrap_or(i32::MAX);
    Ok((best.0.saturating_mul(sms), best.1))
}

/// cuOccupancyAvailableDynamicSMemPerBlock: dynamic shared memory each of `blocks` resident
/// blocks of `block_size` threads can have.
pub(crate) fn available_dynamic_shared(handle: u64, blocks: i32, block_size: i32) -> CuResult<u64> {
    let f = get_function(handle)?;
    let (blocks, bs) = (
        u64::try_from(blocks).map_err(|_| CUresult::CUDA_ERROR_INVALID_VALUE)?,
        u32::try_from(block_size).map_err(|_| CUresult::CUDA_ERROR_INVALID_VALUE)?,
    );
    if blocks == 0 || bs == 0 || bs > f.max_threads() {
        return Ok(0);
    }
    let per_block = u64::from(device::MAX_SHARED_PER_SM) / blocks;
    let static_bytes = u64::from(f.info().static_shared_bytes);
    let optin = u64::from(device::MAX_SHARED_PER_BLOCK_OPTIN);
    Ok(per_block
        .saturating_sub(1024 + static_bytes)
        .min(optin.saturating_sub(static_bytes)))
}

/// Drops every module (and its functions) of a destroyed context; its globals go with the
/// context's memory.
pub(crate) fn release_context(ctx_id: u64) {
    let gone = MODULES.remove_where(|m| m.ctx_id == ctx_id);
    if !gone.is_empty() {
        FUNCTIONS.remove_where(|f| f.module.ctx_id == ctx_id);
    }
}
