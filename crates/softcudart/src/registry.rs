//! What nvcc's generated host code registers at program start: each translation unit's fatbin
//! (`__cudaRegisterFatBinary`), each kernel's host stub with its device name
//! (`__cudaRegisterFunction`), each `__device__`/`__constant__` variable's host shadow with
//! its name (`__cudaRegisterVar`) and each `__managed__` variable's host pointer with its name
//! (`__cudaRegisterManagedVar`). Nothing touches the driver then; a fatbin becomes a driver
//! library (`cuLibraryLoadData`, context-independent, as NVIDIA's runtime loads it) the first
//! time one of its kernels or variables is wanted, or at `__cudaInitModule`, and a kernel is
//! found by the address of its host stub.
//!
//! A `__managed__` variable is reached from host code through a pointer nvcc declares beside it
//! (`static int *counter`): every host use of the variable first calls `__cudaInitModule` once,
//! then dereferences that pointer. So when a fatbin's library loads, each of its managed
//! variables' pointers is set to the variable's managed address (`cuLibraryGetManaged`).
//!
//! The handles given to the program are keys here: a handle the program passes back is looked up
//! before anything is read through it, so a stale or foreign one is ignored, never dereferenced.

use std::collections::HashMap;
use std::ffi::{CStr, CString, c_char, c_void};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{LazyLock, Mutex, MutexGuard};

use crate::driver::{self, Handle};
use crate::status::{Rt, check, code};

/// `__fatBinC_Wrapper_t.magic` (fatbinary_section.h): the struct nvcc emits per translation unit.
const WRAPPER_MAGIC: u32 = 0x4662_43B1;
/// The wrapper version of a whole-program fatbin; 2 (`-rdc` prelinked fatbins) is not supported.
const WRAPPER_VERSION: u32 = 1;
/// A bare fatbin's magic, accepted in place of a wrapper.
const FATBIN_MAGIC: u32 = 0xBA55_ED50;

/// One registered fatbin.
struct Fatbin {
    /// The fatbin's address, or `None` when what was registered is not one this runtime can load.
    image: Option<usize>,
    /// The driver library, once loaded.
    library: Option<usize>,
}

/// One registered kernel.
struct Function {
    /// The key of its fatbin.
    fatbin: usize,
    /// Its device-side (mangled) name.
    name: CString,
    /// The driver kernel, once found.
    kernel: Option<usize>,
}

/// One registered `__device__` or `__constant__` variable.
struct Variable {
    /// The key of its fatbin.
    fatbin: usize,
    /// Its device-side name.
    name: CString,
}

#[derive(Default)]
struct Registry {
    /// By handle address (the boxed slot given to the program).
    fatbins: HashMap<usize, Fatbin>,
    /// By host stub address.
    functions: HashMap<usize, Function>,
    /// By the address of the variable's host shadow (what `cudaMemcpyToSymbol` is given).
    variables: HashMap<usize, Variable>,
    /// `__managed__` variables, by the address of the host pointer nvcc reaches them through.
    managed: HashMap<usize, Variable>,
}

static REGISTRY: LazyLock<Mutex<Registry>> = LazyLock::new(Mutex::default);

/// The error of the latest failed kernel lookup (0: none). A stub whose `__cudaGetKernel` failed
/// keeps launching a NULL kernel; its launches report why the lookup failed (no image for this
/// device, …) rather than only that there is no kernel.
static LOOKUP_FAILURE: AtomicI32 = AtomicI32::new(0);

/// What a launch of a NULL kernel reports: NVIDIA's runtime 13 answers a launch of a function
/// that was never registered with cudaErrorInvalidResourceHandle (runtime_semantics.cu on the
/// H200, bench/h200-runs/2026-12-02-s12/).
pub(crate) fn missing_kernel() -> Rt {
    match LOOKUP_FAILURE.load(Ordering::Relaxed) {
        0 => code::INVALID_RESOURCE_HANDLE,
        e => Rt(e),
    }
}

fn registry() -> MutexGuard<'static, Registry> {
    REGISTRY.lock().unwrap_or_else(|p| p.into_inner())
}

