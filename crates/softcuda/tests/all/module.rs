//! Modules, functions and launches: PTX loading and its error log, globals, parameter packing
//! (both `kernelParams` and `extra`), launch-configuration checks, sticky faults (in a child
//! process each: a fault poisons the device for the process) and stale
//! handles.

use std::ffi::{CStr, CString, c_char, c_int, c_uint, c_void};

use cudarc::driver::sys::{CUdeviceptr, CUfunction, CUmodule, CUresult, CUstream};
use softcuda::exports::*;

use crate::common::{alloc, download, fresh_primary, in_child, ok, serial, upload};

/// The test kernels (tests/fixtures/kernels.cu, compiled by gen.sh).
fn kernels_ptx() -> CString {
    CString::new(include_str!("../fixtures/kernels.ptx")).unwrap()
}

fn load(ptx: &CStr) -> CUmodule {
    let mut m: CUmodule = std::ptr::null_mut();
    // SAFETY: NUL-terminated PTX and a valid out-pointer.
    ok(unsafe { cuModuleLoadData(&mut m, ptx.as_ptr().cast()) });
    m
}

fn function(m: CUmodule, name: &CStr) -> CUfunction {
    let mut f: CUfunction = std::ptr::null_mut();
    // SAFETY: valid module and out-pointer.
    ok(unsafe { cuModuleGetFunction(&mut f, m, name.as_ptr()) });
    f
}

/// cuLaunchKernel with `kernelParams` built from pointers to each argument.
fn launch(f: CUfunction, grid: u32, block: u32, shared: u32, args: &mut [*mut c_void]) -> CUresult {
    let s: CUstream = std::ptr::null_mut();
    // SAFETY: `args` holds one pointer per kernel parameter, each to a value of its size.
    unsafe {
        cuLaunchKernel(
            f,
            grid,
            1,
            1,
            block,
            1,
            1,
            shared,
            s,
            args.as_mut_ptr(),
            std::ptr::null_mut(),
        )
    }
}

fn arg<T>(v: &mut T) -> *mut c_void {
    (v as *mut T).cast()
}

#[test]
fn vector_add_runs_through_kernel_params() {
    let _g = serial();
    fresh_primary();
    let m = load(&kernels_ptx());
    let f = function(m, c"vector_add");
    let n = 1000usize;
    let (a, b, c) = (alloc(n * 4), alloc(n * 4), alloc(n * 4));
    let xs: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let ys: Vec<f32> = (0..n).map(|i| 2.0 * i as f32).collect();
    upload(a, &xs);
    upload(b, &ys);
    let (mut pa, mut pb, mut pc, mut pn) = (a, b, c, n as c_int);
    ok(launch(
        f,
        8,
        128,
        0,
        &mut [arg(&mut pa), arg(&mut pb), arg(&mut pc), arg(&mut pn)],
    ));
    // SAFETY: plain call.
    ok(unsafe { cuCtxSynchronize() });
    let out = download::<f32>(c, n);
    assert!(out.iter().enumerate().all(|(i, &v)| v == 3.0 * i as f32));
    // SAFETY: valid module.
    ok(unsafe { cuModuleUnload(m) });
}

