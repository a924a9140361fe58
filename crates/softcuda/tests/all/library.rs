//! The library API's guarantees beyond what the conformance tests compare with NVIDIA: a
//! CUkernel, a CUfunction, a CUlibrary and a CUmodule are never taken for one another (each
//! handle value carries its kind); an undefined library option is refused; a library outlives
//! the contexts it was loaded in, and a context made after a reset gets a fresh module of it; a
//! managed variable (`.attribute(.managed)`) is found by cuLibraryGetManaged and is one variable
//! for the host and kernels.

use std::ffi::{CString, c_char, c_uint, c_void};
use std::path::PathBuf;
use std::ptr::{null, null_mut};

use cudarc::driver::sys::{CUdeviceptr, CUfunction, CUkernel, CUlibrary, CUmodule, CUresult};
use softcuda::exports::*;

use crate::common::{download, fresh_primary, ok, serial};

/// The test kernels (tests/fixtures/kernels.ptx): `bump(by)` adds `by` to the global `counter`,
/// which starts at 5.
fn kernels_ptx() -> CString {
    let dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("run by cargo"));
    let text = std::fs::read_to_string(dir.join("tests/fixtures/kernels.ptx")).expect("fixture");
    CString::new(text).expect("no NUL in PTX")
}

/// cuLibraryLoadData of the fixture with `n` library options in the given arrays.
fn load_raw(options: *mut c_uint, values: *mut *mut c_void, n: c_uint) -> (CUresult, CUlibrary) {
    let ptx = kernels_ptx();
    let mut lib: CUlibrary = null_mut();
    // SAFETY: valid out-pointer and NUL-terminated image; the option arrays are NULL or hold
    // `n` entries (NULL with `n` > 0 is refused by the driver, never read).
    let r = unsafe {
        cuLibraryLoadData(
            &mut lib,
            ptx.as_ptr().cast(),
            null_mut(),
            null_mut(),
            0,
            options,
            values,
            n,
        )
    };
    (r, lib)
}

/// cuLibraryLoadData of the fixture with these library options.
fn load_with(options: &mut [c_uint], values: &mut [*mut c_void]) -> (CUresult, CUlibrary) {
    assert_eq!(options.len(), values.len(), "one value per option");
    load_raw(
        options.as_mut_ptr(),
        values.as_mut_ptr(),
        options.len() as c_uint,
    )
}

fn kernel(lib: CUlibrary, name: &std::ffi::CStr) -> (CUresult, CUkernel) {
    let mut k: CUkernel = null_mut();
    // SAFETY: valid out-pointer and NUL-terminated name; the handle is validated.
    let r = unsafe { cuLibraryGetKernel(&mut k, lib, name.as_ptr()) };
    (r, k)
}

/// `counter`'s address in the current context.
fn counter(lib: CUlibrary) -> CUdeviceptr {
    let mut dptr: CUdeviceptr = 0;
    // SAFETY: valid out-pointer (the size may be NULL) and NUL-terminated name.
    ok(unsafe { cuLibraryGetGlobal(&mut dptr, null_mut(), lib, c"counter".as_ptr()) });
    dptr
}

/// Launches `bump(by)` on one thread through `f` (a CUfunction or a CUkernel cast to one).
fn bump(f: CUfunction, mut by: u32) -> CUresult {
    let mut args: [*mut c_void; 1] = [(&raw mut by).cast()];
    // SAFETY: one pointer per kernel parameter, to a value of its size.
    unsafe {
        cuLaunchKernel(
            f,
            1,
            1,
            1,
            1,
            1,
            1,
            0,
            null_mut(),
            args.as_mut_ptr(),
            null_mut(),
        )
    }
}

/// A fresh primary context and the fixture loaded as a library: (library, its `bump`).
fn fresh_library() -> (CUlibrary, CUkernel) {
    fresh_primary();
    let (r, lib) = load_with(&mut [], &mut []);
    ok(r);
    let (r, k) = kernel(lib, c"bump");
    ok(r);
    (lib, k)
}