/// The fatbin inside what `__cudaRegisterFatBinary` was given.
///
/// # Safety
/// `fat` is NULL or points to a `__fatBinC_Wrapper_t` or a fatbin, as nvcc's code passes.
unsafe fn fatbin_image(fat: *const c_void) -> Option<usize> {
    if fat.is_null() {
        return None;
    }
    // SAFETY: a wrapper and a fatbin both start with a u32 magic (the caller's contract).
    let magic = unsafe { fat.cast::<u32>().read_unaligned() };
    match magic {
        FATBIN_MAGIC => Some(fat as usize),
        WRAPPER_MAGIC => {
            // SAFETY: a wrapper is { int magic; int version; const void *data; void *filename }.
            let version = unsafe { fat.cast::<u32>().add(1).read_unaligned() };
            // SAFETY: as above; `data` is at offset 8.
            let data = unsafe {
                fat.cast::<u8>()
                    .add(8)
                    .cast::<*const c_void>()
                    .read_unaligned()
            };
            (version == WRAPPER_VERSION && !data.is_null()).then_some(data as usize)
        }
        _ => None,
    }
}

/// `__cudaRegisterFatBinary`: records the fatbin and returns its handle.
///
/// # Safety
/// As [`fatbin_image`].
pub(crate) unsafe fn register_fatbin(fat: *mut c_void) -> *mut *mut c_void {
    // SAFETY: the caller's contract.
    let image = unsafe { fatbin_image(fat) };
    let handle = Box::into_raw(Box::new(fat));
    registry().fatbins.insert(
        handle as usize,
        Fatbin {
            image,
            library: None,
        },
    );
    handle
}

/// `__cudaUnregisterFatBinary`: forgets the fatbin and its kernels and unloads its library. At
/// exit the driver may already be shutting down; its answer then does not matter.
pub(crate) fn unregister_fatbin(handle: *mut *mut c_void) {
    let mut reg = registry();
    let Some(fatbin) = reg.fatbins.remove(&(handle as usize)) else {
        return;
    };
    reg.functions.retain(|_, f| f.fatbin != handle as usize);
    reg.variables.retain(|_, v| v.fatbin != handle as usize);
    reg.managed.retain(|_, v| v.fatbin != handle as usize);
    drop(reg);
    // SAFETY: the handle was made by Box::into_raw in register_fatbin and, having just been
    // removed from the registry, is freed exactly once.
    drop(unsafe { Box::from_raw(handle) });
    // A loaded library means the driver is loaded: a program that never used a device does not
    // open the driver at exit.
    if let Some(lib) = fatbin.library
        && let Ok(d) = driver::loaded()
    {
        // SAFETY: `lib` is a library this runtime loaded and has not unloaded.
        let _ = unsafe { (d.cuLibraryUnload)(lib as Handle) };
    }
}

/// What `__cudaRegisterFunction` and `__cudaRegisterVar` record.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Symbol {
    /// A kernel, by its host stub (a launch of an unregistered one is
    /// `cudaErrorInvalidDeviceFunction`).
    Kernel,
    /// A `__device__` or `__constant__` variable, by its host shadow (an unregistered one is
    /// `cudaErrorInvalidSymbol`).
    Variable,
    /// A `__managed__` variable, by the address of its host pointer (`void **`), which is set
    /// when its fatbin loads.
    Managed,
}

/// Records `host` as the kernel or variable `name` of the fatbin `handle`. An unknown handle or
/// a NULL argument registers nothing.
///
/// # Safety
/// `name` is NULL or a NUL-terminated string.
pub(crate) unsafe fn register(
    symbol: Symbol,
    handle: *mut *mut c_void,
    host: *const c_char,
    name: *const c_char,
) {
    if host.is_null() || name.is_null() {
        return;
    }
    // SAFETY: the caller's contract.
    let name = unsafe { CStr::from_ptr(name) }.to_owned();
    let mut reg = registry();
    if !reg.fatbins.contains_key(&(handle as usize)) {
        return;
    }
    let (fatbin, host) = (handle as usize, host as usize);
    match symbol {
        Symbol::Kernel => {
            let kernel = None;
            reg.functions.insert(
                host,
                Function {
                    fatbin,
                    name,
                    kernel,
                },
            );
        }
        Symbol::Variable => {
            reg.variables.insert(host, Variable { fatbin, name });
        }
        Symbol::Managed => {
            reg.managed.insert(host, Variable { fatbin, name });
        }
    }
}

