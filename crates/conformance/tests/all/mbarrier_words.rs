//! What a driver does with `mbarrier` operations on shared words that hold no barrier: the
//! question the sandbox had to answer before it could let a guest use `mbarrier`. A fence can
//! keep a guest's barrier addresses inside its own shared memory, but not make the words there
//! barriers, so the sandbox would need arrivals, waits and invalidations on arbitrary words to
//! be harmless to the context. They are not: on the H100 (session 37, driver 580.159.04) a
//! kernel whose threads run them on words of garbage (zeros, all ones, counters, patterns)
//! ends with `CUDA_ERROR_LAUNCH_FAILED`, and the context is lost for the process, as after any
//! fault. ptxvm faults the same way (`FaultKind::NotABarrier`), which this test holds on every
//! driver, in a child process. An arrival past a real barrier's pending count loses the context
//! too (the H100 reported it at the next call, not the launch's synchronize; ptxvm:
//! `FaultKind::BarrierOverArrival`). So the sandbox never runs a guest's `mbarrier` as the
//! hardware's: it runs software barriers on the guest's words (ptxvm's sandbox/mbarrier.rs), and
//! mbarrier_sandboxed.rs runs this kernel rewritten, which must neither fault nor lose the
//! context.

use conformance::case::shape_1d;
use conformance::context::Context;
use conformance::driver::exclusive_device;
use conformance::memory::DeviceBuffer;
use conformance::module::{Function, Module};
use conformance::stream::{KernelArg, LaunchShape, Stream};
use cudarc::driver::sys::CUresult;

use crate::support::{Steps, code, env_or_skip, in_child};

/// Each of 128 threads fills its shared word with a pattern of its index, then arrives on it,
/// tests and tries to wait on it by state and by parity (a bounded number of times), arrives
/// with `.noComplete` and `arrive_drop`, invalidates it, and records what the waits said.
pub(crate) const KERNEL: &str = r#"
.version 8.0
.target sm_90
.address_size 64
.visible .entry garbage(.param .u64 out)
{
	.shared .align 8 .b64 words[128];
	.reg .pred %p<4>;
	.reg .b32 %r<8>;
	.reg .b64 %rd<8>;
	.reg .b64 %st;
	ld.param.u64 %rd1, [out];
	mov.u32 %r1, %tid.x;
	// The pattern: 0, all ones, the index, or the index in every byte, by tid % 4.
	cvt.u64.u32 %rd2, %r1;
	and.b32 %r2, %r1, 3;
	setp.eq.u32 %p0, %r2, 0;
	selp.b64 %rd3, 0, -1, %p0;
	setp.eq.u32 %p0, %r2, 2;
	selp.b64 %rd3, %rd2, %rd3, %p0;
	mul.lo.u64 %rd4, %rd2, 72340172838076673;
	setp.eq.u32 %p0, %r2, 3;
	selp.b64 %rd3, %rd4, %rd3, %p0;
	mov.u64 %rd5, words;
	mul.wide.u32 %rd6, %r1, 8;
	add.u64 %rd5, %rd5, %rd6;
	st.shared.u64 [%rd5], %rd3;
	bar.sync 0;
	mbarrier.arrive.shared.b64 %st, [%rd5];
	mbarrier.test_wait.shared.b64 %p1, [%rd5], %st;
	mov.u32 %r3, 0;
	mov.u32 %r4, 0;
TRY:
	mbarrier.try_wait.parity.shared.b64 %p2, [%rd5], %r3;
	@%p2 bra TRIED;
	add.u32 %r4, %r4, 1;
	setp.lt.u32 %p3, %r4, 16;
	@%p3 bra TRY;
TRIED:
	mbarrier.arrive.noComplete.shared.b64 %st, [%rd5], 1;
	mbarrier.arrive_drop.shared.b64 %st, [%rd5];
	mbarrier.inval.shared.b64 [%rd5];
	selp.u32 %r5, 1, 0, %p1;
	selp.u32 %r6, 2, 0, %p2;
	or.b32 %r5, %r5, %r6;
	mul.wide.u32 %rd6, %r1, 4;
	add.u64 %rd7, %rd1, %rd6;
	st.global.u32 [%rd7], %r5;
	ret;
}
"#;

#[test]
fn mbarrier_operations_on_shared_words_that_hold_no_barrier_fault_and_lose_the_context() {
    in_child(
        "mbarrier_words::mbarrier_operations_on_shared_words_that_hold_no_barrier_fault_and_lose_the_context",
        garbage_words,
    );
}

