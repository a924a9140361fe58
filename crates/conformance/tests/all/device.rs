//! Device and module facts a program can observe: plausible device attributes, kernel
//! attributes from the loaded PTX, malformed PTX refused with CUDA_ERROR_INVALID_PTX, and text that
//! is not PTX at all refused with CUDA_ERROR_INVALID_IMAGE.

use conformance::context::Context;
use conformance::driver::shared_device;
use conformance::module::Module;
use cudarc::driver::result;
use cudarc::driver::sys::{self, CUdevice_attribute as A, CUresult};

use crate::support::{Steps, clang_ptx, env_or_skip};

#[test]
fn device_reports_plausible_attributes() {
    let _shared = shared_device();
    let Some(env) = env_or_skip() else { return };
    let ctx = Context::primary(env).expect("retain");
    let mut steps = Steps::default();
    let attr = |a: A| {
        // SAFETY: `env.device` came from cuDeviceGet after cuInit.
        unsafe { result::device::get_attribute(env.device, a) }.expect("cuDeviceGetAttribute")
    };
    steps.check(
        "1024 threads per block",
        attr(A::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK) == 1024,
        || format!("{}", attr(A::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)),
    );
    steps.check(
        "warp size 32",
        attr(A::CU_DEVICE_ATTRIBUTE_WARP_SIZE) == 32,
        || format!("{}", attr(A::CU_DEVICE_ATTRIBUTE_WARP_SIZE)),
    );
    let shared = attr(A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK);
    steps.check(
        "at least 48 KiB static shared memory per block",
        shared >= 48 * 1024,
        || format!("{shared}"),
    );
    let sms = attr(A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
    steps.check("at least one multiprocessor", sms >= 1, || format!("{sms}"));
    let major = attr(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
    steps.check(
        "compute capability ≥ 7 (the corpus targets sm_80/sm_90)",
        major >= 7,
        || format!("{major}"),
    );
    let mut version = 0i32;
    // SAFETY: `version` is a valid out-pointer.
    let r = unsafe { sys::cuDriverGetVersion(&mut version) };
    steps.expect("cuDriverGetVersion", r, CUresult::CUDA_SUCCESS);
    steps.check(
        "driver API version ≥ 12.0 (cuCtxGetId exists from 12.0)",
        version >= 12000,
        || format!("{version}"),
    );
    let mut count = 0i32;
    // SAFETY: `count` is a valid out-pointer.
    let r = unsafe { sys::cuDeviceGetCount(&mut count) };
    steps.expect("cuDeviceGetCount", r, CUresult::CUDA_SUCCESS);
    steps.check("at least one device", count >= 1, || format!("{count}"));
    let name = result::device::get_name(env.device).expect("cuDeviceGetName");
    steps.check("a device name", !name.trim().is_empty(), || "empty".into());
    // SAFETY: as above.
    let total = unsafe { result::device::total_mem(env.device) }.expect("cuDeviceTotalMem");
    let (free, info_total) = ctx.mem_info().expect("cuMemGetInfo");
    steps.check(
        "cuMemGetInfo's total is positive and at most cuDeviceTotalMem",
        info_total > 0 && info_total <= total,
        || format!("{total} vs {info_total}"),
    );
    steps.check("free ≤ total", free <= total, || {
        format!("free {free}, total {total}")
    });
    println!("device: {name}, cc {major}.x, {sms} SMs, {total} bytes");
    steps.finish(&env.choice.kind.to_string());
}

#[test]
fn kernel_attributes_report_static_shared_memory_and_block_limit() {
    let _shared = shared_device();
    let Some(env) = env_or_skip() else { return };
    let ctx = Context::primary(env).expect("retain");
    let module = Module::load_ptx(&ctx, &clang_ptx("reduce_shared")).expect("load");
    let f = module.function("reduce_shared").expect("function");
    let attr = |a: sys::CUfunction_attribute| {
        // SAFETY: `f` is a live kernel handle (it holds its module).
        unsafe { result::function::get_function_attribute(f.raw(), a) }.expect("cuFuncGetAttribute")
    };
    let shared = attr(sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES);
    assert_eq!(shared, 1024, "reduce_shared declares 256 floats of .shared");
    let max_threads = attr(sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
    assert!(
        (256..=1024).contains(&max_threads),
        "max threads per block {max_threads}"
    );
    // The clang corpus says `.target sm_80`: the PTX (virtual architecture) version is 80 and
    // the binary version is the device's, the JIT having compiled for it.
    let ptx = attr(sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_PTX_VERSION);
    assert_eq!(ptx, 80, "PTX version of a .target sm_80 module");
    let cc = |a| {
        // SAFETY: `env.device` came from cuDeviceGet after cuInit.
        unsafe { result::device::get_attribute(env.device, a) }.expect("cuDeviceGetAttribute")
    };
    let major = cc(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
    let minor = cc(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
    let binary = attr(sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_BINARY_VERSION);
    assert_eq!(
        binary,
        major * 10 + minor,
        "binary version of a JIT-compiled function"
    );
}

#[test]
fn malformed_ptx_is_invalid_ptx_and_text_that_is_not_ptx_is_invalid_image() {
    let _shared = shared_device();
    let Some(env) = env_or_skip() else { return };
    let ctx = Context::primary(env).expect("retain");
    let mut steps = Steps::default();
    let good = clang_ptx("vector_add");
    let body = good.find("ret;").expect("vector_add has a ret");
    let mut bad = good.clone();
    bad.insert_str(body, "frobnicate.b32 \t%r1, %r1;\n\t");
    let load = |text: &str| match Module::load_ptx(&ctx, text) {
        Ok(_) => CUresult::CUDA_SUCCESS,
        Err(e) => e
            .code()
            .unwrap_or_else(|| panic!("not a driver error: {e}")),
    };
    let invalid = CUresult::CUDA_ERROR_INVALID_PTX;
    steps.expect(
        "an instruction that does not exist in PTX",
        load(&bad),
        invalid,
    );
    // NVIDIA's driver does not take text without a PTX directive for PTX at all (H200, 580).
    steps.expect(
        "text that is not PTX",
        load("this is not PTX"),
        CUresult::CUDA_ERROR_INVALID_IMAGE,
    );
    let truncated = &good[..good.len() / 2];
    steps.expect("PTX cut off mid-kernel", load(truncated), invalid);
    steps.expect("the unmodified PTX", load(&good), CUresult::CUDA_SUCCESS);
    steps.finish(&env.choice.kind.to_string());
}
