//! The library API's objects (`cuLibrary*`, `cuKernel*`): code loaded once, in no context. A
//! library holds the decoded program; each context gets its own module of it (its globals, its
//! functions) the first time something there needs it — a function, a global, a launch — as
//! NVIDIA's default lazy loading does. A kernel (CUkernel) is one entry of a library; in a
//! context it becomes that context's CUfunction, which is how a CUkernel handed to cuLaunchKernel
//! launches. Unloading a library unloads its module from every context.
//!
//! An image that does not decode still loads, as on NVIDIA (driver 580 answers SUCCESS to
//! cuLibraryLoadData of malformed PTX and of text that is not PTX): the library keeps the
//! decoding error and answers it to every call that needs the program, and has no kernels.

use std::collections::HashMap;
use std::ffi::{CString, c_char};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use cudarc::driver::sys::CUresult;

use crate::abi::CuResult;
use crate::context::{self, Context};
use crate::driver::{self, Tag};
use crate::handles::Table;
use crate::module::{self, Setting};

/// A loaded library.
pub(crate) struct Library {
    /// The decoded program every context's module shares, or why the image did not decode.
    program: Result<Arc<ptxvm::Module>, CUresult>,
    /// Kernel handles, in the program's kernel order.
    kernels: Vec<u64>,
    /// The names of the program's managed variables (`.attribute(.managed)` globals).
    managed: Vec<String>,
    /// Context id → this library's module there; `None` once unloaded, so a lazy load racing
    /// the unload cannot leave a module behind.
    modules: Mutex<Option<HashMap<u64, u64>>>,
}

/// What cuKernelSetAttribute set for one device.
#[derive(Debug, Clone, Copy, Default)]
struct DeviceSettings {
    max_dynamic_shared: Option<u32>,
    carveout: Option<i32>,
}

/// One kernel of a library, as a CUkernel.
pub(crate) struct Kernel {
    library: Arc<Library>,
    /// The library's program (a kernel exists only when it decoded).
    vm: Arc<ptxvm::Module>,
    library_handle: u64,
    index: usize,
    /// The entry name, for cuKernelGetName (valid while the kernel is).
    name: CString,
    settings: Mutex<[DeviceSettings; driver::MAX_DEVICES]>,
}

static LIBRARIES: Table<Library> = Table::new(Tag::Library);
static KERNELS: Table<Kernel> = Table::new(Tag::Kernel);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every update under these locks is a single insert, remove or store.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Kernel {
    fn info(&self) -> &ptxvm::KernelInfo {
        &self.vm.kernels()[self.index]
    }

    /// The settings for a checked device ordinal.
    fn settings(&self, device: i32) -> DeviceSettings {
        lock(&self.settings)[device as usize % driver::MAX_DEVICES]
    }
}

/// cuLibraryLoadData's core: registers a decoded program with its managed variables' names (or
/// the error decoding gave) and one kernel handle per entry. No context is needed (nor touched)
/// until a module is wanted.
pub(crate) fn load(decoded: CuResult<(ptxvm::Module, Vec<String>)>) -> CuResult<u64> {
    driver::ensure_init()?;
    let (program, managed) = match decoded {
        Ok((vm, managed)) => (Ok(Arc::new(vm)), managed),
        Err(code) => (Err(code), Vec::new()),
    };
    let count = program.as_ref().map_or(0, |vm| vm.kernels().len());
    let kernels: Vec<u64> = (0..count)
        .map(|_| driver::new_handle(Tag::Kernel))
        .collect();
    let (handle, library) = LIBRARIES.insert_with(|_| {
        Arc::new(Library {
            program: program.clone(),
            kernels: kernels.clone(),
            managed,
            modules: Mutex::new(Some(HashMap::new())),
        })
    });
    let Ok(vm) = program else {
        return Ok(handle);
    };
    for (index, &k) in kernels.iter().enumerate() {
        // A PTX entry name holds no NUL; an empty name stands in if one ever did.
        let name = CString::new(vm.kernels()[index].name.as_str()).unwrap_or_default();
        let kernel = Kernel {
            library: Arc::clone(&library),
            vm: Arc::clone(&vm),
            library_handle: handle,
            index,
            name,
            settings: Mutex::new([DeviceSettings::default(); driver::MAX_DEVICES]),
        };
        KERNELS.insert_at(k, Arc::new(kernel));
    }
    Ok(handle)
}

fn get(handle: u64) -> CuResult<Arc<Library>> {
    driver::ensure_init()?;
    LIBRARIES
        .get(handle)
        .ok_or(CUresult::CUDA_ERROR_INVALID_HANDLE)
}