/// The device address and size, in the current context, of the variable whose host shadow is
/// `host`; one never registered is `cudaErrorInvalidSymbol`.
pub(crate) fn variable(host: *const c_void) -> Result<(u64, usize), Rt> {
    let mut reg = registry();
    let v = reg
        .variables
        .get(&(host as usize))
        .ok_or(code::INVALID_SYMBOL)?;
    let (fatbin, name) = (v.fatbin, v.name.clone());
    let lib = library(&mut reg, fatbin)?;
    drop(reg);
    let d = crate::context::current()?;
    let (mut ptr, mut size) = (0, 0);
    // SAFETY: valid out-pointers, a loaded library, a NUL-terminated name; a context is current.
    check(unsafe { (d.cuLibraryGetGlobal)(&mut ptr, &mut size, lib, name.as_ptr()) })?;
    Ok((ptr, size))
}

/// The driver library of the fatbin `handle`, loaded on first use.
fn library(reg: &mut Registry, handle: usize) -> Result<Handle, Rt> {
    let fatbin = reg
        .fatbins
        .get_mut(&handle)
        .ok_or(code::INVALID_KERNEL_IMAGE)?;
    if let Some(lib) = fatbin.library {
        return Ok(lib as Handle);
    }
    let image = fatbin.image.ok_or(code::INVALID_KERNEL_IMAGE)?;
    let d = driver::driver()?;
    let mut lib: Handle = std::ptr::null_mut();
    let (no_opts, no_vals) = (std::ptr::null_mut(), std::ptr::null_mut());
    // SAFETY: `lib` is a valid out-pointer; `image` is the fatbin nvcc embedded (it lives as
    // long as the program's image); no options are passed.
    check(unsafe {
        (d.cuLibraryLoadData)(
            &mut lib,
            image as *const c_void,
            no_opts,
            no_vals,
            0,
            no_opts,
            no_vals,
            0,
        )
    })?;
    fatbin.library = Some(lib as usize);
    if let Err(e) = point_managed(reg, handle, lib) {
        // Unloaded, so the next use tries again (and a host pointer is never left half set).
        if let Some(f) = reg.fatbins.get_mut(&handle) {
            f.library = None;
        }
        // SAFETY: `lib` was just loaded by this runtime and nothing else holds it yet.
        let _ = unsafe { (d.cuLibraryUnload)(lib) };
        return Err(e);
    }
    Ok(lib)
}

/// Sets the host pointer of each managed variable of the fatbin `handle` to the variable's
/// managed address in the just-loaded library `lib`.
fn point_managed(reg: &Registry, handle: usize, lib: Handle) -> Result<(), Rt> {
    let mut found = Vec::new();
    for (&host, v) in reg.managed.iter().filter(|(_, v)| v.fatbin == handle) {
        // The library's managed memory lives in a context (softcuda's, in the current one).
        let d = crate::context::current()?;
        let (mut ptr, mut size) = (0, 0);
        // SAFETY: valid out-pointers, a loaded library, a NUL-terminated name.
        check(unsafe { (d.cuLibraryGetManaged)(&mut ptr, &mut size, lib, v.name.as_ptr()) })?;
        found.push((host, ptr));
    }
    for (host, ptr) in found {
        // SAFETY: `host` is the `void **` nvcc's registration code passed for this variable:
        // the address of the program's static pointer to it, valid for the program's life.
        unsafe { (host as *mut *mut c_void).write(ptr as *mut c_void) };
    }
    Ok(())
}

/// `__cudaInitModule`: loads the fatbin `handle` now.
pub(crate) fn init_module(handle: *mut *mut c_void) -> Result<(), Rt> {
    library(&mut registry(), handle as usize).map(drop)
}

/// The driver kernel (`CUkernel`, which is what a `cudaKernel_t` is) of the host stub `host`.
pub(crate) fn kernel(host: *const c_void) -> Result<Handle, Rt> {
    find_kernel(host).inspect_err(|e| LOOKUP_FAILURE.store(e.0, Ordering::Relaxed))
}

