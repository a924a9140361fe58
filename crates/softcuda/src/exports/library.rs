//! The library API's entry points (`cuLibrary*`, `cuKernel*`; a part of [`super`]'s list kept
//! apart for size): thin shims over `library`. A library loads whatever cuModuleLoadDataEx takes
//! (PTX text, a fatbin holding PTX, compressed PTX), with the same JIT options; its kernels
//! (CUkernel) are usable wherever a CUfunction is, in the current context.
#![allow(non_snake_case, clippy::missing_safety_doc)]

use std::ffi::{c_char, c_int, c_uint, c_void};

use cudarc::driver::sys::{
    CUdevice, CUdeviceptr, CUfunction, CUkernel, CUlibrary, CUmodule, CUresult,
};

use super::handle_value;
use crate::abi::{self, CuResult, p};
use crate::{driver, jit, library, module};

/// `CU_LIBRARY_HOST_UNIVERSAL_FUNCTION_AND_DATA_TABLE`: the CUDA runtime's host table for
/// unified functions, which softcuda has none of (ignored).
const HOST_UNIVERSAL_TABLE: c_uint = 0;
/// `CU_LIBRARY_BINARY_IS_PRESERVED`: a memory hint (softcuda keeps the decoded program, never
/// the image); cuda.h makes it invalid for cuLibraryLoadFromFile.
const BINARY_IS_PRESERVED: c_uint = 1;

/// Checks cuLibraryLoad*'s library options: `n` options need both arrays; an option cuda.h does
/// not define is `CUDA_ERROR_INVALID_VALUE`, as is the preserved-binary hint for a file.
///
/// # Safety
/// `options` and `values` are null or hold `n` entries each.
unsafe fn check_library_options(
    n: c_uint,
    options: *const c_uint,
    values: *mut *mut c_void,
    from_file: bool,
) -> CuResult<()> {
    if n == 0 {
        return Ok(());
    }
    if options.is_null() || values.is_null() {
        return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
    }
    // SAFETY: non-null (checked above) and holding `n` entries (caller contract).
    let options = unsafe { std::slice::from_raw_parts(options, n as usize) };
    match options
        .iter()
        .find(|&&o| o != HOST_UNIVERSAL_TABLE && (o != BINARY_IS_PRESERVED || from_file))
    {
        Some(_) => Err(CUresult::CUDA_ERROR_INVALID_VALUE),
        None => Ok(()),
    }
}

/// The JIT options and library options of a cuLibraryLoad* call, as C passes them.
struct Options {
    jit: *const c_uint,
    jit_values: *mut *mut c_void,
    jit_count: c_uint,
    library: *const c_uint,
    library_values: *mut *mut c_void,
    library_count: c_uint,
}

/// cuLibraryLoadData / cuLibraryLoadFromFile's body: options checked, the image decoded (the
/// JIT error log gets what was wrong), the library registered.
///
/// # Safety
/// `out` is null or writable; `image` is what cuModuleLoadData takes; each option array is null
/// or holds its count of entries.
unsafe fn load(
    out: *mut CUlibrary,
    image: *const c_void,
    o: &Options,
    from_file: bool,
) -> CuResult<()> {
    driver::ensure_init()?;
    if out.is_null() {
        return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
    }
    // SAFETY: forwarded caller contract.
    unsafe { check_library_options(o.library_count, o.library, o.library_values, from_file) }?;
    // SAFETY: forwarded caller contract (the JIT arrays as cuModuleLoadDataEx takes them).
    let program = unsafe {
        jit::load_image(
            image,
            o.jit_count,
            o.jit,
            o.jit_values,
            module::decode_managed,
        )
    };
    // A NULL image is refused now; an image that does not decode loads, and the calls that need
    // its program answer why (NVIDIA's driver 580 defers these errors the same way).
    if let Err(CUresult::CUDA_ERROR_INVALID_VALUE) = program {
        return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
    }
    // SAFETY: `out` is non-null (checked above) and writable (caller contract).
    unsafe { abi::write(out, p(library::load(program)?)) }
}