fn get_kernel(handle: u64) -> CuResult<Arc<Kernel>> {
    driver::ensure_init()?;
    KERNELS
        .get(handle)
        .ok_or(CUresult::CUDA_ERROR_INVALID_HANDLE)
}

/// cuLibraryUnload: the kernels go at once; each context's module is unloaded after that
/// context's queued work (a kernel may still use its globals). A context with a sticky fault
/// keeps its module until it is destroyed or reset, which frees it. A handle that is not a
/// loaded library is `CUDA_ERROR_INVALID_HANDLE`, as NVIDIA's driver 580 answers for NULL.
pub(crate) fn unload(handle: u64) -> CuResult<()> {
    driver::ensure_init()?;
    let library = LIBRARIES
        .remove(handle)
        .ok_or(CUresult::CUDA_ERROR_INVALID_HANDLE)?;
    for &k in &library.kernels {
        KERNELS.remove(k);
    }
    let modules = lock(&library.modules).take().unwrap_or_default();
    for (_, m) in modules {
        // Err: the module's context is gone (and the module with it) or faulted (see above).
        let _ = module::unload(m);
    }
    Ok(())
}

/// The library's module in `ctx`, loaded on first use there.
fn module_in(library: &Library, ctx: &Context) -> CuResult<u64> {
    let mut guard = lock(&library.modules);
    let modules = guard.as_mut().ok_or(CUresult::CUDA_ERROR_INVALID_HANDLE)?;
    if let Some(&m) = modules.get(&ctx.id)
        && module::is_live(m)
    {
        return Ok(m);
    }
    // Modules of destroyed contexts (or unloaded by hand) are gone; forget them.
    modules.retain(|_, m| module::is_live(*m));
    let vm = Arc::clone(library.program.as_ref().map_err(|&code| code)?);
    let m = module::load_decoded(ctx, vm).map_err(|(code, _)| code)?;
    modules.insert(ctx.id, m);
    Ok(m)
}

/// cuLibraryGetModule: the library's module in the current context.
pub(crate) fn module_of(handle: u64) -> CuResult<u64> {
    let library = get(handle)?;
    module_in(&library, &*context::live()?)
}

/// cuLibraryGetGlobal: (address, size) of a global in the current context's module.
pub(crate) fn global(handle: u64, name: &str) -> CuResult<(u64, u64)> {
    module::global(module_of(handle)?, name)
}

/// cuLibraryGetManaged: (address, size) of a managed variable, in the current context's module
/// (softcuda's device memory is host memory, so it is reachable from the host as it is); a
/// variable that is not managed is `CUDA_ERROR_NOT_FOUND`, as on NVIDIA.
pub(crate) fn managed(handle: u64, name: &str) -> CuResult<(u64, u64)> {
    if !get(handle)?.managed.iter().any(|m| m == name) {
        return Err(CUresult::CUDA_ERROR_NOT_FOUND);
    }
    global(handle, name)
}

/// cuLibraryGetUnifiedFunction: softcuda has no unified function pointers (the device answers 0
/// to `CU_DEVICE_ATTRIBUTE_UNIFIED_FUNCTION_POINTERS`), so every name is a plain kernel or
/// nothing, and NVIDIA's driver 580 answers `CUDA_ERROR_INVALID_VALUE` for a plain kernel.
pub(crate) fn unified_function(handle: u64) -> CuResult<()> {
    get(handle)?;
    Err(CUresult::CUDA_ERROR_INVALID_VALUE)
}

/// cuLibraryGetKernel: the kernel named `name` (the same handle every time).
pub(crate) fn kernel(handle: u64, name: &str) -> CuResult<u64> {
    let library = get(handle)?;
    let index = library
        .program
        .as_ref()
        .map_err(|&code| code)?
        .kernel_index(name)
        .ok_or(CUresult::CUDA_ERROR_NOT_FOUND)?;
    Ok(library.kernels[index])
}

/// cuLibraryEnumerateKernels / cuLibraryGetKernelCount: every kernel, in the program's order;
/// none for an image that did not decode (NVIDIA's driver 580 counts text that is not PTX
/// without an error).
pub(crate) fn kernels(handle: u64) -> CuResult<Vec<u64>> {
    Ok(get(handle)?.kernels.clone())
}

/// cuKernelGetLibrary.
pub(crate) fn library_of(kernel: u64) -> CuResult<u64> {
    Ok(get_kernel(kernel)?.library_handle)
}

