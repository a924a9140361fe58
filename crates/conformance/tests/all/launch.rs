//! Launch-configuration errors: an invalid grid, block or shared-memory size is refused with
//! CUDA_ERROR_INVALID_VALUE at launch and, unlike a fault inside a kernel, is not sticky — the
//! next valid launch in the same context runs.

use conformance::case::shape_1d;
use conformance::cases;
use conformance::context::Context;
use conformance::corpus::Flavour;
use conformance::driver::shared_device;
use conformance::memory::DeviceBuffer;
use conformance::module::Module;
use conformance::rng::fresh_seed;
use conformance::run::run_case;
use conformance::stream::{KernelArg, LaunchShape, Stream};
use cudarc::driver::sys::CUresult;

use crate::support::{Steps, clang_ptx, env_or_skip};

#[test]
fn invalid_launch_configurations_are_refused_and_not_sticky() {
    let _shared = shared_device();
    let Some(env) = env_or_skip() else { return };
    let ctx = Context::primary(env).expect("retain");
    let module = Module::load_ptx(&ctx, &clang_ptx("vector_add")).expect("load");
    let f = module.function("vector_add").expect("function");
    let buf = DeviceBuffer::alloc(&ctx, 4096).expect("alloc");
    let args = [
        KernelArg::Ptr(buf.ptr()),
        KernelArg::Ptr(buf.ptr()),
        KernelArg::Ptr(buf.ptr()),
        KernelArg::I32(1024),
    ];
    let stream = Stream::new(&ctx).expect("stream");
    let mut steps = Steps::default();
    let mut launch = |what: &str, shape: LaunchShape| {
        let code = match stream.launch(&f, shape, &args) {
            Ok(()) => CUresult::CUDA_SUCCESS,
            Err(e) => e
                .code()
                .unwrap_or_else(|| panic!("not a driver error: {e}")),
        };
        steps.expect(what, code, CUresult::CUDA_ERROR_INVALID_VALUE);
    };
    launch("1025 threads per block", shape_1d(1, 1025));
    launch("a zero-sized grid", shape_1d(0, 32));
    launch("a zero-sized block", shape_1d(1, 0));
    launch(
        "block.z above the 64 limit",
        LaunchShape {
            grid: [1, 1, 1],
            block: [1, 1, 65],
            shared_bytes: 0,
        },
    );
    launch(
        "1 MiB of dynamic shared memory",
        LaunchShape {
            grid: [1, 1, 1],
            block: [32, 1, 1],
            shared_bytes: 1 << 20,
        },
    );
    steps.expect(
        "the stream after refused launches",
        match stream.synchronize() {
            Ok(()) => CUresult::CUDA_SUCCESS,
            Err(e) => e.code().unwrap_or(CUresult::CUDA_ERROR_UNKNOWN),
        },
        CUresult::CUDA_SUCCESS,
    );
    let kc = cases::find("vector_add").expect("case");
    let after = run_case(&ctx, kc, Flavour::Clang, fresh_seed(), 0xff);
    steps.check(
        "a valid launch afterwards runs correctly",
        after.is_ok(),
        || format!("{after:?}"),
    );
    steps.finish(&env.choice.kind.to_string());
}
