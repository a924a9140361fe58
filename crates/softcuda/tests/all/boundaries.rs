//! Hostile and mistaken input at the new boundaries — graphs, stream capture, cuLink*, cuGetProcAddress,
//! CUDA 13 context creation — answers with typed errors and leaves the driver usable.

use std::ffi::{CString, c_void};

use cudarc::driver::sys::{self, CUDA_KERNEL_NODE_PARAMS, CUfunction, CUmodule, CUresult};
use softcuda::exports::*;

use crate::common::{fresh_primary, ok, serial, stream};

const INVALID: CUresult = CUresult::CUDA_ERROR_INVALID_VALUE;

/// `bump(int by)` from the test kernels: adds `by` to the module global `counter`.
fn bump() -> (CUmodule, CUfunction) {
    let ptx = CString::new(include_str!("../fixtures/kernels.ptx")).unwrap();
    let (mut m, mut f): (CUmodule, CUfunction) = (std::ptr::null_mut(), std::ptr::null_mut());
    // SAFETY: NUL-terminated PTX, valid out-pointers.
    unsafe {
        ok(cuModuleLoadData(&mut m, ptx.as_ptr().cast()));
        ok(cuModuleGetFunction(&mut f, m, c"bump".as_ptr()));
    }
    (m, f)
}

fn node_params(
    f: CUfunction,
    by: &mut i32,
    args: &mut [*mut c_void; 1],
) -> CUDA_KERNEL_NODE_PARAMS {
    args[0] = (by as *mut i32).cast();
    // SAFETY: all-zero is a valid CUDA_KERNEL_NODE_PARAMS.
    let mut p: CUDA_KERNEL_NODE_PARAMS = unsafe { std::mem::zeroed() };
    p.func = f;
    (p.gridDimX, p.gridDimY, p.gridDimZ) = (1, 1, 1);
    (p.blockDimX, p.blockDimY, p.blockDimZ) = (1, 1, 1);
    p.kernelParams = args.as_mut_ptr();
    p
}

#[test]
fn graph_calls_refuse_bad_handles_lists_and_parameters() {
    let _g = serial();
    fresh_primary();
    let (_m, f) = bump();
    let (mut by, mut args) = (1, [std::ptr::null_mut(); 1]);
    let good = node_params(f, &mut by, &mut args);
    // SAFETY: every pointer passed is valid or deliberately NULL; handles are checked.
    unsafe {
        assert_eq!(cuGraphCreate(std::ptr::null_mut(), 0), INVALID);
        let mut g = std::ptr::null_mut();
        assert_eq!(cuGraphCreate(&mut g, 1), INVALID);
        ok(cuGraphCreate(&mut g, 0));
        let mut other = std::ptr::null_mut();
        ok(cuGraphCreate(&mut other, 0));
        let (mut a, mut b, mut foreign) = (
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        );
        ok(cuGraphAddKernelNode_v2(
            &mut a,
            g,
            std::ptr::null(),
            0,
            &good,
        ));
        ok(cuGraphAddEmptyNode(
            &mut foreign,
            other,
            std::ptr::null(),
            0,
        ));
        assert_eq!(
            cuGraphAddEmptyNode(&mut b, g, std::ptr::null(), 3),
            INVALID,
            "NULL list of 3"
        );
        assert_eq!(
            cuGraphAddEmptyNode(&mut b, g, &foreign, 1),
            INVALID,
            "a node of another graph"
        );
        let twice = [a, a];
        assert_eq!(
            cuGraphAddEmptyNode(&mut b, g, twice.as_ptr(), 2),
            INVALID,
            "a repeated dependency"
        );
        assert_eq!(
            cuGraphAddKernelNode_v2(&mut b, g, std::ptr::null(), 0, std::ptr::null()),
            INVALID
        );
        let mut no_func = good;
        no_func.func = std::ptr::null_mut();
        assert_eq!(
            cuGraphAddKernelNode_v2(&mut b, g, std::ptr::null(), 0, &no_func),
            INVALID
        );
        let mut empty_grid = good;
        empty_grid.gridDimX = 0;
        assert_eq!(
            cuGraphAddKernelNode_v2(&mut b, g, std::ptr::null(), 0, &empty_grid),
            INVALID
        );
        ok(cuGraphAddEmptyNode(&mut b, g, &a, 1));
        assert_eq!(cuGraphAddDependencies(g, &b, &a, 1), INVALID, "a cycle");
        assert_eq!(cuGraphAddDependencies(g, &a, &a, 1), INVALID, "a self edge");
        assert_eq!(
            cuGraphAddDependencies(g, &a, &b, 1),
            INVALID,
            "an edge already there"
        );
        assert_eq!(
            cuGraphAddDependencies(g, &a, &foreign, 1),
            INVALID,
            "an edge to another graph"
        );
        let mut exec = std::ptr::null_mut();
        assert_eq!(cuGraphInstantiateWithFlags(&mut exec, g, 0x100), INVALID);
        assert_eq!(
            cuGraphInstantiateWithFlags(&mut exec, g, 0x4),
            CUresult::CUDA_ERROR_NOT_SUPPORTED
        );
        ok(cuGraphInstantiateWithFlags(&mut exec, g, 0));
        assert_eq!(
            cuGraphExecKernelNodeSetParams_v2(exec, b, &good),
            INVALID,
            "b is not a kernel node"
        );
        assert_eq!(
            cuGraphExecKernelNodeSetParams_v2(exec, foreign, &good),
            INVALID,
            "not in this graph"
        );
        ok(cuGraphExecDestroy(exec));
        assert_eq!(
            cuGraphLaunch(exec, std::ptr::null_mut()),
            INVALID,
            "a destroyed executable graph"
        );
        assert_eq!(cuGraphExecDestroy(exec), INVALID);
        ok(cuGraphDestroy(g));
        assert_eq!(cuGraphDestroy(g), INVALID);
        assert_eq!(
            cuGraphNodeGetType(a, &mut 0),
            INVALID,
            "a node of a destroyed graph"
        );
        ok(cuGraphDestroy(other));
    }
}