#[test]
fn extra_buffer_form_packs_at_param_offsets() {
    let _g = serial();
    fresh_primary();
    let m = load(&kernels_ptx());
    let f = function(m, c"mixed");
    let out = alloc(8);
    let mut offsets = Vec::new();
    for i in 0..4 {
        let (mut off, mut size) = (0usize, 0usize);
        // SAFETY: valid function and out-pointers.
        ok(unsafe { cuFuncGetParamInfo(f, i, &mut off, &mut size) });
        offsets.push((off, size));
    }
    // SAFETY: index past the last parameter.
    let r = unsafe { cuFuncGetParamInfo(f, 4, std::ptr::null_mut(), std::ptr::null_mut()) };
    assert_eq!(r, CUresult::CUDA_ERROR_INVALID_VALUE);
    assert_eq!(
        offsets.iter().map(|p| p.1).collect::<Vec<_>>(),
        [8, 1, 8, 2]
    );
    let total = offsets.last().map(|&(o, s)| o + s).unwrap();
    let mut buf = vec![0u8; total];
    buf[offsets[0].0..][..8].copy_from_slice(&out.to_le_bytes());
    buf[offsets[1].0] = (-3i8) as u8;
    buf[offsets[2].0..][..8].copy_from_slice(&1_000_000_000_000i64.to_le_bytes());
    buf[offsets[3].0..][..2].copy_from_slice(&(-7i16).to_le_bytes());
    let mut size = buf.len();
    let mut extra = [
        std::ptr::without_provenance_mut::<c_void>(1),
        buf.as_mut_ptr().cast(),
        std::ptr::without_provenance_mut(2),
        (&raw mut size).cast(),
        std::ptr::null_mut(),
    ];
    // SAFETY: `extra` is END-terminated and the buffer holds `size` bytes.
    unsafe {
        ok(cuLaunchKernel(
            f,
            1,
            1,
            1,
            1,
            1,
            1,
            0,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            extra.as_mut_ptr(),
        ));
        ok(cuCtxSynchronize());
    }
    assert_eq!(download::<i64>(out, 1), [1_000_000_000_000 - 3 - 7]);
}

#[test]
fn module_globals_are_allocated_initialised_and_visible_to_kernels() {
    let _g = serial();
    fresh_primary();
    let m = load(&kernels_ptx());
    let (mut addr, mut size): (CUdeviceptr, usize) = (0, 0);
    // SAFETY: valid module, name and out-pointers.
    unsafe {
        ok(cuModuleGetGlobal_v2(
            &mut addr,
            &mut size,
            m,
            c"counter".as_ptr(),
        ));
        assert_eq!(size, 4);
        assert_eq!(download::<i32>(addr, 1), [5]);
        assert_eq!(
            cuModuleGetGlobal_v2(&mut addr, &mut size, m, c"nope".as_ptr()),
            CUresult::CUDA_ERROR_NOT_FOUND
        );
    }
    let f = function(m, c"bump");
    let mut by: c_int = 2;
    ok(launch(f, 2, 64, 0, &mut [arg(&mut by)]));
    // SAFETY: plain call.
    ok(unsafe { cuCtxSynchronize() });
    assert_eq!(download::<i32>(addr, 1), [5 + 2 * 128]);
}

#[test]
fn dynamic_shared_memory_is_per_block_and_limited_like_nvidia() {
    let _g = serial();
    fresh_primary();
    let m = load(&kernels_ptx());
    let f = function(m, c"reverse_block");
    let d = alloc(4 * 256);
    upload(d, &(0..256).collect::<Vec<i32>>());
    let mut pd = d;
    ok(launch(f, 4, 64, 64 * 4, &mut [arg(&mut pd)]));
    // SAFETY: plain call.
    ok(unsafe { cuCtxSynchronize() });
    let out = download::<i32>(d, 256);
    assert_eq!(&out[..3], &[63, 62, 61]);
    assert_eq!(&out[64..67], &[127, 126, 125]);
    // Over 48 KiB needs the opt-in attribute first.
    assert_eq!(
        launch(f, 1, 64, 64 * 1024, &mut [arg(&mut pd)]),
        CUresult::CUDA_ERROR_INVALID_VALUE
    );
    let mut v = 0;
    // SAFETY: valid function and out-pointer.
    unsafe {
        ok(cuFuncSetAttribute(f, 8, 100 * 1024));
        ok(cuFuncGetAttribute(&mut v, 8, f));
        assert_eq!(v, 100 * 1024);
        assert_eq!(
            cuFuncSetAttribute(f, 8, 228 * 1024),
            CUresult::CUDA_ERROR_INVALID_VALUE
        );
    }
    ok(launch(f, 1, 64, 64 * 1024, &mut [arg(&mut pd)]));
    // SAFETY: plain call.
    ok(unsafe { cuCtxSynchronize() });
}