/// The code of launching `f` and waiting for it: the launch's, if it fails.
fn launch_and_wait(
    stream: &Stream,
    f: &Function,
    shape: LaunchShape,
    args: &[KernelArg],
) -> CUresult {
    code(
        stream
            .launch(f, shape, args)
            .and_then(|()| stream.synchronize()),
    )
}

fn garbage_words() {
    let _exclusive = exclusive_device();
    let Some(env) = env_or_skip() else { return };
    let mut steps = Steps::default();
    let ctx = Context::primary(env).expect("retain the primary context");
    let stream = Stream::new(&ctx).expect("a stream");
    let module = Module::load_ptx(&ctx, KERNEL).expect("the kernel loads");
    let f = module.function("garbage").expect("its function");
    let out = DeviceBuffer::alloc(&ctx, 128 * 4).expect("an output buffer");
    let shape = shape_1d(1, 128);
    let lost = CUresult::CUDA_ERROR_LAUNCH_FAILED;
    let launched = code(stream.launch(&f, shape, &[KernelArg::Ptr(out.ptr())]));
    steps.check(
        "cuLaunchKernel returns SUCCESS or the fault",
        launched == CUresult::CUDA_SUCCESS || launched == lost,
        || format!("got {launched:?}"),
    );
    steps.expect(
        "the launch ends in a fault",
        code(stream.synchronize()),
        lost,
    );
    let mut bytes = vec![0u8; 128 * 4];
    steps.expect(
        "its output does not read back",
        code(out.read(&mut bytes)),
        lost,
    );
    // The context is gone: another launch and a copy fail the same way.
    let again = launch_and_wait(&stream, &f, shape, &[KernelArg::Ptr(out.ptr())]);
    steps.expect("a second launch fails", again, lost);
    steps.expect(
        "a copy after it fails",
        code(out.write(&[7u8; 128 * 4])),
        lost,
    );
    steps.finish(&env.choice.kind.to_string());
    // Dropping the module, buffer and stream in the lost context fails and is recorded; the
    // child's exit reclaims everything.
}

/// Thread 0 makes a barrier expecting one arrival and arrives with a count of 3; `plain` is a
/// kernel with no barrier, to see the context after it.
const OVER_ARRIVAL: &str = r#"
.version 8.0
.target sm_90
.address_size 64
.visible .entry over(.param .u64 out)
{
	.shared .align 8 .b64 bar;
	.reg .pred %p<2>;
	.reg .b32 %r<2>;
	.reg .b64 %rd<2>;
	.reg .b64 %st;
	mov.u32 %r1, %tid.x;
	setp.ne.u32 %p1, %r1, 0;
	@%p1 bra DONE;
	mbarrier.init.shared.b64 [bar], 1;
	mbarrier.arrive.shared.b64 %st, [bar], 3;
	ld.param.u64 %rd1, [out];
	st.global.u64 [%rd1], %st;
DONE:
	ret;
}
.visible .entry plain(.param .u64 out)
{
	.reg .b32 %r<2>;
	.reg .b64 %rd<2>;
	ld.param.u64 %rd1, [out];
	mov.u32 %r1, 7;
	st.global.u32 [%rd1], %r1;
	ret;
}
"#;

#[test]
fn an_mbarrier_arrival_past_the_pending_count_loses_the_context() {
    in_child(
        "mbarrier_words::an_mbarrier_arrival_past_the_pending_count_loses_the_context",
        over_arrival,
    );
}

fn over_arrival() {
    let _exclusive = exclusive_device();
    let Some(env) = env_or_skip() else { return };
    let mut steps = Steps::default();
    let ctx = Context::primary(env).expect("retain the primary context");
    let stream = Stream::new(&ctx).expect("a stream");
    let module = Module::load_ptx(&ctx, OVER_ARRIVAL).expect("the kernels load");
    let over = module.function("over").expect("over");
    let plain = module.function("plain").expect("plain");
    let out = DeviceBuffer::alloc(&ctx, 8).expect("an output buffer");
    let shape = shape_1d(1, 32);
    let lost = CUresult::CUDA_ERROR_LAUNCH_FAILED;
    let args = [KernelArg::Ptr(out.ptr())];
    // NVIDIA may report the fault at the launch's synchronize or at the next call.
    let ran = launch_and_wait(&stream, &over, shape, &args);
    steps.check(
        "the over-arriving launch ends in SUCCESS or the fault",
        ran == CUresult::CUDA_SUCCESS || ran == lost,
        || format!("got {ran:?}"),
    );
    let after = launch_and_wait(&stream, &plain, shape, &args);
    steps.expect("a plain kernel after it fails", after, lost);
    steps.expect("a copy after it fails", code(out.write(&[7u8; 8])), lost);
    steps.finish(&env.choice.kind.to_string());
}
