//! Modules and functions: PTX loaded through ptxvm into a context, the module's globals allocated
//! in that context, and one stable function handle per kernel. A library (`library`) shares one
//! decoded program between the modules it makes in each context.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI32, AtomicU8, AtomicU32, Ordering};
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
    /// Which of the two settable attributes cuFuncSetAttribute set ([`DYNAMIC_SET`],
    /// [`CARVEOUT_SET`]): those no longer follow the library kernel's cuKernelSetAttribute, as
    /// NVIDIA documents.
    set_here: AtomicU8,
}

/// [`Function::set_here`] bit: the dynamic shared memory limit.
const DYNAMIC_SET: u8 = 1;
/// [`Function::set_here`] bit: the carveout preference.
const CARVEOUT_SET: u8 = 2;

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
        max_threads(self.info())
    }
}

/// Threads per block a kernel allows (its `.maxntid`, else the device limit).
fn max_threads(info: &ptxvm::KernelInfo) -> u32 {
    info.max_threads_per_block
        .map_or(device::MAX_THREADS_PER_BLOCK, |m| {
            m.min(device::MAX_THREADS_PER_BLOCK)
        })
}

/// The dynamic shared memory a kernel may ask for until an attribute raises it: what the
/// device's per-block limit leaves beside its static shared memory.
pub(crate) fn default_dynamic_shared(info: &ptxvm::KernelInfo) -> u32 {
    device::MAX_SHARED_PER_BLOCK.saturating_sub(info.static_shared_bytes)
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

/// Decodes PTX text, with the code and log a failed load answers. Managed variables become
/// plain globals (see managed_vars.rs).
pub(crate) fn decode(ptx: &str) -> Result<ptxvm::Module, LoadError> {
    decode_managed(ptx).map(|(vm, _managed)| vm)
}

/// [`decode`], and the names of the program's managed variables.
pub(crate) fn decode_managed(ptx: &str) -> Result<(ptxvm::Module, Vec<String>), LoadError> {
    let (text, managed) = crate::managed_vars::strip(ptx);
    let vm = ptxvm::Module::load(&text).map_err(|e| load_error(&e))?;
    Ok((vm, managed))
}

/// Loads PTX text into the current context: decodes it and allocates its globals. As on
/// NVIDIA's driver, it first waits until no kernel of the device runs (see running.rs).
pub(crate) fn load(ptx: &str) -> Result<u64, LoadError> {
    let ctx = context::live().map_err(|c| (c, String::new()))?;
    crate::running::wait_idle(ctx.device);
    load_decoded(&ctx, Arc::new(decode(ptx)?))
}

/// [`load`] of a program already decoded.
pub(crate) fn load_program(vm: Arc<ptxvm::Module>) -> Result<u64, LoadError> {
    let ctx = context::live().map_err(|c| (c, String::new()))?;
    crate::running::wait_idle(ctx.device);
    load_decoded(&ctx, vm)
}

/// Makes a module of an already decoded program in `ctx`: allocates and initialises its globals.
pub(crate) fn load_decoded(
    ctx: &context::Context,
    vm: Arc<ptxvm::Module>,
) -> Result<u64, LoadError> {
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
            vm,
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

/// Whether `handle` is a loaded module (not unloaded, its context not destroyed).
pub(crate) fn is_live(handle: u64) -> bool {
    MODULES.get(handle).is_some()
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
    function_of(&module, index)
}

/// The function of kernel `index` (an index into the program's kernels) of module `handle`.
pub(crate) fn function_at(handle: u64, index: usize) -> CuResult<u64> {
    let module = get_usable(handle)?;
    if index >= module.vm.kernels().len() {
        return Err(CUresult::CUDA_ERROR_NOT_FOUND);
    }
    function_of(&module, index)
}

/// The one function handle of kernel `index` of `module`, made on first use.
fn function_of(module: &Arc<Module>, index: usize) -> CuResult<u64> {
    let mut functions = module
        .functions
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    if let Some(&f) = functions.get(&index) {
        return Ok(f);
    }
    let default_dynamic = default_dynamic_shared(&module.vm.kernels()[index]);
    let (f, _) = FUNCTIONS.insert_with(|_| {
        Arc::new(Function {
            module: Arc::clone(module),
            index,
            max_dynamic_shared: AtomicU32::new(default_dynamic),
            carveout: AtomicI32::new(-1),
            set_here: AtomicU8::new(0),
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

/// The live function behind `handle`. A library kernel (CUkernel) cast to CUfunction, which
/// NVIDIA accepts wherever a function is taken, is its function in the current context.
pub(crate) fn get_function(handle: u64) -> CuResult<Arc<Function>> {
    crate::driver::ensure_init()?;
    let handle = crate::library::resolve(handle, None)?;
    FUNCTIONS
        .get(handle)
        .ok_or(CUresult::CUDA_ERROR_INVALID_HANDLE)
}

/// cuFuncGetAttribute for a raw `CUfunction_attribute`.
pub(crate) fn attribute(handle: u64, attr: u32) -> CuResult<i32> {
    let f = get_function(handle)?;
    kernel_attribute(
        &f.module.vm,
        f.index,
        f.max_dynamic_shared(),
        f.carveout.load(Ordering::Relaxed),
        attr,
    )
}

/// A raw `CUfunction_attribute` of kernel `index` of `vm`, given the two settable values
/// (cuFuncGetAttribute and cuKernelGetAttribute share it).
pub(crate) fn kernel_attribute(
    vm: &ptxvm::Module,
    index: usize,
    max_dynamic_shared: u32,
    carveout: i32,
    attr: u32,
) -> CuResult<i32> {
    let info = vm
        .kernels()
        .get(index)
        .ok_or(CUresult::CUDA_ERROR_INVALID_HANDLE)?;
    let clamp = |v: u64| i32::try_from(v).unwrap_or(i32::MAX);
    let const_bytes: u64 = vm
        .globals()
        .iter()
        .filter(|g| g.space == ptxvm::GlobalSpace::Const)
        .map(|g| g.size)
        .sum();
    let table: [(F, i32); 10] = [
        (
            F::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
            clamp(max_threads(info).into()),
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
            vm.target_arch().map_or(0, |v| clamp(v.into())),
        ),
        (F::CU_FUNC_ATTRIBUTE_BINARY_VERSION, 90),
        (F::CU_FUNC_ATTRIBUTE_CACHE_MODE_CA, 0),
        (
            F::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            clamp(max_dynamic_shared.into()),
        ),
        (
            F::CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT,
            carveout,
        ),
    ];
    table
        .iter()
        .find(|(a, _)| *a as u32 == attr)
        .map(|&(_, v)| v)
        .ok_or(CUresult::CUDA_ERROR_INVALID_VALUE)
}

/// A value for one of the two settable attributes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Setting {
    /// `CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`.
    MaxDynamicShared(u32),
    /// `CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT`.
    Carveout(i32),
}

/// Checks a cuFuncSetAttribute / cuKernelSetAttribute value for a kernel: the dynamic shared
/// memory limit (up to the opt-in maximum) and the carveout preference are writable; everything
/// else is `CUDA_ERROR_INVALID_VALUE`.
pub(crate) fn setting(info: &ptxvm::KernelInfo, attr: u32, value: i32) -> CuResult<Setting> {
    if attr == F::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES as u32 {
        let v = u32::try_from(value).map_err(|_| CUresult::CUDA_ERROR_INVALID_VALUE)?;
        if u64::from(v) + u64::from(info.static_shared_bytes)
            > u64::from(device::MAX_SHARED_PER_BLOCK_OPTIN)
        {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        }
        return Ok(Setting::MaxDynamicShared(v));
    }
    if attr == F::CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT as u32 {
        if !(-1..=100).contains(&value) {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        }
        return Ok(Setting::Carveout(value));
    }
    Err(CUresult::CUDA_ERROR_INVALID_VALUE)
}

impl Function {
    fn store(&self, setting: Setting) {
        match setting {
            Setting::MaxDynamicShared(v) => self.max_dynamic_shared.store(v, Ordering::Relaxed),
            Setting::Carveout(v) => self.carveout.store(v, Ordering::Relaxed),
        }
    }
}

/// cuFuncSetAttribute: see [`setting`]. The value then overrides the library kernel's.
pub(crate) fn set_attribute(handle: u64, attr: u32, value: i32) -> CuResult<()> {
    let f = get_function(handle)?;
    let setting = setting(f.info(), attr, value)?;
    f.set_here.fetch_or(
        match setting {
            Setting::MaxDynamicShared(_) => DYNAMIC_SET,
            Setting::Carveout(_) => CARVEOUT_SET,
        },
        Ordering::Relaxed,
    );
    f.store(setting);
    Ok(())
}

/// A library kernel's cuKernelSetAttribute reaching its function `handle`: applied unless
/// cuFuncSetAttribute set that attribute on the function, which then wins.
pub(crate) fn inherit(handle: u64, setting: Setting) {
    let Some(f) = FUNCTIONS.get(handle) else {
        return;
    };
    let bit = match setting {
        Setting::MaxDynamicShared(_) => DYNAMIC_SET,
        Setting::Carveout(_) => CARVEOUT_SET,
    };
    if f.set_here.load(Ordering::Relaxed) & bit == 0 {
        f.store(setting);
    }
}

/// cuFuncGetParamInfo: (offset, size) of parameter `index`.
pub(crate) fn param_info(handle: u64, index: usize) -> CuResult<(u64, u64)> {
    param_of(get_function(handle)?.info(), index)
}

/// (offset, size) of parameter `index` of a kernel; past the last is `CUDA_ERROR_INVALID_VALUE`.
pub(crate) fn param_of(info: &ptxvm::KernelInfo, index: usize) -> CuResult<(u64, u64)> {
    let p = info
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