#[test]
fn launch_configuration_beyond_device_limits_is_invalid_value_and_not_sticky() {
    let _g = serial();
    fresh_primary();
    let m = load(&kernels_ptx());
    let f = function(m, c"bump");
    let mut by: c_int = 1;
    let mut args = [arg(&mut by)];
    let s: CUstream = std::ptr::null_mut();
    // SAFETY: one argument pointer per parameter.
    unsafe {
        let p = args.as_mut_ptr();
        let null = std::ptr::null_mut();
        assert_eq!(
            cuLaunchKernel(f, 1, 1, 1, 1025, 1, 1, 0, s, p, null),
            CUresult::CUDA_ERROR_INVALID_VALUE
        );
        assert_eq!(
            cuLaunchKernel(f, 1, 1, 1, 1, 1, 65, 0, s, p, null),
            CUresult::CUDA_ERROR_INVALID_VALUE
        );
        assert_eq!(
            cuLaunchKernel(f, 1, 65536, 1, 1, 1, 1, 0, s, p, null),
            CUresult::CUDA_ERROR_INVALID_VALUE
        );
        assert_eq!(
            cuLaunchKernel(f, 0, 1, 1, 1, 1, 1, 0, s, p, null),
            CUresult::CUDA_ERROR_INVALID_VALUE
        );
        assert_eq!(
            cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, null, null),
            CUresult::CUDA_ERROR_INVALID_VALUE
        );
        ok(cuLaunchKernel(f, 1, 1, 1, 32, 32, 1, 0, s, p, null));
        ok(cuCtxSynchronize());
    }
}

#[test]
fn illegal_address_poisons_the_device_for_the_process() {
    // The fault lasts for the process, so it happens in a child.
    in_child(
        "module::illegal_address_poisons_the_device_for_the_process",
        |_| {},
        illegal_address_poisons_the_device,
    );
}

fn illegal_address_poisons_the_device() {
    fresh_primary();
    let m = load(&kernels_ptx());
    let f = function(m, c"poke");
    let d = alloc(64);
    let (mut pd, mut off, mut val): (CUdeviceptr, i64, c_int) = (d, 1 << 40, 1);
    ok(launch(
        f,
        1,
        32,
        0,
        &mut [arg(&mut pd), arg(&mut off), arg(&mut val)],
    ));
    let illegal = CUresult::CUDA_ERROR_ILLEGAL_ADDRESS;
    // SAFETY: valid out-pointers and buffers throughout.
    unsafe {
        assert_eq!(cuCtxSynchronize(), illegal);
        let mut d2: CUdeviceptr = 0;
        assert_eq!(cuMemAlloc_v2(&mut d2, 16), illegal);
        let mut host = [0u8; 4];
        assert_eq!(cuMemcpyDtoH_v2(host.as_mut_ptr().cast(), d, 4), illegal);
        assert_eq!(cuCtxSynchronize(), illegal);
        let mut g: CUfunction = std::ptr::null_mut();
        assert_eq!(cuModuleGetFunction(&mut g, m, c"poke".as_ptr()), illegal);
        assert_eq!(cuMemFree_v2(d), illegal);
        assert_eq!(cuModuleUnload(m), illegal);
        let fault = || {
            let mut msg = [0 as c_char; 512];
            ok(softcuda_last_fault(msg.as_mut_ptr(), 512));
            CStr::from_ptr(msg.as_ptr()).to_string_lossy().into_owned()
        };
        let msg = fault();
        assert!(
            msg.contains("poke") && msg.contains("illegal address"),
            "{msg}"
        );
        // As on NVIDIA's driver, a reset does not recover: the device stays faulted.
        ok(cuDevicePrimaryCtxReset_v2(0));
        let mut ctx = std::ptr::null_mut();
        assert_eq!(cuDevicePrimaryCtxRetain(&mut ctx, 0), illegal);
        assert_eq!(cuCtxCreate_v2(&mut ctx, 0, 0), illegal);
        assert_eq!(fault(), msg, "the fault is still described after the reset");
        let (mut flags, mut active) = (0, 0);
        ok(cuDevicePrimaryCtxGetState(0, &mut flags, &mut active));
        assert_eq!(active, 0, "a failed retain creates no context");
    }
}

