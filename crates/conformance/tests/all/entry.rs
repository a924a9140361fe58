//! What a CUDA 13 program meets first: the driver version, every `cuCtxCreate` form (CUDA 13's
//! `cuCtxCreate` is `_v4` with a `CUctxCreateParams`), `cuGetProcAddress` as libcudart uses it
//! (one base name and the version its variant appeared in), `cuGetExportTable` for a table the
//! driver does not know, and an answer for every device attribute of CUDA 13's list.

use std::ffi::{CString, c_int, c_uint, c_void};

use cudarc::driver::sys::{self, CUresult};

use crate::support::{Steps, on_fresh_thread};

/// Checks that `ctx` is current, usable (an allocation succeeds) and destroys it.
fn use_and_destroy(steps: &mut Steps, form: &str, ctx: sys::CUcontext) {
    let mut current: sys::CUcontext = std::ptr::null_mut();
    // SAFETY: valid out-pointer.
    unsafe { sys::cuCtxGetCurrent(&mut current) };
    steps.check(
        &format!("{form}: the new context is current"),
        current == ctx,
        || format!("current {current:?}, created {ctx:?}"),
    );
    steps.expect(
        &format!("{form}: cuMemAlloc in the new context"),
        crate::support::try_alloc(4096),
        CUresult::CUDA_SUCCESS,
    );
    // SAFETY: `ctx` was created by this thread and is destroyed once.
    let r = unsafe { sys::cuCtxDestroy_v2(ctx) };
    steps.expect(&format!("{form}: cuCtxDestroy"), r, CUresult::CUDA_SUCCESS);
}

#[test]
fn every_ctx_create_form_accepts_what_nvidia_accepts() {
    on_fresh_thread(|dev, steps| {
        let mut ctx: sys::CUcontext = std::ptr::null_mut();
        // SAFETY: `ctx` is a valid out-pointer and `dev` came from cuDeviceGet.
        let r = unsafe { sys::cuCtxCreate_v2(&mut ctx, 0, dev) };
        steps.expect("cuCtxCreate_v2(flags 0)", r, CUresult::CUDA_SUCCESS);
        if r == CUresult::CUDA_SUCCESS {
            use_and_destroy(steps, "v2", ctx);
        }
        // SAFETY: out-pointers and parameter structs live on this frame for the call; `dev` came from cuDeviceGet.
        let r = unsafe { sys::cuCtxCreate_v3(&mut ctx, std::ptr::null_mut(), 0, 0, dev) };
        steps.expect("cuCtxCreate_v3(no affinity)", r, CUresult::CUDA_SUCCESS);
        if r == CUresult::CUDA_SUCCESS {
            use_and_destroy(steps, "v3", ctx);
        }
        // SAFETY: out-pointers and parameter structs live on this frame for the call; `dev` came from cuDeviceGet.
        let r = unsafe { sys::cuCtxCreate_v4(&mut ctx, std::ptr::null_mut(), 0, dev) };
        steps.expect("cuCtxCreate_v4(NULL params)", r, CUresult::CUDA_SUCCESS);
        if r == CUresult::CUDA_SUCCESS {
            use_and_destroy(steps, "v4 NULL", ctx);
        }
        // What CUDA 13 programs pass: `&(CUctxCreateParams){}`.
        let mut zeroed = sys::CUctxCreateParams {
            execAffinityParams: std::ptr::null_mut(),
            numExecAffinityParams: 0,
            cigParams: std::ptr::null_mut(),
        };
        let blocking_sync_map_host = 0x4 | 0x8;
        // SAFETY: out-pointers and parameter structs live on this frame for the call; `dev` came from cuDeviceGet.
        let r = unsafe { sys::cuCtxCreate_v4(&mut ctx, &mut zeroed, blocking_sync_map_host, dev) };
        steps.expect(
            "cuCtxCreate_v4(zeroed params, BLOCKING_SYNC|MAP_HOST)",
            r,
            CUresult::CUDA_SUCCESS,
        );
        if r == CUresult::CUDA_SUCCESS {
            use_and_destroy(steps, "v4 zeroed", ctx);
        }
        // SAFETY: out-pointers and parameter structs live on this frame for the call; `dev` came from cuDeviceGet.
        let r = unsafe { sys::cuCtxCreate_v4(&mut ctx, &mut zeroed, 0x3, dev) };
        steps.expect(
            "cuCtxCreate_v4 with scheduling mode 3 (none)",
            r,
            CUresult::CUDA_ERROR_INVALID_VALUE,
        );
        // SAFETY: out-pointers and parameter structs live on this frame for the call; `dev` came from cuDeviceGet.
        let r = unsafe { sys::cuCtxCreate_v4(std::ptr::null_mut(), &mut zeroed, 0, dev) };
        steps.expect(
            "cuCtxCreate_v4(NULL pctx)",
            r,
            CUresult::CUDA_ERROR_INVALID_VALUE,
        );
        let mut count = 0;
        // SAFETY: out-pointers and parameter structs live on this frame for the call; `dev` came from cuDeviceGet.
        unsafe { sys::cuDeviceGetCount(&mut count) };
        // SAFETY: out-pointers and parameter structs live on this frame for the call; `dev` came from cuDeviceGet.
        let r = unsafe { sys::cuCtxCreate_v4(&mut ctx, &mut zeroed, 0, count) };
        steps.expect(
            "cuCtxCreate_v4(no such device)",
            r,
            CUresult::CUDA_ERROR_INVALID_DEVICE,
        );

        // An SM-count affinity succeeds exactly where the device says it supports one.
        let mut supported: c_int = -1;
        // SAFETY: out-pointers and parameter structs live on this frame for the call; `dev` came from cuDeviceGet.
        let r = unsafe {
            sys::cuDeviceGetExecAffinitySupport(
                &mut supported,
                sys::CUexecAffinityType::CU_EXEC_AFFINITY_TYPE_SM_COUNT,
                dev,
            )
        };
        steps.expect(
            "cuDeviceGetExecAffinitySupport(SM_COUNT)",
            r,
            CUresult::CUDA_SUCCESS,
        );
        // SAFETY: out-pointers and parameter structs live on this frame for the call; `dev` came from cuDeviceGet.
        let mut affinity: sys::CUexecAffinityParam = unsafe { std::mem::zeroed() };
        affinity.type_ = sys::CUexecAffinityType::CU_EXEC_AFFINITY_TYPE_SM_COUNT;
        affinity.param.smCount.val = 1;
        let mut with_affinity = sys::CUctxCreateParams {
            execAffinityParams: &mut affinity,
            numExecAffinityParams: 1,
            cigParams: std::ptr::null_mut(),
        };
        // SAFETY: out-pointers and parameter structs live on this frame for the call; `dev` came from cuDeviceGet.
        let r = unsafe { sys::cuCtxCreate_v4(&mut ctx, &mut with_affinity, 0, dev) };
        let want = if supported == 1 {
            CUresult::CUDA_SUCCESS
        } else {
            CUresult::CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY
        };
        steps.expect(
            &format!("cuCtxCreate_v4(1-SM affinity) with support = {supported}"),
            r,
            want,
        );
        if r == CUresult::CUDA_SUCCESS {
            use_and_destroy(steps, "v4 affinity", ctx);
        }
    });
}

