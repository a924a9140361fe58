//! A kernel touching memory outside every allocation fails with CUDA_ERROR_ILLEGAL_ADDRESS, and
//! the error poisons the device for the whole process: later calls fail too, and after a
//! primary-context reset cuDevicePrimaryCtxRetain still returns it (seen on an H200, driver 580;
//! NVIDIA documents that the process must be terminated and relaunched). So the test runs in a
//! child process, and the rest of this binary keeps a healthy device.

use conformance::case::shape_1d;
use conformance::cases;
use conformance::context::Context;
use conformance::corpus::Flavour;
use conformance::driver::exclusive_device;
use conformance::memory::DeviceBuffer;
use conformance::module::Module;
use conformance::rng::fresh_seed;
use conformance::run::run_case;
use conformance::stream::{KernelArg, Stream};
use cudarc::driver::sys::{self, CUresult};

use crate::support::{Steps, clang_ptx, code, env_or_skip, in_child};

/// Where the faulting store lands: near address zero, like a null-pointer dereference. No
/// allocation lives there on either driver, and no host mapping either (Linux never maps the
/// first 64 KiB), so even a GPU that can reach host memory (HMM) must fault.
const FAULT_ADDRESS: u64 = 0x100;

/// The index that makes `p + 4 * index` (64-bit wrap-around, as in the kernel) hit `FAULT_ADDRESS`.
fn fault_index(p: u64) -> u64 {
    FAULT_ADDRESS.wrapping_sub(p) / 4
}

#[test]
fn out_of_bounds_store_poisons_the_device_for_the_process() {
    in_child(
        "sticky::out_of_bounds_store_poisons_the_device_for_the_process",
        poison_the_device,
    );
}

fn poison_the_device() {
    let _exclusive = exclusive_device();
    let Some(env) = env_or_skip() else { return };
    let mut steps = Steps::default();
    // A kernel runs correctly before the fault (so the failures below are the fault's).
    {
        let ctx = Context::primary(env).expect("retain");
        let kc = cases::find("oob_write_in_range").expect("case");
        let run = run_case(&ctx, kc, Flavour::Clang, fresh_seed(), 0xff);
        steps.check(
            "a kernel runs correctly before the fault",
            run.is_ok(),
            || format!("{run:?}"),
        );
    }
    {
        let ctx = Context::primary(env).expect("retain");
        let module = Module::load_ptx(&ctx, &clang_ptx("oob_write")).expect("load oob_write");
        let f = module.function("oob_write").expect("oob_write");
        let buf = DeviceBuffer::alloc(&ctx, 4096).expect("alloc");
        let stream = Stream::legacy_default(&ctx);

        let launched = code(stream.launch(
            &f,
            shape_1d(1, 32),
            &[
                KernelArg::Ptr(buf.ptr()),
                KernelArg::U64(fault_index(buf.ptr())),
            ],
        ));
        steps.check(
            "cuLaunchKernel of the faulting kernel returns SUCCESS or the fault",
            launched == CUresult::CUDA_SUCCESS || launched == CUresult::CUDA_ERROR_ILLEGAL_ADDRESS,
            || format!("got {launched:?}"),
        );
        steps.expect(
            "cuCtxSynchronize after the fault",
            code(ctx.synchronize()),
            CUresult::CUDA_ERROR_ILLEGAL_ADDRESS,
        );
        steps.expect(
            "cuCtxSynchronize again (sticky)",
            code(ctx.synchronize()),
            CUresult::CUDA_ERROR_ILLEGAL_ADDRESS,
        );
        let alloc = DeviceBuffer::alloc(&ctx, 1024).map(drop);
        steps.expect(
            "cuMemAlloc after the fault (sticky)",
            code(alloc),
            CUresult::CUDA_ERROR_ILLEGAL_ADDRESS,
        );
        let relaunch = code(stream.launch(
            &f,
            shape_1d(1, 32),
            &[KernelArg::Ptr(buf.ptr()), KernelArg::U64(0)],
        ));
        let relaunch = if relaunch == CUresult::CUDA_SUCCESS {
            code(ctx.synchronize())
        } else {
            relaunch
        };
        steps.expect(
            "a good launch after the fault (sticky)",
            relaunch,
            CUresult::CUDA_ERROR_ILLEGAL_ADDRESS,
        );
        // Dropping buf/module/f here calls the driver in a poisoned context: those calls fail
        // with the fault and are recorded (not panics); the process's exit reclaims everything.
    }
    // SAFETY: the device handle came from cuDeviceGet; this process holds the exclusive lock.
    let reset = unsafe { sys::cuDevicePrimaryCtxReset_v2(env.device) };
    steps.expect("cuDevicePrimaryCtxReset", reset, CUresult::CUDA_SUCCESS);
    let retained = Context::primary(env).map(drop);
    steps.expect(
        "cuDevicePrimaryCtxRetain after the reset (the device stays poisoned)",
        code(retained),
        CUresult::CUDA_ERROR_ILLEGAL_ADDRESS,
    );
    steps.finish(&env.choice.kind.to_string());
}
