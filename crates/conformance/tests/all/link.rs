//! cuLink*: PTX added to a link state comes out as an image cuModuleLoadData accepts and whose
//! kernel runs; malformed PTX is refused when added. (NVIDIA's image is a cubin; softcuda's is
//! the PTX itself — the program cannot tell.)

use std::ffi::{CString, c_void};

use conformance::context::Context;
use conformance::driver::shared_device;
use cudarc::driver::sys::{self, CUresult};

use crate::support::{Steps, clang_ptx, env_or_skip};

/// cuLinkCreate + cuLinkAddData(PTX): the state and AddData's result.
fn link_ptx(ptx: &str) -> (sys::CUlinkState, CUresult) {
    let mut state: sys::CUlinkState = std::ptr::null_mut();
    let text = CString::new(ptx).expect("no NUL in PTX");
    let bytes = text.as_bytes_with_nul();
    // SAFETY: valid out-pointer, no options; `bytes` outlives the call.
    unsafe {
        let r = sys::cuLinkCreate_v2(0, std::ptr::null_mut(), std::ptr::null_mut(), &mut state);
        assert_eq!(r, CUresult::CUDA_SUCCESS, "cuLinkCreate");
        let r = sys::cuLinkAddData_v2(
            state,
            sys::CUjitInputType::CU_JIT_INPUT_PTX,
            bytes.as_ptr().cast_mut().cast(),
            bytes.len(),
            c"saxpy.ptx".as_ptr(),
            0,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        );
        (state, r)
    }
}

#[test]
fn linked_ptx_loads_and_runs_and_bad_ptx_is_refused_when_added() {
    let _shared = shared_device();
    let Some(env) = env_or_skip() else { return };
    let _ctx = Context::primary(env).expect("retain");
    let mut steps = Steps::default();

    let (state, r) = link_ptx(&clang_ptx("saxpy"));
    steps.expect("cuLinkAddData(saxpy PTX)", r, CUresult::CUDA_SUCCESS);
    let (mut image, mut size): (*mut c_void, usize) = (std::ptr::null_mut(), 0);
    // SAFETY: a live link state and valid out-pointers.
    let r = unsafe { sys::cuLinkComplete(state, &mut image, &mut size) };
    steps.expect("cuLinkComplete", r, CUresult::CUDA_SUCCESS);
    steps.check("an image", !image.is_null() && size > 0, || {
        format!("{image:?}, {size}")
    });
    let n = 300usize;
    let mut out = vec![0f32; n];
    // SAFETY: the image lives until cuLinkDestroy below; buffers and arguments live across the
    // calls that use them.
    unsafe {
        let mut module: sys::CUmodule = std::ptr::null_mut();
        steps.expect(
            "cuModuleLoadData(linked image)",
            sys::cuModuleLoadData(&mut module, image),
            CUresult::CUDA_SUCCESS,
        );
        let mut f: sys::CUfunction = std::ptr::null_mut();
        steps.expect(
            "cuModuleGetFunction",
            sys::cuModuleGetFunction(&mut f, module, c"saxpy".as_ptr()),
            CUresult::CUDA_SUCCESS,
        );
        let (mut x, mut y): (sys::CUdeviceptr, sys::CUdeviceptr) = (0, 0);
        sys::cuMemAlloc_v2(&mut x, n * 4);
        sys::cuMemAlloc_v2(&mut y, n * 4);
        let xs: Vec<f32> = (0..n).map(|i| i as f32).collect();
        sys::cuMemcpyHtoD_v2(x, xs.as_ptr().cast(), n * 4);
        sys::cuMemsetD32_v2(y, 1.0f32.to_bits(), n);
        let (mut count, mut a) = (n as i32, 2.0f32);
        let mut args: [*mut c_void; 4] = [
            (&raw mut count).cast(),
            (&raw mut a).cast(),
            (&raw mut x).cast(),
            (&raw mut y).cast(),
        ];
        let r = sys::cuLaunchKernel(
            f,
            2,
            1,
            1,
            256,
            1,
            1,
            0,
            std::ptr::null_mut(),
            args.as_mut_ptr(),
            std::ptr::null_mut(),
        );
        steps.expect("launch the linked saxpy", r, CUresult::CUDA_SUCCESS);
        steps.expect(
            "cuMemcpyDtoH",
            sys::cuMemcpyDtoH_v2(out.as_mut_ptr().cast(), y, n * 4),
            CUresult::CUDA_SUCCESS,
        );
        sys::cuMemFree_v2(x);
        sys::cuMemFree_v2(y);
        sys::cuModuleUnload(module);
        steps.expect(
            "cuLinkDestroy",
            sys::cuLinkDestroy(state),
            CUresult::CUDA_SUCCESS,
        );
    }
    steps.check(
        "y = 2x + 1",
        out.iter()
            .enumerate()
            .all(|(i, v)| *v == 2.0 * i as f32 + 1.0),
        || format!("{:?}", &out[..4]),
    );

    let (bad, r) = link_ptx(
        ".version 7.0\n.target sm_80\n.address_size 64\n.visible .entry k() { bogus.op %r1; }\n",
    );
    steps.expect(
        "cuLinkAddData(malformed PTX)",
        r,
        CUresult::CUDA_ERROR_INVALID_PTX,
    );
    // SAFETY: a live link state, destroyed once.
    unsafe { sys::cuLinkDestroy(bad) };
    steps.finish(&env.choice.kind.to_string());
}