/// cuModuleLoadDataEx with an error-log buffer of `log_len` bytes (JIT options 5 and 6): the
/// result, the log text, and the size the driver wrote back into the size slot.
fn load_with_error_log(ptx: &CStr, log_len: usize) -> (CUresult, String, usize) {
    let mut log = vec![0u8; log_len];
    let mut opts: [c_uint; 2] = [5, 6];
    let mut vals = [
        log.as_mut_ptr().cast::<c_void>(),
        std::ptr::without_provenance_mut(log.len()),
    ];
    let mut m: CUmodule = std::ptr::null_mut();
    // SAFETY: two options with matching values; the log buffer is `log_len` bytes.
    let r = unsafe {
        cuModuleLoadDataEx(
            &mut m,
            ptx.as_ptr().cast(),
            2,
            opts.as_mut_ptr(),
            vals.as_mut_ptr(),
        )
    };
    let text = CStr::from_bytes_until_nul(&log).unwrap().to_str().unwrap();
    (r, text.to_owned(), vals[1].addr())
}

#[test]
fn bad_ptx_fills_the_jit_error_log_with_line_and_column() {
    let _g = serial();
    fresh_primary();
    let bad = c".version 7.0\n.target sm_80\n.address_size 64\n.visible .entry k( { ret; }\n";
    let (r, text, reported) = load_with_error_log(bad, 1024);
    assert_eq!(r, CUresult::CUDA_ERROR_INVALID_PTX);
    assert!(text.contains("4:"), "log should name line 4: {text}");
    assert_eq!(
        reported,
        text.len() + 1,
        "size slot reports the bytes written"
    );
}