#[test]
fn handles_of_one_kind_are_refused_where_another_kind_is_taken() {
    let _g = serial();
    let (lib, k) = fresh_library();
    let mut f: CUfunction = null_mut();
    let mut module: CUmodule = null_mut();
    // SAFETY: valid out-pointers and live handles.
    unsafe {
        ok(cuKernelGetFunction(&mut f, k));
        ok(cuLibraryGetModule(&mut module, lib));
    }
    let invalid_handle = CUresult::CUDA_ERROR_INVALID_HANDLE;
    let mut other: CUfunction = null_mut();
    let mut name: *const c_char = null();
    let mut lib_out: CUlibrary = null_mut();
    // SAFETY: every handle passed is a live handle of another kind, which the driver must refuse
    // without touching it; out-pointers are valid.
    unsafe {
        assert_eq!(cuKernelGetFunction(&mut other, f.cast()), invalid_handle);
        assert_eq!(
            cuKernelGetLibrary(&mut lib_out, module.cast()),
            invalid_handle
        );
        assert_eq!(kernel(module.cast(), c"bump").0, invalid_handle);
        assert_eq!(
            cuModuleGetFunction(&mut other, lib.cast(), c"bump".as_ptr()),
            invalid_handle
        );
        assert_eq!(cuModuleUnload(lib.cast()), invalid_handle);
        assert_eq!(
            cuKernelGetName(&mut name, f.cast()),
            CUresult::CUDA_ERROR_INVALID_VALUE
        );
        assert_eq!(cuLibraryUnload(module.cast()), invalid_handle);
        // A CUkernel where a CUfunction is taken is its function in the current context.
        let mut regs = -1;
        ok(cuFuncGetAttribute(&mut regs, 4, k.cast()));
        assert!(regs > 0, "NUM_REGS of bump through its CUkernel: {regs}");
        ok(cuLibraryUnload(lib));
    }
}

#[test]
fn an_undefined_library_option_is_invalid_value() {
    let _g = serial();
    fresh_primary();
    let one: *mut c_void = std::ptr::without_provenance_mut(1);
    let (r, _) = load_with(&mut [2], &mut [one]);
    assert_eq!(
        r,
        CUresult::CUDA_ERROR_INVALID_VALUE,
        "option 2 (NUM_OPTIONS)"
    );
    let (r, _) = load_with(&mut [0, 1, 99], &mut [null_mut(), one, one]);
    assert_eq!(
        r,
        CUresult::CUDA_ERROR_INVALID_VALUE,
        "option 99 after valid ones"
    );
    let (r, _) = load_raw(null_mut(), null_mut(), 1);
    assert_eq!(
        r,
        CUresult::CUDA_ERROR_INVALID_VALUE,
        "an option without arrays"
    );
    let (r, lib) = load_with(&mut [0, 1], &mut [null_mut(), one]);
    ok(r);
    // SAFETY: loaded above, unloaded once.
    ok(unsafe { cuLibraryUnload(lib) });
}

#[test]
fn a_library_outlives_a_primary_context_reset_and_its_globals_start_over() {
    let _g = serial();
    let (lib, k) = fresh_library();
    let mut before: CUfunction = null_mut();
    // SAFETY: valid out-pointer and kernel.
    ok(unsafe { cuKernelGetFunction(&mut before, k) });
    ok(bump(k.cast(), 3));
    assert_eq!(download::<u32>(counter(lib), 1), [8], "5 + 3");

    fresh_primary();
    assert_eq!(
        download::<u32>(counter(lib), 1),
        [5],
        "the new context's module starts from the initial value"
    );
    assert_eq!(
        bump(before, 1),
        CUresult::CUDA_ERROR_INVALID_HANDLE,
        "the function of the destroyed context"
    );
    ok(bump(k.cast(), 1));
    assert_eq!(download::<u32>(counter(lib), 1), [6], "5 + 1");
    // SAFETY: loaded above, unloaded once.
    ok(unsafe { cuLibraryUnload(lib) });
}