/// cuKernelGetName: the entry name, NUL-terminated, valid while the kernel is loaded. cuda.h
/// gives only `CUDA_ERROR_INVALID_VALUE`, so an unknown kernel answers that.
pub(crate) fn name(kernel: u64) -> CuResult<*const c_char> {
    let k = get_kernel(kernel).map_err(|_| CUresult::CUDA_ERROR_INVALID_VALUE)?;
    // The pointer stays valid after `k` drops: the table holds the kernel until unload.
    Ok(k.name.as_ptr())
}

/// cuKernelGetParamInfo: (offset, size) of parameter `index`. It needs a current context, as
/// on NVIDIA (driver 580: `CUDA_ERROR_INVALID_CONTEXT` before any other check); cuda.h gives
/// only `CUDA_ERROR_INVALID_VALUE`, for an unknown kernel too.
pub(crate) fn param_info(kernel: u64, index: usize) -> CuResult<(u64, u64)> {
    context::live()?;
    let k = get_kernel(kernel).map_err(|_| CUresult::CUDA_ERROR_INVALID_VALUE)?;
    module::param_of(k.info(), index)
}

/// cuKernelGetFunction (and a CUkernel used as a CUfunction): the kernel's function in `ctx`,
/// with the kernel's settings for that context's device applied.
fn function_in(kernel: u64, ctx: &Context) -> CuResult<u64> {
    let k = get_kernel(kernel)?;
    let f = module::function_at(module_in(&k.library, ctx)?, k.index)?;
    apply(f, k.settings(ctx.device));
    Ok(f)
}

/// What cuKernelSetAttribute set reaches a function (unless cuFuncSetAttribute set it there).
fn apply(function: u64, s: DeviceSettings) {
    if let Some(v) = s.max_dynamic_shared {
        module::inherit(function, Setting::MaxDynamicShared(v));
    }
    if let Some(v) = s.carveout {
        module::inherit(function, Setting::Carveout(v));
    }
}

/// cuKernelGetFunction: the kernel's function in the current context.
pub(crate) fn function(kernel: u64) -> CuResult<u64> {
    get_kernel(kernel)?;
    function_in(kernel, &*context::live()?)
}

/// A handle given where a CUfunction is taken: a CUkernel becomes its function in `ctx` (the
/// current context when `None`); anything else is returned as it is.
pub(crate) fn resolve(handle: u64, ctx: Option<&Context>) -> CuResult<u64> {
    if !driver::has_tag(handle, Tag::Kernel) {
        return Ok(handle);
    }
    match ctx {
        Some(ctx) => function_in(handle, ctx),
        None => function(handle),
    }
}

/// cuKernelGetAttribute: the kernel's attribute for `device`; the settable ones as
/// cuKernelSetAttribute last set them there.
pub(crate) fn attribute(kernel: u64, attr: u32, device: i32) -> CuResult<i32> {
    let k = get_kernel(kernel)?;
    crate::device::check(device)?;
    let s = k.settings(device);
    module::kernel_attribute(
        &k.vm,
        k.index,
        s.max_dynamic_shared
            .unwrap_or_else(|| module::default_dynamic_shared(k.info())),
        s.carveout.unwrap_or(-1),
        attr,
    )
}

/// cuKernelSetAttribute: recorded for `device` and applied to the kernel's functions in every
/// context of that device where the library is loaded.
pub(crate) fn set_attribute(kernel: u64, attr: u32, value: i32, device: i32) -> CuResult<()> {
    let k = get_kernel(kernel)?;
    crate::device::check(device)?;
    let setting = module::setting(k.info(), attr, value)?;
    {
        let mut all = lock(&k.settings);
        let s = &mut all[device as usize % driver::MAX_DEVICES];
        match setting {
            Setting::MaxDynamicShared(v) => s.max_dynamic_shared = Some(v),
            Setting::Carveout(v) => s.carveout = Some(v),
        }
    }
    let modules: Vec<(u64, u64)> = lock(&k.library.modules)
        .as_ref()
        .map(|m| m.iter().map(|(&c, &m)| (c, m)).collect())
        .unwrap_or_default();
    for (ctx_id, m) in modules {
        if context::by_id(ctx_id).is_some_and(|c| c.device == device)
            && let Ok(f) = module::function_at(m, k.index)
        {
            module::inherit(f, setting);
        }
    }
    Ok(())
}

/// cuKernelSetCacheConfig: checked only, as cuFuncSetCacheConfig is (a CPU has no cache split
/// to honour, and nothing reads the preference back).
pub(crate) fn set_cache_config(kernel: u64, config: u32, device: i32) -> CuResult<()> {
    get_kernel(kernel)?;
    crate::device::check(device)?;
    if config > 3 {
        return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
    }
    Ok(())
}
