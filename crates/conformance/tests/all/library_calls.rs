//! The library API's error codes and entry points (tests/kernels/library/lib.ptx): each error
//! case answers the code cuda.h gives (or, where cuda.h gives none, the plausible one
//! docs/SOFTCUDA.md names), and cuGetProcAddress finds every library call at CUDA 13 and none
//! at a version before it existed.

use std::ffi::{CString, c_char, c_uint, c_void};
use std::ptr::{null, null_mut};

use cudarc::driver::sys::{self, CUresult};

use crate::entry::proc_address;
use crate::library::{OK, fixture, global, kernel, load, load_image, primary};
use crate::support::on_fresh_thread;

#[test]
fn library_calls_answer_the_error_codes_cuda_h_gives() {
    on_fresh_thread(|_, steps| {
        let mut log = [0u8; 1024];
        let mut jit = [
            sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER,
            sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
        ];
        // The size option carries the number itself in the pointer slot (cuda.h).
        let mut jit_values: [*mut c_void; 2] = [
            log.as_mut_ptr().cast(),
            std::ptr::without_provenance_mut(log.len()),
        ];
        let bad = c".version 7.0\n.target sm_80\n.address_size 64\n.visible .entry k() { bogus.op %r1; }\n";
        let mut lib: sys::CUlibrary = null_mut();
        // SAFETY: valid out-pointer, NUL-terminated image and two JIT options with their values.
        let r = unsafe {
            sys::cuLibraryLoadData(
                &mut lib,
                bad.as_ptr().cast(),
                jit.as_mut_ptr(),
                jit_values.as_mut_ptr(),
                2,
                null_mut(),
                null_mut(),
                0,
            )
        };
        // Loading is lazy: an image that does not decode still loads (NVIDIA 580), and the
        // calls that need its program answer why.
        steps.expect("cuLibraryLoadData(malformed PTX)", r, OK);
        let mut k: sys::CUkernel = null_mut();
        // SAFETY: valid out-pointer, NUL-terminated name, the library just loaded.
        let r = unsafe { sys::cuLibraryGetKernel(&mut k, lib, c"k".as_ptr()) };
        steps.expect(
            "cuLibraryGetKernel of malformed PTX (NVIDIA 580)",
            r,
            CUresult::CUDA_ERROR_INVALID_PTX,
        );
        // SAFETY: loaded above, unloaded once.
        steps.expect("unloading it", unsafe { sys::cuLibraryUnload(lib) }, OK);
        let (r, text) = load(c"not a PTX image");
        steps.expect("cuLibraryLoadData(text that is not PTX)", r, OK);
        let mut count: c_uint = 0;
        // SAFETY: valid out-pointer, the library just loaded.
        let r = unsafe { sys::cuLibraryGetKernelCount(&mut count, text) };
        steps.expect(
            "cuLibraryGetKernelCount of text that is not PTX (NVIDIA 580)",
            r,
            OK,
        );
        steps.check("it counts no kernel", count == 0, || format!("{count}"));
        // SAFETY: loaded above, unloaded once.
        steps.expect("unloading that", unsafe { sys::cuLibraryUnload(text) }, OK);
        // SAFETY: a NULL image is the behaviour under test.
        let (r, _) = unsafe { load_image(null()) };
        steps.expect(
            "cuLibraryLoadData(NULL image)",
            r,
            CUresult::CUDA_ERROR_INVALID_VALUE,
        );

        let image = fixture();
        let load_with = |option: sys::CUlibraryOption, value: usize, out: &mut sys::CUlibrary| {
            let mut options = [option];
            let mut values: [*mut c_void; 1] = [std::ptr::without_provenance_mut(value)];
            // SAFETY: valid out-pointer, NUL-terminated image, one library option.
            unsafe {
                sys::cuLibraryLoadData(
                    out,
                    image.as_ptr().cast(),
                    null_mut(),
                    null_mut(),
                    0,
                    options.as_mut_ptr(),
                    values.as_mut_ptr(),
                    1,
                )
            }
        };
        let preserved = sys::CUlibraryOption::CU_LIBRARY_BINARY_IS_PRESERVED;
        let mut kept: sys::CUlibrary = null_mut();
        steps.expect(
            "cuLibraryLoadData(BINARY_IS_PRESERVED)",
            load_with(preserved, 1, &mut kept),
            OK,
        );
        let path = std::env::temp_dir().join(format!("library-{}.ptx", std::process::id()));
        std::fs::write(&path, image.as_bytes()).expect("write the fixture to a file");
        let file = CString::new(path.to_str().expect("UTF-8 temp path")).expect("no NUL");
        let from_file = |options: &mut [sys::CUlibraryOption],
                         values: &mut [*mut c_void],
                         out: &mut sys::CUlibrary| {
            // SAFETY: valid out-pointer, NUL-terminated path, option arrays of equal length.
            unsafe {
                sys::cuLibraryLoadFromFile(
                    out,
                    file.as_ptr(),
                    null_mut(),
                    null_mut(),
                    0,
                    options.as_mut_ptr(),
                    values.as_mut_ptr(),
                    options.len() as c_uint,
                )
            }
        };
        let mut from_disk: sys::CUlibrary = null_mut();
        steps.expect(
            "cuLibraryLoadFromFile",
            from_file(&mut [], &mut [], &mut from_disk),
            OK,
        );
        let mut refused: sys::CUlibrary = null_mut();
        steps.expect(
            "cuLibraryLoadFromFile(BINARY_IS_PRESERVED)",
            from_file(
                &mut [preserved],
                &mut [std::ptr::without_provenance_mut(1)],
                &mut refused,
            ),
            CUresult::CUDA_ERROR_INVALID_VALUE,
        );
        let _ = std::fs::remove_file(&path);
        // SAFETY: valid out-pointer and a NUL-terminated path that names no file.
        let r = unsafe {
            sys::cuLibraryLoadFromFile(
                &mut refused,
                c"/nonexistent/library.ptx".as_ptr(),
                null_mut(),
                null_mut(),
                0,
                null_mut(),
                null_mut(),
                0,
            )
        };
        steps.expect(
            "cuLibraryLoadFromFile(missing file)",
            r,
            CUresult::CUDA_ERROR_FILE_NOT_FOUND,
        );

        let lib = from_disk;
        let (r, _) = kernel(lib, c"no_such_kernel");
        steps.expect(
            "cuLibraryGetKernel(unknown name)",
            r,
            CUresult::CUDA_ERROR_NOT_FOUND,
        );
        let mut k: sys::CUkernel = null_mut();
        // SAFETY: a NULL name is the behaviour under test.
        let r = unsafe { sys::cuLibraryGetKernel(&mut k, lib, null()) };
        steps.expect(
            "cuLibraryGetKernel(NULL name)",
            r,
            CUresult::CUDA_ERROR_INVALID_VALUE,
        );
        let mut module: sys::CUmodule = null_mut();
        // SAFETY: valid out-pointer; no context is current on this thread.
        let r = unsafe { sys::cuLibraryGetModule(&mut module, lib) };
        steps.expect(
            "cuLibraryGetModule with no current context",
            r,
            CUresult::CUDA_ERROR_INVALID_CONTEXT,
        );
        let mut name: *const c_char = null();
        // SAFETY: a NULL kernel is the behaviour under test.
        let r = unsafe { sys::cuKernelGetName(&mut name, null_mut()) };
        steps.expect(
            "cuKernelGetName(NULL kernel)",
            r,
            CUresult::CUDA_ERROR_INVALID_VALUE,
        );
        let (_, add) = kernel(lib, c"add_base");
        let (mut offset, mut size) = (0usize, 0usize);
        // SAFETY: valid out-pointers and kernel; no context is current on this thread.
        let r = unsafe { sys::cuKernelGetParamInfo(add, 0, &mut offset, &mut size) };
        steps.expect(
            "cuKernelGetParamInfo with no current context (NVIDIA 580)",
            r,
            CUresult::CUDA_ERROR_INVALID_CONTEXT,
        );

        let ctx = primary();
        // SAFETY: valid out-pointers; the index past the last parameter is under test.
        let r = unsafe { sys::cuKernelGetParamInfo(add, 2, &mut offset, &mut size) };
        steps.expect(
            "cuKernelGetParamInfo past the last parameter",
            r,
            CUresult::CUDA_ERROR_INVALID_VALUE,
        );
        let (r, _, _) = global(lib, c"no_such_global");
        steps.expect(
            "cuLibraryGetGlobal(unknown name)",
            r,
            CUresult::CUDA_ERROR_NOT_FOUND,
        );
        // SAFETY: both out-pointers NULL is the behaviour under test.
        let r = unsafe { sys::cuLibraryGetGlobal(null_mut(), null_mut(), lib, c"base".as_ptr()) };
        steps.expect(
            "cuLibraryGetGlobal with both out-pointers NULL",
            r,
            CUresult::CUDA_ERROR_INVALID_VALUE,
        );
        let mut bytes = 0usize;
        // SAFETY: the address out-pointer may be NULL (cuda.h); `bytes` is valid.
        let r = unsafe { sys::cuLibraryGetGlobal(null_mut(), &mut bytes, lib, c"base".as_ptr()) };
        steps.expect("cuLibraryGetGlobal with only the size asked for", r, OK);
        steps.check("its size", bytes == 4, || format!("{bytes}"));
        let mut f: sys::CUfunction = null_mut();
        // SAFETY: a NULL out-pointer is the behaviour under test.
        let r = unsafe { sys::cuKernelGetFunction(null_mut(), add) };
        steps.expect(
            "cuKernelGetFunction(NULL out)",
            r,
            CUresult::CUDA_ERROR_INVALID_VALUE,
        );
        // SAFETY: a NULL kernel is the behaviour under test.
        let r = unsafe { sys::cuKernelGetFunction(&mut f, null_mut()) };
        steps.expect(
            "cuKernelGetFunction(NULL kernel)",
            r,
            CUresult::CUDA_ERROR_INVALID_HANDLE,
        );

        for (what, l) in [
            ("the preserved-binary library", kept),
            ("the file's library", lib),
        ] {
            // SAFETY: loaded above, unloaded once.
            steps.expect(
                &format!("cuLibraryUnload({what})"),
                unsafe { sys::cuLibraryUnload(l) },
                OK,
            );
        }
        // SAFETY: a NULL library is the behaviour under test.
        let r = unsafe { sys::cuLibraryUnload(null_mut()) };
        steps.expect(
            "cuLibraryUnload(NULL) (NVIDIA 580)",
            r,
            CUresult::CUDA_ERROR_INVALID_HANDLE,
        );
        drop(ctx);
    });
}