#[test]
fn capture_refuses_bad_modes_nesting_and_ends_without_a_begin() {
    let _g = serial();
    fresh_primary();
    let s = stream(1);
    // SAFETY: a live stream and valid out-pointers.
    unsafe {
        assert_eq!(cuStreamBeginCapture_v2(s, 7), INVALID);
        let mut g = std::ptr::null_mut();
        assert_eq!(
            cuStreamEndCapture(s, &mut g),
            CUresult::CUDA_ERROR_ILLEGAL_STATE
        );
        let (mut status, mut id) = (9u32, 0u64);
        ok(cuStreamGetCaptureInfo(s, &mut status, &mut id));
        assert_eq!(status, 0, "not capturing");
        ok(cuStreamBeginCapture_v2(s, 1));
        assert_eq!(
            cuStreamBeginCapture_v2(s, 1),
            CUresult::CUDA_ERROR_ILLEGAL_STATE,
            "already capturing"
        );
        assert_eq!(
            cuStreamQuery(s),
            CUresult::CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED
        );
        assert_eq!(
            cuStreamEndCapture(s, &mut g),
            CUresult::CUDA_ERROR_STREAM_CAPTURE_INVALIDATED
        );
        assert!(g.is_null());
        // The stream works normally afterwards.
        ok(cuStreamSynchronize(s));
        ok(cuStreamDestroy_v2(s));
    }
}