#[test]
fn an_unloaded_library_and_its_kernels_are_stale_handles_never_reused_memory() {
    // NVIDIA's handles are pointers, and using one after cuLibraryUnload crashes its driver
    // (conformance cannot compare this); softcuda checks every handle.
    let _g = serial();
    let (lib, k) = fresh_library();
    // SAFETY: loaded above, unloaded once.
    ok(unsafe { cuLibraryUnload(lib) });
    assert_eq!(kernel(lib, c"bump").0, CUresult::CUDA_ERROR_INVALID_HANDLE);
    let mut f: CUfunction = null_mut();
    // SAFETY: valid out-pointer; the stale kernel is the behaviour under test.
    let r = unsafe { cuKernelGetFunction(&mut f, k) };
    assert_eq!(
        r,
        CUresult::CUDA_ERROR_INVALID_HANDLE,
        "kernel of an unloaded library"
    );
    assert_eq!(
        bump(k.cast(), 1),
        CUresult::CUDA_ERROR_INVALID_HANDLE,
        "launching it"
    );
    // SAFETY: unloading a stale handle is the behaviour under test.
    let r = unsafe { cuLibraryUnload(lib) };
    assert_eq!(r, CUresult::CUDA_ERROR_INVALID_HANDLE, "unloading twice");
}

/// A module with a managed variable, as nvcc emits one for `__managed__ unsigned hits = 7;`,
/// and a kernel `hit()` that adds 1 to it.
const MANAGED_PTX: &core::ffi::CStr = c"
.version 7.0
.target sm_80
.address_size 64
.global .attribute(.managed) .align 4 .u32 hits = 7;
.global .align 4 .u32 plain;
.visible .entry hit()
{
    .reg .b32 %r<2>;
    ld.global.u32 %r1, [hits];
    add.u32 %r1, %r1, 1;
    st.global.u32 [hits], %r1;
    ret;
}
";

#[test]
fn a_managed_variable_is_found_by_name_and_shared_by_host_and_kernels() {
    let _g = serial();
    fresh_primary();
    let mut lib: CUlibrary = null_mut();
    // SAFETY: valid out-pointer and NUL-terminated image; no options.
    ok(unsafe {
        cuLibraryLoadData(
            &mut lib,
            MANAGED_PTX.as_ptr().cast(),
            null_mut(),
            null_mut(),
            0,
            null_mut(),
            null_mut(),
            0,
        )
    });
    let (mut dptr, mut size): (CUdeviceptr, usize) = (0, 0);
    // SAFETY: valid out-pointers and NUL-terminated names.
    unsafe {
        ok(cuLibraryGetManaged(
            &mut dptr,
            &mut size,
            lib,
            c"hits".as_ptr(),
        ));
        assert_eq!(
            cuLibraryGetManaged(&mut dptr, &mut size, lib, c"plain".as_ptr()),
            CUresult::CUDA_ERROR_NOT_FOUND,
            "a variable that is not managed"
        );
    }
    assert_eq!(size, 4);
    let host = dptr as *mut u32;
    // SAFETY: managed memory is host memory at its device address; no kernel runs now.
    assert_eq!(unsafe { host.read_volatile() }, 7, "the initial value");
    // SAFETY: as above.
    unsafe { host.write_volatile(40) };
    let (r, k) = kernel(lib, c"hit");
    ok(r);
    let mut f: CUfunction = null_mut();
    // SAFETY: valid out-pointer, kernel, and the kernel takes no parameters.
    unsafe {
        ok(cuKernelGetFunction(&mut f, k));
        ok(cuLaunchKernel(
            f,
            1,
            1,
            1,
            1,
            1,
            1,
            0,
            null_mut(),
            null_mut(),
            null_mut(),
        ));
        ok(cuCtxSynchronize());
    }
    // SAFETY: as above; the kernel has finished.
    let after = unsafe { host.read_volatile() };
    assert_eq!(after, 41, "the host's write, plus the kernel's 1");
    // SAFETY: loaded above, unloaded once.
    ok(unsafe { cuLibraryUnload(lib) });
}