/// cuGetProcAddress_v2's (result, pfn, status).
pub(crate) fn proc_address(
    name: &str,
    version: c_int,
    flags: u64,
) -> (CUresult, *mut c_void, c_uint) {
    let name = CString::new(name).expect("no NUL");
    let mut pfn: *mut c_void = std::ptr::dangling_mut();
    let mut status = sys::CUdriverProcAddressQueryResult::CU_GET_PROC_ADDRESS_SUCCESS;
    // SAFETY: valid out-pointers and a NUL-terminated name.
    let r =
        // SAFETY: out-pointers and parameter structs live on this frame for the call; `dev` came from cuDeviceGet.
        unsafe { sys::cuGetProcAddress_v2(name.as_ptr(), &mut pfn, version, flags, &mut status) };
    (r, pfn, status as c_uint)
}

type CtxCreateV4 = unsafe extern "C" fn(
    *mut sys::CUcontext,
    *mut sys::CUctxCreateParams,
    c_uint,
    sys::CUdevice,
) -> CUresult;
type CtxCreateV2 = unsafe extern "C" fn(*mut sys::CUcontext, c_uint, sys::CUdevice) -> CUresult;
type MemAllocV2 = unsafe extern "C" fn(*mut sys::CUdeviceptr, usize) -> CUresult;
type MemFreeV2 = unsafe extern "C" fn(sys::CUdeviceptr) -> CUresult;
type GetAttribute = unsafe extern "C" fn(*mut c_int, c_int, sys::CUdevice) -> CUresult;
type GetProcAddressV1 =
    unsafe extern "C" fn(*const std::ffi::c_char, *mut *mut c_void, c_int, u64) -> CUresult;
type DriverGetVersion = unsafe extern "C" fn(*mut c_int) -> CUresult;