#[test]
fn get_proc_address_and_ctx_create_refuse_malformed_requests() {
    let _g = serial();
    fresh_primary();
    let mut pfn: *mut c_void = std::ptr::null_mut();
    let mut status = 0u32;
    // SAFETY: valid out-pointers and NUL-terminated names, or deliberate NULLs.
    unsafe {
        assert_eq!(
            cuGetProcAddress_v2(std::ptr::null(), &mut pfn, 13000, 0, &mut status),
            INVALID
        );
        assert_eq!(
            cuGetProcAddress_v2(
                c"cuInit".as_ptr(),
                std::ptr::null_mut(),
                13000,
                0,
                &mut status
            ),
            INVALID
        );
        assert_eq!(
            cuGetProcAddress_v2(c"cuInit".as_ptr(), &mut pfn, 13000, 4, &mut status),
            INVALID,
            "unknown flag"
        );
        assert_eq!(
            cuGetProcAddress_v2(c"cuInit".as_ptr(), &mut pfn, -1, 0, &mut status),
            INVALID
        );
        assert_eq!(
            cuGetProcAddress_v2(
                c"softcuda_abi_version".as_ptr(),
                &mut pfn,
                13000,
                0,
                &mut status
            ),
            CUresult::CUDA_ERROR_NOT_FOUND
        );
        assert!(pfn.is_null());
        assert_eq!(
            cuGetExportTable(std::ptr::null_mut(), std::ptr::null()),
            INVALID
        );

        let mut ctx = std::ptr::null_mut();
        let mut affinity: sys::CUexecAffinityParam = std::mem::zeroed();
        affinity.param.smCount.val = 1;
        let params =
            |aff: *mut sys::CUexecAffinityParam, n: i32, cig: usize| sys::CUctxCreateParams {
                execAffinityParams: aff,
                numExecAffinityParams: n,
                cigParams: std::ptr::without_provenance_mut(cig),
            };
        let both = params(&mut affinity, 1, 8);
        assert_eq!(
            cuCtxCreate_v4(&mut ctx, (&raw const both).cast(), 0, 0),
            INVALID,
            "affinity and CIG together"
        );
        let negative = params(std::ptr::null_mut(), -1, 0);
        assert_eq!(
            cuCtxCreate_v4(&mut ctx, (&raw const negative).cast(), 0, 0),
            INVALID,
            "a negative count"
        );
        let missing = params(std::ptr::null_mut(), 2, 0);
        assert_eq!(
            cuCtxCreate_v4(&mut ctx, (&raw const missing).cast(), 0, 0),
            INVALID,
            "a count without an array"
        );
        let cig_only = params(std::ptr::null_mut(), 0, 8);
        assert_eq!(
            cuCtxCreate_v4(&mut ctx, (&raw const cig_only).cast(), 0, 0),
            CUresult::CUDA_ERROR_NOT_SUPPORTED,
            "CIG"
        );
        let sm = params(&mut affinity, 1, 0);
        assert_eq!(
            cuCtxCreate_v4(&mut ctx, (&raw const sm).cast(), 0, 0),
            CUresult::CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY
        );
        assert_eq!(
            cuCtxCreate_v4(&mut ctx, std::ptr::null(), 0, 1),
            CUresult::CUDA_ERROR_INVALID_DEVICE
        );
    }
}

#[test]
fn link_refuses_bad_inputs_and_a_second_definition_and_hands_out_one_input_as_added() {
    let _g = serial();
    fresh_primary();
    let ptx = CString::new(include_str!("../fixtures/kernels.ptx")).unwrap();
    let bytes = ptx.as_bytes_with_nul();
    let data = bytes.as_ptr().cast_mut().cast::<c_void>();
    let (none, no_opts) = (std::ptr::null_mut(), std::ptr::null_mut());
    // SAFETY: valid out-pointers; `bytes` outlives every call; other pointers deliberately NULL.
    unsafe {
        let mut state = std::ptr::null_mut();
        assert_eq!(
            cuLinkCreate_v2(2, none, no_opts, &mut state),
            INVALID,
            "options without arrays"
        );
        ok(cuLinkCreate_v2(0, none, no_opts, &mut state));
        let (mut image, mut size) = (std::ptr::null_mut(), 0usize);
        let add = |kind| {
            cuLinkAddData_v2(
                state,
                kind,
                data,
                bytes.len(),
                std::ptr::null(),
                0,
                none,
                no_opts,
            )
        };
        assert_eq!(
            cuLinkComplete(state, &mut image, &mut size),
            INVALID,
            "nothing to link"
        );
        assert_eq!(
            cuLinkAddData_v2(
                state,
                1,
                std::ptr::null_mut(),
                10,
                std::ptr::null(),
                0,
                none,
                no_opts
            ),
            INVALID
        );
        assert_eq!(add(0), CUresult::CUDA_ERROR_NOT_SUPPORTED, "a cubin");
        assert_eq!(add(99), INVALID, "an unknown type");
        ok(add(1));
        assert_eq!(
            add(1),
            CUresult::CUDA_ERROR_INVALID_SOURCE,
            "the same visible kernels again: multiple definition"
        );
        assert_eq!(
            cuLinkAddFile_v2(state, 1, c"/no/such/file.ptx".as_ptr(), 0, none, no_opts),
            CUresult::CUDA_ERROR_FILE_NOT_FOUND
        );
        ok(cuLinkComplete(state, &mut image, &mut size));
        assert_eq!(size, bytes.len());
        ok(cuLinkDestroy(state));
        assert_eq!(cuLinkDestroy(state), CUresult::CUDA_ERROR_INVALID_HANDLE);
        assert_eq!(
            cuLinkComplete(state, &mut image, &mut size),
            CUresult::CUDA_ERROR_INVALID_HANDLE
        );
    }
}