/// Every library-API entry point cuda.h 13.0 declares.
const LIBRARY_CALLS: [&str; 17] = [
    "cuLibraryLoadData",
    "cuLibraryLoadFromFile",
    "cuLibraryUnload",
    "cuLibraryGetKernel",
    "cuLibraryGetKernelCount",
    "cuLibraryEnumerateKernels",
    "cuLibraryGetModule",
    "cuLibraryGetGlobal",
    "cuLibraryGetManaged",
    "cuLibraryGetUnifiedFunction",
    "cuKernelGetFunction",
    "cuKernelGetLibrary",
    "cuKernelGetName",
    "cuKernelGetParamInfo",
    "cuKernelGetAttribute",
    "cuKernelSetAttribute",
    "cuKernelSetCacheConfig",
];

type LibraryLoadData = unsafe extern "C" fn(
    *mut sys::CUlibrary,
    *const c_void,
    *mut sys::CUjit_option,
    *mut *mut c_void,
    c_uint,
    *mut sys::CUlibraryOption,
    *mut *mut c_void,
    c_uint,
) -> CUresult;
type LibraryGetKernelCount = unsafe extern "C" fn(*mut c_uint, sys::CUlibrary) -> CUresult;

#[test]
fn get_proc_address_finds_every_library_call_at_cuda_13() {
    on_fresh_thread(|_, steps| {
        for name in LIBRARY_CALLS {
            let (r, pfn, status) = proc_address(name, 13000, 0);
            steps.expect(&format!("cuGetProcAddress({name}, 13000)"), r, OK);
            steps.check(
                &format!("{name}: a pointer"),
                !pfn.is_null() && status == 0,
                || format!("{pfn:?}, status {status}"),
            );
        }
        let (r, pfn, status) = proc_address("cuLibraryLoadData", 11080, 0);
        steps.expect(
            "cuGetProcAddress(cuLibraryLoadData, 11080)",
            r,
            CUresult::CUDA_SUCCESS,
        );
        steps.check(
            "too old: NULL, VERSION_NOT_SUFFICIENT",
            pfn.is_null() && status == 2,
            || format!("{pfn:?}, status {status}"),
        );

        // The pointers are the calls: load through them, as the CUDA runtime does.
        let (r1, load, _) = proc_address("cuLibraryLoadData", 13000, 0);
        let (r2, count, _) = proc_address("cuLibraryGetKernelCount", 13000, 0);
        if r1 != OK || r2 != OK || load.is_null() || count.is_null() {
            return;
        }
        // SAFETY: the driver answered these names with these functions, whose signatures these
        // are (cuda.h).
        let (load, count) = unsafe {
            (
                std::mem::transmute::<*mut c_void, LibraryLoadData>(load),
                std::mem::transmute::<*mut c_void, LibraryGetKernelCount>(count),
            )
        };
        let image = fixture();
        let mut lib: sys::CUlibrary = null_mut();
        let mut n: c_uint = 0;
        // SAFETY: valid out-pointers, a NUL-terminated image, no options.
        unsafe {
            let r = load(
                &mut lib,
                image.as_ptr().cast(),
                null_mut(),
                null_mut(),
                0,
                null_mut(),
                null_mut(),
                0,
            );
            steps.expect("cuLibraryLoadData through its pointer", r, OK);
            steps.expect(
                "cuLibraryGetKernelCount through its pointer",
                count(&mut n, lib),
                OK,
            );
            steps.check("two kernels", n == 2, || format!("{n}"));
            steps.expect("cuLibraryUnload", sys::cuLibraryUnload(lib), OK);
        }
    });
}