exports! {
    /// Loads a library (no context needed): PTX text, or a fatbin holding PTX; its module is
    /// made in a context when something there first needs it.
    fn cuLibraryLoadData(library: *mut CUlibrary, code: *const c_void, jitOptions: *mut c_uint, jitOptionsValues: *mut *mut c_void, numJitOptions: c_uint, libraryOptions: *mut c_uint, libraryOptionValues: *mut *mut c_void, numLibraryOptions: c_uint) {
        let o = Options { jit: jitOptions, jit_values: jitOptionsValues, jit_count: numJitOptions, library: libraryOptions, library_values: libraryOptionValues, library_count: numLibraryOptions };
        // SAFETY: the pointers are NULL or valid as cuda.h documents for cuLibraryLoadData:
        // load's contract.
        unsafe { load(library, code, &o, false) }
    }

    /// [`cuLibraryLoadData`] of a file's contents (`CUDA_ERROR_FILE_NOT_FOUND` if unreadable).
    fn cuLibraryLoadFromFile(library: *mut CUlibrary, fileName: *const c_char, jitOptions: *mut c_uint, jitOptionsValues: *mut *mut c_void, numJitOptions: c_uint, libraryOptions: *mut c_uint, libraryOptionValues: *mut *mut c_void, numLibraryOptions: c_uint) {
        driver::ensure_init()?;
        // SAFETY: `fileName` is NULL (refused) or NUL-terminated: cuLibraryLoadFromFile's
        // contract.
        let (_, bytes) = unsafe { abi::read_image_file(fileName) }?;
        let o = Options { jit: jitOptions, jit_values: jitOptionsValues, jit_count: numJitOptions, library: libraryOptions, library_values: libraryOptionValues, library_count: numLibraryOptions };
        // SAFETY: the image is our own NUL-terminated copy of the file, alive for the call; the
        // other pointers are NULL or valid as cuda.h documents: load's contract.
        unsafe { load(library, bytes.as_ptr().cast(), &o, true) }
    }

    /// Unloads a library: its kernels at once, its module in each context after that
    /// context's queued work.
    fn cuLibraryUnload(library: CUlibrary) { library::unload(handle_value(library)) }

    /// The kernel named `name` (the same handle every time).
    fn cuLibraryGetKernel(pKernel: *mut CUkernel, library: CUlibrary, name: *const c_char) {
        if pKernel.is_null() {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        }
        // SAFETY: `name` is NULL (refused) or NUL-terminated: the export's contract.
        let name = unsafe { abi::symbol_name(name) }?;
        // SAFETY: `pKernel` is cuLibraryGetKernel's out-pointer: NULL (refused) or writable per
        // cuda.h.
        unsafe { abi::write(pKernel, p(library::kernel(handle_value(library), name)?)) }
    }

    /// The number of kernels in the library.
    fn cuLibraryGetKernelCount(count: *mut c_uint, lib: CUlibrary) {
        if count.is_null() {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        }
        let n = library::kernels(handle_value(lib))?.len();
        // SAFETY: `count` is cuLibraryGetKernelCount's out-pointer: NULL (refused) or writable
        // per cuda.h.
        unsafe { abi::write(count, c_uint::try_from(n).unwrap_or(c_uint::MAX)) }
    }

    /// Up to `numKernels` of the library's kernels, in the PTX's order.
    fn cuLibraryEnumerateKernels(kernels: *mut CUkernel, numKernels: c_uint, lib: CUlibrary) {
        if kernels.is_null() {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        }
        for (i, k) in library::kernels(handle_value(lib))?.into_iter().take(numKernels as usize).enumerate() {
            // SAFETY: `kernels` is non-null (checked above) and holds `numKernels` writable
            // entries (cuda.h contract); `i < numKernels`.
            unsafe { kernels.add(i).write(p(k)) };
        }
        Ok(())
    }

    /// The library's module in the current context (made there on first use).
    fn cuLibraryGetModule(pMod: *mut CUmodule, library: CUlibrary) {
        if pMod.is_null() {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        }
        // SAFETY: `pMod` is cuLibraryGetModule's out-pointer: NULL (refused) or writable per
        // cuda.h.
        unsafe { abi::write(pMod, p(library::module_of(handle_value(library))?)) }
    }

    /// Address and size of a global in the current context; one of the out-pointers may be NULL.
    fn cuLibraryGetGlobal(dptr: *mut CUdeviceptr, bytes: *mut usize, library: CUlibrary, name: *const c_char) {
        if dptr.is_null() && bytes.is_null() {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        }
        // SAFETY: `name` is NULL (refused) or NUL-terminated: the export's contract.
        let name = unsafe { abi::symbol_name(name) }?;
        let global = library::global(handle_value(library), name)?;
        // SAFETY: `dptr` and `bytes` are cuLibraryGetGlobal's out-pointers: each NULL or
        // writable per cuda.h.
        unsafe { abi::write_global(dptr, bytes, global) }
    }

    /// A managed variable's address and size (`CUDA_ERROR_NOT_FOUND` for one that is not
    /// managed).
    fn cuLibraryGetManaged(dptr: *mut CUdeviceptr, bytes: *mut usize, library: CUlibrary, name: *const c_char) {
        if dptr.is_null() && bytes.is_null() {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        }
        // SAFETY: `name` is NULL (refused) or NUL-terminated: the export's contract.
        let name = unsafe { abi::symbol_name(name) }?;
        let global = library::managed(handle_value(library), name)?;
        // SAFETY: `dptr` and `bytes` are cuLibraryGetManaged's out-pointers: each NULL or
        // writable per cuda.h.
        unsafe { abi::write_global(dptr, bytes, global) }
    }

    /// Unified function pointers: none on a device without them, so `CUDA_ERROR_NOT_FOUND`.
    fn cuLibraryGetUnifiedFunction(fptr: *mut *mut c_void, library: CUlibrary, symbol: *const c_char) {
        if fptr.is_null() {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        }
        // SAFETY: `symbol` is NULL (refused) or NUL-terminated: the export's contract.
        unsafe { abi::symbol_name(symbol) }?;
        library::unified_function(handle_value(library))
    }

    /// The kernel's function in the current context.
    fn cuKernelGetFunction(pFunc: *mut CUfunction, kernel: CUkernel) {
        if pFunc.is_null() {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        }
        // SAFETY: `pFunc` is cuKernelGetFunction's out-pointer: NULL (refused) or writable per
        // cuda.h.
        unsafe { abi::write(pFunc, p(library::function(handle_value(kernel))?)) }
    }

    /// The library a kernel belongs to.
    fn cuKernelGetLibrary(pLib: *mut CUlibrary, kernel: CUkernel) {
        if pLib.is_null() {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        }
        // SAFETY: `pLib` is cuKernelGetLibrary's out-pointer: NULL (refused) or writable per
        // cuda.h.
        unsafe { abi::write(pLib, p(library::library_of(handle_value(kernel))?)) }
    }

    /// The kernel's entry name (valid until its library is unloaded).
    fn cuKernelGetName(name: *mut *const c_char, hfunc: CUkernel) {
        if name.is_null() {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        }
        // SAFETY: `name` is cuKernelGetName's out-pointer: NULL (refused) or writable per cuda.h.
        unsafe { abi::write(name, library::name(handle_value(hfunc))?) }
    }

    /// Offset and size of kernel parameter `paramIndex`; `paramSize` may be NULL.
    fn cuKernelGetParamInfo(kernel: CUkernel, paramIndex: usize, paramOffset: *mut usize, paramSize: *mut usize) {
        if paramOffset.is_null() {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        }
        let (offset, size) = library::param_info(handle_value(kernel), paramIndex)?;
        // SAFETY: `paramOffset` is cuKernelGetParamInfo's out-pointer: NULL (refused) or
        // writable per cuda.h.
        unsafe { abi::write(paramOffset, offset as usize) }?;
        if !paramSize.is_null() {
            // SAFETY: `paramSize` is cuKernelGetParamInfo's optional out-pointer: non-null here
            // and writable per cuda.h.
            unsafe { abi::write(paramSize, size as usize) }?;
        }
        Ok(())
    }

    /// One function attribute of the kernel for device `dev`.
    fn cuKernelGetAttribute(pi: *mut c_int, attrib: c_uint, kernel: CUkernel, dev: CUdevice) {
        if pi.is_null() {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        }
        let v = library::attribute(handle_value(kernel), attrib, dev)?;
        // SAFETY: `pi` is cuKernelGetAttribute's out-pointer: NULL (refused) or writable per
        // cuda.h.
        unsafe { abi::write(pi, v) }
    }

    /// Sets the dynamic shared memory limit or the carveout preference for device `dev`; a
    /// function's own cuFuncSetAttribute wins over it.
    fn cuKernelSetAttribute(attrib: c_uint, val: c_int, kernel: CUkernel, dev: CUdevice) {
        library::set_attribute(handle_value(kernel), attrib, val, dev)
    }

    /// Checks a cache preference for device `dev` (no effect on a CPU).
    fn cuKernelSetCacheConfig(kernel: CUkernel, config: c_uint, dev: CUdevice) {
        library::set_cache_config(handle_value(kernel), config, dev)
    }
}