/// [`kernel`], without recording a failure for later launches of NULL kernels: for calls that
/// take a host stub but launch nothing (`cudaFuncGetAttributes`, graph kernel nodes, …).
pub(crate) fn find_kernel(host: *const c_void) -> Result<Handle, Rt> {
    let mut reg = registry();
    let f = reg
        .functions
        .get(&(host as usize))
        // What NVIDIA's runtime 13 answers for a function it never registered (see
        // `missing_kernel`).
        .ok_or(code::INVALID_RESOURCE_HANDLE)?;
    if let Some(k) = f.kernel {
        return Ok(k as Handle);
    }
    let (fatbin, name) = (f.fatbin, f.name.clone());
    let lib = library(&mut reg, fatbin)?;
    let d = driver::driver()?;
    let mut k: Handle = std::ptr::null_mut();
    // SAFETY: `k` is a valid out-pointer, `lib` a loaded library, `name` NUL-terminated.
    check(unsafe { (d.cuLibraryGetKernel)(&mut k, lib, name.as_ptr()) }).map_err(|e| {
        // A registered kernel missing from its own fatbin: the stub names no device function.
        if e == code::SYMBOL_NOT_FOUND {
            code::INVALID_DEVICE_FUNCTION
        } else {
            e
        }
    })?;
    if let Some(f) = reg.functions.get_mut(&(host as usize)) {
        f.kernel = Some(k as usize);
    }
    Ok(k)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `__fatBinC_Wrapper_t` as nvcc lays it out.
    #[repr(C)]
    struct Wrapper {
        magic: u32,
        version: u32,
        data: *const c_void,
        filename: *const c_void,
    }

    #[test]
    fn a_wrapper_yields_its_fatbin_and_a_prelinked_or_foreign_one_nothing() {
        let fatbin = [FATBIN_MAGIC, 0, 0, 0];
        let data = fatbin.as_ptr().cast::<c_void>();
        let wrap = |magic, version| Wrapper {
            magic,
            version,
            data,
            filename: std::ptr::null(),
        };
        let image = |w: &Wrapper| {
            // SAFETY: `w` is a live wrapper whose data is a live fatbin header.
            unsafe { fatbin_image((w as *const Wrapper).cast()) }
        };
        assert_eq!(image(&wrap(WRAPPER_MAGIC, 1)), Some(data as usize));
        assert_eq!(
            image(&wrap(WRAPPER_MAGIC, 2)),
            None,
            "-rdc prelinked fatbins"
        );
        assert_eq!(image(&wrap(0x1234_5678, 1)), None);
        // SAFETY: a live fatbin header; NULL.
        unsafe {
            assert_eq!(fatbin_image(data), Some(data as usize));
            assert_eq!(fatbin_image(std::ptr::null()), None);
        }
    }

    #[test]
    fn a_stub_or_variable_never_registered_is_refused_without_touching_the_driver() {
        let stub = 0x10 as *const c_void;
        assert_eq!(kernel(stub), Err(code::INVALID_RESOURCE_HANDLE));
        assert_eq!(variable(stub), Err(code::INVALID_SYMBOL));
    }

    #[test]
    fn a_function_registered_under_an_unknown_handle_is_ignored_and_unregister_frees_the_handle() {
        let stub = c"stub".as_ptr();
        let unknown = 0x20 as *mut *mut c_void;
        // SAFETY: a NUL-terminated name.
        unsafe { register(Symbol::Kernel, unknown, stub, c"k".as_ptr()) };
        assert_eq!(kernel(stub.cast()), Err(code::INVALID_RESOURCE_HANDLE));

        // SAFETY: NULL is no fatbin (registered as one that cannot load).
        let handle = unsafe { register_fatbin(std::ptr::null_mut()) };
        // SAFETY: as above.
        unsafe { register(Symbol::Kernel, handle, stub, c"k".as_ptr()) };
        assert_eq!(kernel(stub.cast()), Err(code::INVALID_KERNEL_IMAGE));
        unregister_fatbin(handle);
        assert_eq!(kernel(stub.cast()), Err(code::INVALID_RESOURCE_HANDLE));
        // A second unregister of the same (now stale) handle is ignored, not freed twice.
        unregister_fatbin(handle);
    }
}