#[test]
fn cubin_image_is_no_binary_for_gpu() {
    let _g = serial();
    fresh_primary();
    let elf = [0x7fu8, b'E', b'L', b'F', 2, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    let mut m: CUmodule = std::ptr::null_mut();
    // SAFETY: a 16-byte image and a valid out-pointer.
    let r = unsafe { cuModuleLoadData(&mut m, elf.as_ptr().cast()) };
    assert_eq!(r, CUresult::CUDA_ERROR_NO_BINARY_FOR_GPU);
}

#[test]
fn stale_module_and_function_handles_are_invalid_handle() {
    let _g = serial();
    fresh_primary();
    let m = load(&kernels_ptx());
    let f = function(m, c"bump");
    assert_eq!(
        function(m, c"bump"),
        f,
        "the same kernel gives the same handle"
    );
    let mut g: CUfunction = std::ptr::null_mut();
    // SAFETY: valid out-pointers; stale handles are only passed, never dereferenced.
    unsafe {
        assert_eq!(
            cuModuleGetFunction(&mut g, m, c"missing".as_ptr()),
            CUresult::CUDA_ERROR_NOT_FOUND
        );
        ok(cuDevicePrimaryCtxReset_v2(0));
        let mut ctx = std::ptr::null_mut();
        ok(cuDevicePrimaryCtxRetain(&mut ctx, 0));
        ok(cuCtxSetCurrent(ctx));
        let m2 = load(&kernels_ptx());
        assert_eq!(
            cuModuleGetFunction(&mut g, m, c"bump".as_ptr()),
            CUresult::CUDA_ERROR_INVALID_HANDLE
        );
        let mut by: c_int = 1;
        assert_eq!(
            launch(f, 1, 1, 0, &mut [arg(&mut by)]),
            CUresult::CUDA_ERROR_INVALID_HANDLE
        );
        ok(cuModuleUnload(m2));
        assert_eq!(cuModuleUnload(m2), CUresult::CUDA_ERROR_INVALID_HANDLE);
    }
}

#[test]
fn function_attributes_describe_the_kernel() {
    let _g = serial();
    fresh_primary();
    let m = load(&kernels_ptx());
    let f = function(m, c"vector_add");
    let get = |a: u32| {
        let mut v = -1;
        // SAFETY: valid function and out-pointer.
        ok(unsafe { cuFuncGetAttribute(&mut v, a, f) });
        v
    };
    assert_eq!(get(0), 1024);
    assert_eq!(get(1), 0, "no static shared memory");
    assert!(get(4) > 0, "registers");
    let mut v = 0;
    // SAFETY: valid function and out-pointer.
    unsafe {
        assert_eq!(
            cuFuncGetAttribute(&mut v, 99, f),
            CUresult::CUDA_ERROR_INVALID_VALUE
        );
        ok(cuOccupancyMaxActiveBlocksPerMultiprocessor(
            &mut v, f, 256, 0,
        ));
    }
    assert!((1..=8).contains(&v), "{v} blocks of 256 threads per SM");
}

#[test]
fn unimplemented_driver_features_answer_not_supported() {
    let _g = serial();
    fresh_primary();
    // SAFETY: unsupported exports ignore their arguments.
    unsafe {
        let mut mem = std::ptr::null_mut();
        assert_eq!(
            cuImportExternalMemory(&mut mem, std::ptr::null()),
            CUresult::CUDA_ERROR_NOT_SUPPORTED
        );
        // A NULL executable graph is an invalid value, not an unsupported feature.
        let r = cuGraphLaunch(std::ptr::null_mut(), std::ptr::null_mut());
        assert_eq!(r, CUresult::CUDA_ERROR_INVALID_VALUE);
    }
}

#[test]
fn concurrent_threads_launching_on_their_own_streams_all_finish_correctly() {
    let _g = serial();
    let ctx = fresh_primary();
    let m = load(&kernels_ptx());
    let f = function(m, c"vector_add") as usize;
    let ctx = ctx as usize;
    let workers: Vec<_> = (0..4)
        .map(|t| {
            std::thread::spawn(move || {
                // SAFETY: `ctx` is the live primary context, shared by value across threads.
                ok(unsafe { cuCtxSetCurrent(ctx as _) });
                let s = crate::common::stream(if t % 2 == 0 { 0 } else { 1 });
                let n = 512usize;
                let (a, c) = (alloc(n * 4), alloc(n * 4));
                let xs: Vec<f32> = (0..n).map(|i| (i + t) as f32).collect();
                let mut out = vec![0f32; n];
                for round in 0..10 {
                    let (mut pa, mut pb, mut pc, mut pn) = (a, a, c, n as c_int);
                    let mut args = [arg(&mut pa), arg(&mut pb), arg(&mut pc), arg(&mut pn)];
                    // SAFETY: valid ranges, one argument pointer per parameter, and `out` is
                    // filled before cuMemcpyDtoHAsync returns (pageable destination).
                    unsafe {
                        ok(cuMemcpyHtoDAsync_v2(a, xs.as_ptr().cast(), n * 4, s));
                        ok(cuLaunchKernel(
                            f as _,
                            2,
                            1,
                            1,
                            256,
                            1,
                            1,
                            0,
                            s,
                            args.as_mut_ptr(),
                            std::ptr::null_mut(),
                        ));
                        ok(cuMemcpyDtoHAsync_v2(out.as_mut_ptr().cast(), c, n * 4, s));
                    }
                    assert!(
                        out.iter()
                            .enumerate()
                            .all(|(i, &v)| v == 2.0 * (i + t) as f32),
                        "thread {t} round {round}"
                    );
                }
                // SAFETY: valid stream handle.
                ok(unsafe { cuStreamDestroy_v2(s) });
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    // SAFETY: plain call.
    ok(unsafe { cuCtxSynchronize() });
}

#[test]
fn misaligned_access_faults_with_nvidia_code() {
    in_child(
        "module::misaligned_access_faults_with_nvidia_code",
        |_| {},
        || {
            fresh_primary();
            let m = load(&kernels_ptx());
            let f = function(m, c"poke");
            let d = alloc(64);
            let (mut pd, mut off, mut val): (CUdeviceptr, i64, c_int) = (d + 1, 0, 1);
            ok(launch(
                f,
                1,
                1,
                0,
                &mut [arg(&mut pd), arg(&mut off), arg(&mut val)],
            ));
            // SAFETY: plain call.
            let r = unsafe { cuCtxSynchronize() };
            assert_eq!(r, CUresult::CUDA_ERROR_MISALIGNED_ADDRESS);
        },
    );
}

#[test]
fn trap_faults_with_nvidia_code() {
    in_child(
        "module::trap_faults_with_nvidia_code",
        |_| {},
        || {
            fresh_primary();
            let trap =
            c".version 7.0\n.target sm_80\n.address_size 64\n.visible .entry t() { trap; ret; }\n";
            let m = load(trap);
            let f = function(m, c"t");
            ok(launch(f, 1, 1, 0, &mut []));
            // SAFETY: plain call.
            let r = unsafe { cuCtxSynchronize() };
            assert_eq!(r, CUresult::CUDA_ERROR_ILLEGAL_INSTRUCTION);
        },
    );
}

#[test]
fn ptx_that_ptxvm_cannot_run_is_not_supported_with_a_log() {
    let _g = serial();
    fresh_primary();
    let ptx = c".version 7.0\n.target sm_80\n.address_size 64\n.extern .global .align 4 .u32 ext;\n.visible .entry k() { ret; }\n";
    let (r, text, _) = load_with_error_log(ptx, 512);
    assert_eq!(r, CUresult::CUDA_ERROR_NOT_SUPPORTED);
    assert!(text.contains("unsupported"), "{text}");
}

#[test]
fn the_watchdog_stops_a_runaway_kernel_with_launch_timeout() {
    // SOFTCUDA_WATCHDOG_MS is read once per process, so the runaway runs in a child.
    in_child(
        "module::the_watchdog_stops_a_runaway_kernel_with_launch_timeout",
        |cmd| {
            cmd.env("SOFTCUDA_WATCHDOG_MS", "200");
        },
        || {
            fresh_primary();
            let ptx = c".version 7.0\n.target sm_80\n.address_size 64\n\
                .visible .entry spin(.param .u64 p)\n{\n .reg .b64 %rd<2>;\n .reg .b32 %r<2>;\n\
                ld.param.u64 %rd1, [p];\n cvta.to.global.u64 %rd1, %rd1;\n mov.u32 %r1, 0;\n\
                $L: add.u32 %r1, %r1, 1;\n st.global.u32 [%rd1], %r1;\n bra.uni $L;\n}\n";
            let m = load(ptx);
            let f = function(m, c"spin");
            let mut d = alloc(16);
            ok(launch(f, 2, 32, 0, &mut [arg(&mut d)]));
            // SAFETY: plain calls with valid out-pointers.
            unsafe {
                assert_eq!(cuCtxSynchronize(), CUresult::CUDA_ERROR_LAUNCH_TIMEOUT);
                let mut msg = [0 as c_char; 512];
                ok(softcuda_last_fault(msg.as_mut_ptr(), 512));
                let msg = CStr::from_ptr(msg.as_ptr()).to_string_lossy().into_owned();
                assert!(msg.contains("spin") && msg.contains("watchdog"), "{msg}");
            }
        },
    );
}
