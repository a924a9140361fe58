//! Initialisation and device facts through the C ABI.

use std::ffi::{CStr, c_char, c_int};

use cudarc::driver::sys::{CUdevice_attribute as A, CUresult};
use softcuda::exports::*;

use crate::common::{ok, serial};

#[test]
fn version_and_error_strings_work_before_init() {
    let mut v = 0;
    // SAFETY: valid out-pointers throughout.
    unsafe {
        ok(cuDriverGetVersion(&mut v));
        assert_eq!(v, 13000);
        let mut s: *const c_char = std::ptr::null();
        ok(cuGetErrorName(700, &mut s));
        assert_eq!(
            CStr::from_ptr(s).to_str().unwrap(),
            "CUDA_ERROR_ILLEGAL_ADDRESS"
        );
        ok(cuGetErrorString(2, &mut s));
        assert_eq!(CStr::from_ptr(s).to_str().unwrap(), "out of memory");
        assert_eq!(
            cuGetErrorName(4242, &mut s),
            CUresult::CUDA_ERROR_INVALID_VALUE
        );
        assert!(s.is_null());
    }
}

#[test]
fn device_reports_softcuda_facts() {
    let _g = serial();
    // SAFETY: valid out-pointers and buffer lengths throughout.
    unsafe {
        ok(cuInit(0));
        let mut n = 0;
        ok(cuDeviceGetCount(&mut n));
        assert_eq!(n, 1);
        let mut dev = -1;
        ok(cuDeviceGet(&mut dev, 0));
        assert_eq!(dev, 0);
        assert_eq!(
            cuDeviceGet(&mut dev, 1),
            CUresult::CUDA_ERROR_INVALID_DEVICE
        );
        let mut name = [0 as c_char; 64];
        ok(cuDeviceGetName(name.as_mut_ptr(), 64, 0));
        assert_eq!(CStr::from_ptr(name.as_ptr()).to_str().unwrap(), "softcuda");
        let attr = |a: A| {
            let mut v: c_int = -7;
            ok(cuDeviceGetAttribute(&mut v, a as u32, 0));
            v
        };
        assert_eq!(attr(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR), 9);
        assert_eq!(attr(A::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK), 1024);
        assert_eq!(attr(A::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z), 64);
        assert_eq!(attr(A::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y), 65535);
        assert_eq!(
            attr(A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK),
            48 * 1024
        );
        assert_eq!(attr(A::CU_DEVICE_ATTRIBUTE_WARP_SIZE), 32);
        let cores = std::thread::available_parallelism().unwrap().get() as c_int;
        assert_eq!(attr(A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT), cores);
        let mut v = 0;
        assert_eq!(
            cuDeviceGetAttribute(&mut v, 100_000, 0),
            CUresult::CUDA_ERROR_INVALID_VALUE
        );
        let mut total = 0usize;
        ok(cuDeviceTotalMem_v2(&mut total, 0));
        assert!(total > 0);
    }
}

#[test]
fn init_rejects_nonzero_flags() {
    // (Calls before cuInit are checked by the C program test, in a fresh process.)
    // SAFETY: plain call.
    assert_eq!(unsafe { cuInit(1) }, CUresult::CUDA_ERROR_INVALID_VALUE);
}