#[test]
fn get_proc_address_answers_the_variant_of_the_asked_version() {
    on_fresh_thread(|dev, steps| {
        let mut version = 0;
        // SAFETY: valid out-pointer.
        let r = unsafe { sys::cuDriverGetVersion(&mut version) };
        steps.expect("cuDriverGetVersion", r, CUresult::CUDA_SUCCESS);
        steps.check(
            "a CUDA 13 driver (libcudart 13 needs ≥ 13000)",
            version >= 13000,
            || format!("{version}"),
        );

        let (r, pfn, status) = proc_address("cuDriverGetVersion", 2020, 0);
        steps.expect(
            "cuGetProcAddress(cuDriverGetVersion, 2020)",
            r,
            CUresult::CUDA_SUCCESS,
        );
        steps.check("status SUCCESS", status == 0, || format!("{status}"));
        if r == CUresult::CUDA_SUCCESS && !pfn.is_null() {
            // SAFETY: the driver returned cuDriverGetVersion, whose signature this is.
            let f: DriverGetVersion = unsafe { std::mem::transmute(pfn) };
            let mut again = 0;
            // SAFETY: out-pointers and parameter structs live on this frame for the call; `dev` came from cuDeviceGet.
            let r = unsafe { f(&mut again) };
            steps.check(
                "the pointer is cuDriverGetVersion",
                r == CUresult::CUDA_SUCCESS && again == version,
                || format!("{r:?}, {again}"),
            );
        }

        // CUDA 13's cuCtxCreate takes CUctxCreateParams; 3.2's does not.
        let (r, pfn, _) = proc_address("cuCtxCreate", 13000, 0);
        steps.expect(
            "cuGetProcAddress(cuCtxCreate, 13000)",
            r,
            CUresult::CUDA_SUCCESS,
        );
        let mut ctx: sys::CUcontext = std::ptr::null_mut();
        if !pfn.is_null() {
            // SAFETY: at 13000 the driver answers cuCtxCreate_v4, whose signature this is.
            let f: CtxCreateV4 = unsafe { std::mem::transmute(pfn) };
            // SAFETY: out-pointers and parameter structs live on this frame for the call; `dev` came from cuDeviceGet.
            let mut zeroed: sys::CUctxCreateParams = unsafe { std::mem::zeroed() };
            // SAFETY: out-pointers and parameter structs live on this frame for the call; `dev` came from cuDeviceGet.
            let r = unsafe { f(&mut ctx, &mut zeroed, 0, dev) };
            steps.expect("cuCtxCreate@13000 called as _v4", r, CUresult::CUDA_SUCCESS);
            if r == CUresult::CUDA_SUCCESS {
                use_and_destroy(steps, "cuCtxCreate@13000", ctx);
            }
        }
        let (r, pfn, _) = proc_address("cuCtxCreate", 3020, 0);
        steps.expect(
            "cuGetProcAddress(cuCtxCreate, 3020)",
            r,
            CUresult::CUDA_SUCCESS,
        );
        if !pfn.is_null() {
            // SAFETY: at 3020 the driver answers cuCtxCreate_v2, whose signature this is.
            let f: CtxCreateV2 = unsafe { std::mem::transmute(pfn) };
            // SAFETY: out-pointers and parameter structs live on this frame for the call; `dev` came from cuDeviceGet.
            let r = unsafe { f(&mut ctx, 0, dev) };
            steps.expect("cuCtxCreate@3020 called as _v2", r, CUresult::CUDA_SUCCESS);
            if r == CUresult::CUDA_SUCCESS {
                let (_, alloc, _) = proc_address("cuMemAlloc", 3020, 0);
                let (_, free, _) = proc_address("cuMemFree", 3020, 0);
                if !alloc.is_null() && !free.is_null() {
                    // SAFETY: the _v2 (size_t, 64-bit pointer) signatures of CUDA 3.2.
                    let (alloc, free): (MemAllocV2, MemFreeV2) =
                        // SAFETY: out-pointers and parameter structs live on this frame for the call; `dev` came from cuDeviceGet.
                        unsafe {
                            (
                                std::mem::transmute::<*mut c_void, MemAllocV2>(alloc),
                                std::mem::transmute::<*mut c_void, MemFreeV2>(free),
                            )
                        };
                    let mut p: sys::CUdeviceptr = 0;
                    // SAFETY: out-pointers and parameter structs live on this frame for the call; `dev` came from cuDeviceGet.
                    let r = unsafe { alloc(&mut p, 5 << 20) };
                    steps.expect("cuMemAlloc@3020 (5 MiB)", r, CUresult::CUDA_SUCCESS);
                    // SAFETY: out-pointers and parameter structs live on this frame for the call; `dev` came from cuDeviceGet.
                    let r = unsafe { free(p) };
                    steps.expect("cuMemFree@3020", r, CUresult::CUDA_SUCCESS);
                } else {
                    steps.check("cuMemAlloc/cuMemFree@3020 found", false, || "NULL".into());
                }
                // SAFETY: created above on this thread, destroyed once.
                unsafe { sys::cuCtxDestroy_v2(ctx) };
            }
        }

        // The stream flags pick a variant; both exist for cuLaunchKernel.
        for flags in [1, 2] {
            let (r, pfn, _) = proc_address("cuLaunchKernel", 7000, flags);
            steps.expect(
                &format!("cuGetProcAddress(cuLaunchKernel, flags {flags})"),
                r,
                CUresult::CUDA_SUCCESS,
            );
            steps.check(
                &format!("cuLaunchKernel with flags {flags} is found"),
                !pfn.is_null(),
                || "NULL".into(),
            );
        }

        // Not found: the pointer is NULL and the status says why.
        let (r, pfn, status) = proc_address("cuNoSuchFunction", 13000, 0);
        steps.expect_any(
            "cuGetProcAddress(unknown)",
            r,
            &[CUresult::CUDA_ERROR_NOT_FOUND, CUresult::CUDA_SUCCESS],
        );
        steps.check(
            "unknown: NULL, SYMBOL_NOT_FOUND",
            pfn.is_null() && status == 1,
            || format!("{pfn:?}, {status}"),
        );
        let (r, pfn, status) = proc_address("cuLaunchKernelEx", 11040, 0);
        // The call succeeds; only the status says the version is too old (NVIDIA 580).
        steps.expect(
            "cuGetProcAddress(cuLaunchKernelEx, 11040)",
            r,
            CUresult::CUDA_SUCCESS,
        );
        steps.check(
            "too old: NULL, VERSION_NOT_SUFFICIENT",
            pfn.is_null() && status == 2,
            || format!("{pfn:?}, {status}"),
        );
        let (r, ..) = proc_address("cuInit", version + 10, 0);
        steps.expect(
            "cuGetProcAddress above the driver's version",
            r,
            CUresult::CUDA_ERROR_INVALID_VALUE,
        );

        // The CUDA 11.3 signature (no status) is still there, under its own base-name version.
        let (r, v1, _) = proc_address("cuGetProcAddress", 11030, 0);
        steps.expect(
            "cuGetProcAddress(cuGetProcAddress, 11030)",
            r,
            CUresult::CUDA_SUCCESS,
        );
        if !v1.is_null() {
            // SAFETY: the CUDA 11.3 signature of cuGetProcAddress.
            let v1: GetProcAddressV1 = unsafe { std::mem::transmute(v1) };
            let name = CString::new("cuInit").expect("no NUL");
            let mut pfn: *mut c_void = std::ptr::null_mut();
            // SAFETY: valid out-pointer and NUL-terminated name.
            let r = unsafe { v1(name.as_ptr(), &mut pfn, 2000, 0) };
            steps.expect(
                "cuGetProcAddress v1 (cuInit, 2000)",
                r,
                CUresult::CUDA_SUCCESS,
            );
            steps.check("v1 finds cuInit", !pfn.is_null(), || "NULL".into());
        }
    });
}

