//! What a driver does with `mbarrier` operations on shared words that hold no barrier: the
//! question the sandbox must answer before it can let a guest use `mbarrier` (it refuses it
//! today, docs/ISOLATION.md). A fence can keep a guest's barrier addresses inside its own
//! shared memory, but not make the words there barriers, so the sandbox would need arrivals,
//! waits and invalidations on arbitrary words to be harmless to the context. This test holds
//! that they are: each thread runs them on a word of garbage (zeros, all ones, counters,
//! patterns), the launch completes, and the context runs a kernel afterwards. On softcuda that
//! is ptxvm's model; on NVIDIA the ISA calls it undefined, and this is the experiment (in a
//! child process, as a fault would poison the device for the process).

use conformance::context::Context;
use conformance::driver::exclusive_device;
use conformance::memory::DeviceBuffer;
use conformance::module::Module;
use conformance::stream::{KernelArg, LaunchShape, Stream};

use crate::support::{Steps, env_or_skip, in_child};

/// Each of 128 threads fills its shared word with a pattern of its index, then arrives on it,
/// tests and tries to wait on it by state and by parity (a bounded number of times), arrives
/// with `.noComplete` and `arrive_drop`, invalidates it, and records what the waits said.
const KERNEL: &str = r#"
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
fn mbarrier_operations_on_shared_words_that_hold_no_barrier_leave_the_context_usable() {
    in_child(
        "mbarrier_words::mbarrier_operations_on_shared_words_that_hold_no_barrier_leave_the_context_usable",
        garbage_words,
    );
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
    let shape = LaunchShape {
        grid: [1, 1, 1],
        block: [128, 1, 1],
        shared_bytes: 0,
    };
    let ran = stream
        .launch(&f, shape, &[KernelArg::Ptr(out.ptr())])
        .and_then(|()| stream.synchronize());
    steps.check("the launch completes", ran.is_ok(), || format!("{ran:?}"));
    let mut waits = vec![0u8; 128 * 4];
    let read = out.read(&mut waits);
    steps.check("its output reads back", read.is_ok(), || {
        format!("{read:?}")
    });
    // What the waits said is the driver's business (printed for the record), not the test's.
    let said: Vec<u32> = waits
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes")))
        .collect();
    println!("waits (bit 0: test_wait, bit 1: try_wait.parity), by thread: {said:?}");
    // The context still runs work: the same kernel again, and a copy.
    let again = stream
        .launch(&f, shape, &[KernelArg::Ptr(out.ptr())])
        .and_then(|()| stream.synchronize());
    steps.check("a second launch completes", again.is_ok(), || {
        format!("{again:?}")
    });
    let copy = out
        .write(&[7u8; 128 * 4])
        .and_then(|()| out.read(&mut waits));
    steps.check(
        "a copy after it works",
        copy.is_ok() && waits.iter().all(|&b| b == 7),
        || format!("{copy:?}"),
    );
    steps.finish(&env.choice.kind.to_string());
}