#[test]
fn launch_ex_pitch_pointer_and_pci_calls_refuse_what_they_cannot_do() {
    let _g = serial();
    fresh_primary();
    let (_m, f) = bump();
    let mut by = 1i32;
    let mut args: [*mut c_void; 1] = [(&raw mut by).cast()];
    let mut launch_with = |id: u32, value: [u32; 4]| {
        // SAFETY: all-zero is a valid CUlaunchAttribute; the raw id is written through its
        // integer representation (the test needs values outside the Rust enum).
        let mut attr: sys::CUlaunchAttribute = unsafe { std::mem::zeroed() };
        // SAFETY: `id` is the first field, a 4-byte C enum.
        unsafe { (&raw mut attr.id).cast::<u32>().write(id) };
        // SAFETY: the value union is at least 16 bytes.
        unsafe {
            (&raw mut attr.value)
                .cast::<[u32; 4]>()
                .write_unaligned(value)
        };
        let config = sys::CUlaunchConfig {
            gridDimX: 1,
            gridDimY: 1,
            gridDimZ: 1,
            blockDimX: 1,
            blockDimY: 1,
            blockDimZ: 1,
            sharedMemBytes: 0,
            hStream: std::ptr::null_mut(),
            attrs: &mut attr,
            numAttrs: 1,
        };
        // SAFETY: a valid config and one pointer for bump's one parameter.
        unsafe { cuLaunchKernelEx(&config, f, args.as_mut_ptr(), std::ptr::null_mut()) }
    };
    assert_eq!(
        launch_with(2, [1, 0, 0, 0]),
        CUresult::CUDA_ERROR_NOT_SUPPORTED,
        "cooperative"
    );
    assert_eq!(
        launch_with(4, [2, 1, 1, 0]),
        CUresult::CUDA_ERROR_NOT_SUPPORTED,
        "a 2-block cluster"
    );
    assert_eq!(launch_with(999, [0; 4]), INVALID, "an unknown attribute");
    assert_eq!(
        launch_with(8, [0; 4]),
        CUresult::CUDA_SUCCESS,
        "a priority hint"
    );
    // SAFETY: NULL config / valid out-pointers / deliberate bad strings.
    unsafe {
        assert_eq!(
            cuLaunchKernelEx(std::ptr::null(), f, args.as_mut_ptr(), std::ptr::null_mut()),
            INVALID
        );
        let (mut d, mut pitch) = (0u64, 0usize);
        assert_eq!(
            cuMemAllocPitch_v2(&mut d, &mut pitch, 100, 4, 3),
            INVALID,
            "element size 3"
        );
        assert_eq!(
            cuMemAllocPitch_v2(&mut d, &mut pitch, usize::MAX, 4, 4),
            INVALID,
            "a width that overflows"
        );
        // An address softcuda does not know: attributes are zeroed, not an error.
        let mut ctx: usize = 0xdead;
        let attr = [1u32];
        let mut data: [*mut c_void; 1] = [(&raw mut ctx).cast()];
        ok(cuPointerGetAttributes(
            1,
            attr.as_ptr(),
            data.as_mut_ptr(),
            0x10,
        ));
        assert_eq!(ctx, 0);
        let bad = [77u32];
        assert_eq!(
            cuPointerGetAttributes(1, bad.as_ptr(), data.as_mut_ptr(), 0x10),
            INVALID
        );
        let mut dev = -1;
        for id in [c"0000:07:00.0", c"0000:00:01.0", c"zz:00.0", c"0000"] {
            assert_ne!(
                cuDeviceGetByPCIBusId(&mut dev, id.as_ptr()),
                CUresult::CUDA_SUCCESS,
                "{id:?}"
            );
        }
        ok(cuDeviceGetByPCIBusId(&mut dev, c"00:00.0".as_ptr()));
        assert_eq!(dev, 0);
        assert_eq!(
            cuStreamAddCallback(std::ptr::null_mut(), None, std::ptr::null_mut(), 0),
            INVALID
        );
    }
}
