//! Peer queries and several devices. A device is never its own peer; between two devices the
//! queries agree with each other, each device has its own primary context, and with peer access
//! enabled a kernel reads another device's memory. Runs in a child process with
//! `SOFTCUDA_DEVICES=2` (softcuda then presents two devices; NVIDIA's driver ignores it), so the
//! two-device part runs in CI; on a one-GPU machine only the one-device answers are checked.

use std::ffi::c_void;

use conformance::context::Context;
use conformance::driver::exclusive_device;
use conformance::memory::DeviceBuffer;
use conformance::module::Module;
use conformance::stream::{KernelArg, Stream};
use cudarc::driver::sys::{self, CUresult};
use testkit::in_child_with;

use crate::support::{Steps, clang_ptx, env_or_skip};

const ACCESS_SUPPORTED: sys::CUdevice_P2PAttribute =
    sys::CUdevice_P2PAttribute::CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED;

fn can_access(dev: i32, peer: i32) -> (CUresult, i32) {
    let mut v = -1;
    // SAFETY: valid out-pointer; ordinals are checked by the driver.
    let r = unsafe { sys::cuDeviceCanAccessPeer(&mut v, dev, peer) };
    (r, v)
}

fn p2p(dev: i32, peer: i32) -> (CUresult, i32) {
    let mut v = -1;
    // SAFETY: valid out-pointer; ordinals are checked by the driver.
    let r = unsafe { sys::cuDeviceGetP2PAttribute(&mut v, ACCESS_SUPPORTED, dev, peer) };
    (r, v)
}

#[test]
fn peer_queries_answer_for_one_device_or_several() {
    let _alone = exclusive_device();
    in_child_with(
        "peers::peer_queries_answer_for_one_device_or_several",
        |cmd| {
            cmd.env("SOFTCUDA_DEVICES", "2");
        },
        body,
    );
}

fn body() {
    let Some(env) = env_or_skip() else { return };
    let mut steps = Steps::default();
    let mut count = 0;
    // SAFETY: valid out-pointer.
    unsafe { sys::cuDeviceGetCount(&mut count) };
    let ctx0 = Context::primary(env).expect("retain device 0");
    for d in 0..count {
        steps.check(
            &format!("device {d} is not its own peer"),
            can_access(d, d) == (CUresult::CUDA_SUCCESS, 0),
            || format!("{:?}", can_access(d, d)),
        );
        steps.expect(
            &format!("P2P attribute of device {d} with itself"),
            p2p(d, d).0,
            CUresult::CUDA_ERROR_INVALID_DEVICE,
        );
    }
    // SAFETY: the retained primary context of device 0.
    let r = unsafe { sys::cuCtxEnablePeerAccess(ctx0.raw(), 0) };
    steps.expect_any(
        "peer access from a context to itself",
        r,
        &[
            CUresult::CUDA_ERROR_PEER_ACCESS_UNSUPPORTED,
            CUresult::CUDA_ERROR_INVALID_DEVICE,
            CUresult::CUDA_ERROR_INVALID_VALUE,
        ],
    );
    if count < 2 {
        println!("one device: the two-device checks need a second device");
        steps.finish(&env.choice.kind.to_string());
        return;
    }
    let (r, access) = can_access(0, 1);
    steps.expect("cuDeviceCanAccessPeer(0, 1)", r, CUresult::CUDA_SUCCESS);
    steps.check(
        "the P2P access attribute agrees with cuDeviceCanAccessPeer",
        p2p(0, 1) == (CUresult::CUDA_SUCCESS, access),
        || format!("{:?} vs {access}", p2p(0, 1)),
    );

    // Device 1's own primary context, and a buffer in it.
    let mut ctx1: sys::CUcontext = std::ptr::null_mut();
    let n = 1024usize;
    let ones: Vec<u8> = (0..n).flat_map(|_| 1.0f32.to_le_bytes()).collect();
    let mut remote: sys::CUdeviceptr = 0;
    let mut dev_of_ctx1 = -1;
    // SAFETY: valid out-pointers; the context is retained before use and `ones` holds n floats.
    unsafe {
        steps.expect(
            "retain device 1's primary context",
            sys::cuDevicePrimaryCtxRetain(&mut ctx1, 1),
            CUresult::CUDA_SUCCESS,
        );
        steps.check("a primary context per device", ctx1 != ctx0.raw(), || {
            format!("{ctx1:?}")
        });
        sys::cuCtxSetCurrent(ctx1);
        sys::cuCtxGetDevice(&mut dev_of_ctx1);
        steps.expect(
            "cuMemAlloc on device 1",
            sys::cuMemAlloc_v2(&mut remote, n * 4),
            CUresult::CUDA_SUCCESS,
        );
        steps.expect(
            "cuMemcpyHtoD on device 1",
            sys::cuMemcpyHtoD_v2(remote, ones.as_ptr().cast::<c_void>(), n * 4),
            CUresult::CUDA_SUCCESS,
        );
    }
    steps.check(
        "device 1's context is on device 1",
        dev_of_ctx1 == 1,
        || format!("{dev_of_ctx1}"),
    );
    if access == 1 {
        ctx0.bind().expect("bind device 0");
        // SAFETY: two live contexts.
        unsafe {
            steps.expect(
                "cuCtxEnablePeerAccess(0 → 1)",
                sys::cuCtxEnablePeerAccess(ctx1, 0),
                CUresult::CUDA_SUCCESS,
            );
            steps.expect(
                "enabled twice",
                sys::cuCtxEnablePeerAccess(ctx1, 0),
                CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED,
            );
        }
        // vector_add on device 0 with both inputs in device 1's memory.
        let module = Module::load_ptx(&ctx0, &clang_ptx("vector_add")).expect("load");
        let add = module.function("vector_add").expect("vector_add");
        let out = DeviceBuffer::alloc(&ctx0, n * 4).expect("alloc");
        let stream = Stream::new(&ctx0).expect("stream");
        let args = [
            KernelArg::Ptr(remote),
            KernelArg::Ptr(remote),
            KernelArg::Ptr(out.ptr()),
            KernelArg::I32(n as i32),
        ];
        stream
            .launch(
                &add,
                conformance::case::shape_1d((n / 256) as u32, 256),
                &args,
            )
            .expect("launch");
        steps.check(
            "a kernel on device 0 reads device 1's memory",
            stream.synchronize().is_ok(),
            || "the launch faulted".into(),
        );
        let sums: Vec<u8> = out.to_vec().expect("read");
        steps.check(
            "1 + 1 = 2 everywhere",
            sums.chunks_exact(4)
                .all(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]) == 2.0),
            || "wrong sums".into(),
        );
        // SAFETY: two live contexts.
        unsafe {
            steps.expect(
                "cuCtxDisablePeerAccess",
                sys::cuCtxDisablePeerAccess(ctx1),
                CUresult::CUDA_SUCCESS,
            );
            steps.expect(
                "disabled twice",
                sys::cuCtxDisablePeerAccess(ctx1),
                CUresult::CUDA_ERROR_PEER_ACCESS_NOT_ENABLED,
            );
        }
    }
    // SAFETY: the buffer and retain taken above, released once.
    unsafe {
        sys::cuCtxSetCurrent(ctx1);
        sys::cuMemFree_v2(remote);
        sys::cuDevicePrimaryCtxRelease_v2(1);
    }
    steps.finish(&env.choice.kind.to_string());
}