#[test]
fn get_export_table_refuses_an_unknown_table_id() {
    on_fresh_thread(|_, steps| {
        let id = sys::CUuuid { bytes: [0x5a; 16] };
        let mut table: *const c_void = std::ptr::dangling();
        // SAFETY: valid out-pointer and a readable id.
        let r = unsafe { sys::cuGetExportTable(&mut table, &id) };
        steps.expect(
            "cuGetExportTable(unknown id)",
            r,
            CUresult::CUDA_ERROR_INVALID_VALUE,
        );
    });
}

#[test]
fn every_device_attribute_of_cuda_13_answers() {
    on_fresh_thread(|dev, steps| {
        // CU_DEVICE_ATTRIBUTE_MAX - 1 in CUDA 13.0's cuda.h.
        const LAST: c_int = 147;
        // The attribute goes in as its C integer, through a pointer typed that way: the Rust
        // enum of the cuda.h cudarc is built against lacks the newest values.
        let (r, pfn, _) = proc_address("cuDeviceGetAttribute", 2000, 0);
        steps.expect(
            "cuGetProcAddress(cuDeviceGetAttribute)",
            r,
            CUresult::CUDA_SUCCESS,
        );
        if pfn.is_null() {
            return;
        }
        // SAFETY: cuDeviceGetAttribute's C signature, with the enum as the int it is in C.
        let get: GetAttribute = unsafe { std::mem::transmute(pfn) };
        let mut missing = Vec::new();
        for attr in 1..=LAST {
            let mut value = 0;
            // SAFETY: valid out-pointer; `dev` came from cuDeviceGet.
            let r = unsafe { get(&mut value, attr, dev) };
            if r != CUresult::CUDA_SUCCESS {
                missing.push(format!("{attr}: {r:?}"));
            }
        }
        steps.check(
            "every attribute 1..=147 answers",
            missing.is_empty(),
            || missing.join(", "),
        );
    });
}
