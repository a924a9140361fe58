//! Stream semantics: in-order execution of dependent work on one stream, events (query,
//! elapsed time), cross-stream waits, host functions in stream order, and the legacy default
//! stream. A [`Gate`] holds a stream back so "not yet" states are observed deterministically.

use std::sync::{Arc, Mutex, PoisonError};

use conformance::case::{blocks_for, bytes_of, shape_1d};
use conformance::context::Context;
use conformance::copy;
use conformance::driver::{Env, exclusive_device, shared_device};
use conformance::memory::{DeviceBuffer, PinnedBuffer};
use conformance::module::{Function, Module};
use conformance::rng::{Rng, fresh_seed};
use conformance::stream::{Event, KernelArg, Stream};
use cudarc::driver::result;
use cudarc::driver::sys::CUresult;

use crate::support::{Gate, OpenOnDrop, clang_ptx, env_or_skip, gate_lock, own_ptx};

const N: usize = 4_096;

fn kernel(ctx: &Arc<Context>, file: &str) -> Function {
    Module::load_ptx(ctx, &clang_ptx(file))
        .and_then(|m| m.function(file))
        .unwrap_or_else(|e| panic!("load {file}: {e}"))
}

/// Small integers as floats: sums of them are exact, so results compare with `==`.
fn small_ints(rng: &mut Rng, lo: i32, hi: i32) -> Vec<f32> {
    rng.vec(N, |r| r.range_i32(lo, hi) as f32)
}

fn upload(ctx: &Arc<Context>, values: &[f32]) -> DeviceBuffer {
    let buf = DeviceBuffer::alloc(ctx, values.len() * 4).expect("alloc");
    buf.write(&bytes_of(values)).expect("write");
    buf
}

fn poisoned(ctx: &Arc<Context>) -> DeviceBuffer {
    let buf = DeviceBuffer::alloc(ctx, N * 4).expect("alloc");
    buf.fill(0xff).expect("poison");
    buf
}

fn floats(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// vector_add's inputs and poisoned output, and the sum the output must end as.
struct AddCase {
    ctx: Arc<Context>,
    add: Function,
    a: DeviceBuffer,
    b: DeviceBuffer,
    c: DeviceBuffer,
    want: Vec<f32>,
}

impl AddCase {
    fn new(env: &Env) -> AddCase {
        let ctx = Context::primary(env).expect("retain");
        let add = kernel(&ctx, "vector_add");
        let mut rng = Rng::new(fresh_seed());
        let (av, bv) = (small_ints(&mut rng, -50, 50), small_ints(&mut rng, -50, 50));
        let want = av.iter().zip(&bv).map(|(a, b)| a + b).collect();
        let (a, b, c) = (upload(&ctx, &av), upload(&ctx, &bv), poisoned(&ctx));
        AddCase {
            ctx,
            add,
            a,
            b,
            c,
            want,
        }
    }

    fn launch(&self, stream: &Stream) {
        let args = [
            KernelArg::Ptr(self.a.ptr()),
            KernelArg::Ptr(self.b.ptr()),
            KernelArg::Ptr(self.c.ptr()),
            KernelArg::I32(N as i32),
        ];
        stream
            .launch(&self.add, shape_1d(blocks_for(N, 256), 256), &args)
            .expect("launch vector_add");
    }
}

#[test]
fn dependent_kernels_and_copies_on_one_stream_run_in_order() {
    let gates = gate_lock();
    let Some(env) = env_or_skip() else { return };
    let ctx = Context::primary(env).expect("retain");
    let saxpy = kernel(&ctx, "saxpy");
    let mut rng = Rng::new(fresh_seed());
    let (x0, y0) = (small_ints(&mut rng, -8, 8), small_ints(&mut rng, -100, 100));
    let (x, y, z) = (upload(&ctx, &x0), upload(&ctx, &y0), poisoned(&ctx));
    let host = PinnedBuffer::alloc(&ctx, N * 4).expect("pinned");
    let stream = Stream::new(&ctx).expect("stream");
    let gate = Gate::new(&gates);
    let _open = OpenOnDrop(Arc::clone(&gate));
    gate.hold(&stream);
    let saxpy_args = |a: f32, y: &DeviceBuffer| {
        [
            KernelArg::I32(N as i32),
            KernelArg::F32(a),
            KernelArg::Ptr(x.ptr()),
            KernelArg::Ptr(y.ptr()),
        ]
    };
    for _ in 0..16 {
        stream
            .launch(&saxpy, shape_1d(4, 128), &saxpy_args(1.0, &y))
            .expect("saxpy y += x");
    }
    copy::device_to_device(&z, &y, &stream).expect("z = y");
    stream
        .launch(&saxpy, shape_1d(4, 128), &saxpy_args(2.0, &z))
        .expect("saxpy z += 2x");
    copy::device_to_host(&host, &z, &stream).expect("host = z");
    let done = Event::new(&ctx).expect("event");
    done.record(&stream).expect("record");
    assert!(
        !done.is_complete().expect("query"),
        "work behind a closed gate reported complete"
    );
    // SAFETY: `stream` is a live stream of the current context.
    let query = unsafe { cudarc::driver::sys::cuStreamQuery(stream.raw()) };
    assert_eq!(
        query,
        CUresult::CUDA_ERROR_NOT_READY,
        "cuStreamQuery on a held stream"
    );
    gate.open();
    stream.synchronize().expect("sync");
    // SAFETY: as above.
    let query = unsafe { cudarc::driver::sys::cuStreamQuery(stream.raw()) };
    assert_eq!(
        query,
        CUresult::CUDA_SUCCESS,
        "cuStreamQuery after synchronize"
    );
    let want: Vec<f32> = x0.iter().zip(&y0).map(|(x, y)| y + 18.0 * x).collect();
    assert_eq!(
        floats(&host.read()),
        want,
        "z after 16 × (y += x), z = y, z += 2x"
    );
}

#[test]
fn event_query_is_not_ready_until_recorded_work_completes() {
    let gates = gate_lock();
    let Some(env) = env_or_skip() else { return };
    let t = AddCase::new(env);
    let stream = Stream::new(&t.ctx).expect("stream");
    let event = || Event::new(&t.ctx).expect("cuEventCreate");
    let (start, end, never) = (event(), event(), event());
    assert!(
        never.is_complete().expect("query"),
        "an event never recorded must query SUCCESS"
    );
    let gate = Gate::new(&gates);
    let _open = OpenOnDrop(Arc::clone(&gate));
    start.record(&stream).expect("record start");
    gate.hold(&stream);
    t.launch(&stream);
    end.record(&stream).expect("record end");
    assert!(
        !end.is_complete().expect("query"),
        "end must be NOT_READY while the gate holds the stream"
    );
    let early = end.elapsed_ms_since(&start).map_err(|e| e.code());
    assert_eq!(
        early,
        Err(Some(CUresult::CUDA_ERROR_NOT_READY)),
        "cuEventElapsedTime before end completed"
    );
    gate.open();
    end.synchronize().expect("cuEventSynchronize");
    assert!(
        end.is_complete().expect("query"),
        "end must be complete after cuEventSynchronize"
    );
    assert!(
        start.is_complete().expect("query"),
        "start must be complete"
    );
    let ms = end.elapsed_ms_since(&start).expect("elapsed");
    assert!(ms.is_finite() && ms >= 0.0, "elapsed {ms} ms");
    assert_eq!(floats(&t.c.to_vec().expect("read")), t.want);
}

#[test]
fn stream_wait_event_orders_work_across_streams() {
    let gates = gate_lock();
    let Some(env) = env_or_skip() else { return };
    let t = AddCase::new(env);
    let out = poisoned(&t.ctx);
    let (first, second) = (
        Stream::new(&t.ctx).expect("stream"),
        Stream::new(&t.ctx).expect("stream"),
    );
    let (produced, consumed) = (
        Event::new(&t.ctx).expect("e"),
        Event::new(&t.ctx).expect("e"),
    );
    let gate = Gate::new(&gates);
    let _open = OpenOnDrop(Arc::clone(&gate));
    gate.hold(&first);
    t.launch(&first);
    produced.record(&first).expect("record");
    second.wait(&produced).expect("cuStreamWaitEvent");
    copy::device_to_device(&out, &t.c, &second).expect("out = c");
    consumed.record(&second).expect("record");
    assert!(
        !consumed.is_complete().expect("query"),
        "the waiting stream ran ahead of the event it waits for"
    );
    gate.open();
    second.synchronize().expect("sync");
    assert_eq!(
        floats(&out.to_vec().expect("read")),
        t.want,
        "copy on the second stream saw the kernel's output"
    );
}

#[test]
fn host_functions_run_in_stream_order_after_earlier_copies() {
    let _shared = shared_device();
    let Some(env) = env_or_skip() else { return };
    let t = AddCase::new(env);
    let host = Arc::new(PinnedBuffer::alloc(&t.ctx, N * 4).expect("pinned"));
    let log = Arc::new(Mutex::new(Vec::<String>::new()));
    let stream = Stream::new(&t.ctx).expect("stream");
    let push = |msg: &'static str| {
        let log = Arc::clone(&log);
        move || {
            log.lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(msg.to_owned())
        }
    };
    stream.launch_host_fn(push("first")).expect("host fn 1");
    t.launch(&stream);
    copy::device_to_host(&host, &t.c, &stream).expect("host = c");
    {
        let (log, host, want) = (Arc::clone(&log), Arc::clone(&host), t.want.clone());
        stream
            .launch_host_fn(move || {
                let seen = floats(&host.read()) == want;
                let msg = if seen {
                    "second: copy visible"
                } else {
                    "second: copy NOT visible"
                };
                log.lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(msg.to_owned());
            })
            .expect("host fn 2");
    }
    stream.launch_host_fn(push("third")).expect("host fn 3");
    stream.synchronize().expect("sync");
    let log = log.lock().unwrap_or_else(PoisonError::into_inner).clone();
    assert_eq!(log, ["first", "second: copy visible", "third"]);
}

#[test]
fn legacy_default_stream_work_completes_before_a_synchronous_copy() {
    let _shared = shared_device();
    let Some(env) = env_or_skip() else { return };
    let t = AddCase::new(env);
    t.launch(&Stream::legacy_default(&t.ctx));
    assert_eq!(floats(&t.c.to_vec().expect("cuMemcpyDtoH")), t.want);
}

#[test]
fn legacy_default_stream_waits_for_blocking_streams_but_not_non_blocking_ones() {
    let gates = gate_lock();
    let Some(env) = env_or_skip() else { return };
    let t = AddCase::new(env);
    let legacy = Stream::legacy_default(&t.ctx);

    let non_blocking = Stream::new(&t.ctx).expect("stream");
    let held = Event::new(&t.ctx).expect("event");
    let gate = Gate::new(&gates);
    let _open = OpenOnDrop(Arc::clone(&gate));
    gate.hold(&non_blocking);
    held.record(&non_blocking).expect("record");
    t.launch(&legacy);
    legacy.synchronize().expect("sync legacy");
    assert!(
        !held.is_complete().expect("query"),
        "the legacy stream waited for a non-blocking stream (or the gate timed out)"
    );
    assert_eq!(floats(&t.c.to_vec().expect("read")), t.want);
    gate.open();
    non_blocking.synchronize().expect("sync");

    t.c.fill(0xff).expect("poison again");
    let blocking = Stream::new_blocking(&t.ctx).expect("stream");
    let after = Event::new(&t.ctx).expect("event");
    let gate = Gate::new(&gates);
    let _open = OpenOnDrop(Arc::clone(&gate));
    gate.hold(&blocking);
    t.launch(&legacy);
    after.record(&legacy).expect("record");
    assert!(
        !after.is_complete().expect("query"),
        "legacy-stream work ran ahead of earlier work on a blocking stream"
    );
    gate.open();
    after.synchronize().expect("cuEventSynchronize");
    assert_eq!(floats(&t.c.to_vec().expect("read")), t.want);
}

#[test]
fn stream_ordered_alloc_and_free_follow_stream_order() {
    let gates = gate_lock();
    let Some(env) = env_or_skip() else { return };
    let t = AddCase::new(env);
    let stream = Stream::new(&t.ctx).expect("stream");
    let out = poisoned(&t.ctx);
    let gate = Gate::new(&gates);
    let _open = OpenOnDrop(Arc::clone(&gate));
    gate.hold(&stream);
    t.ctx.bind().expect("bind");
    // SAFETY: `stream` is a live stream of the current context; the memory is used only on it.
    let scratch = unsafe { result::malloc_async(stream.raw(), N * 4) }.expect("cuMemAllocAsync");
    // SAFETY: `scratch` and `t.c` are N*4-byte allocations of this context, used in stream order.
    unsafe { result::memcpy_dtod_async(scratch, t.c.ptr(), N * 4, stream.raw()) }.expect("DtoD");
    t.launch(&stream);
    // SAFETY: as above; `out` is N*4 bytes.
    unsafe { result::memcpy_dtod_async(out.ptr(), scratch, N * 4, stream.raw()) }.expect("DtoD");
    // SAFETY: `scratch` came from cuMemAllocAsync on this stream and is freed once, after its uses.
    unsafe { result::free_async(scratch, stream.raw()) }.expect("cuMemFreeAsync");
    gate.open();
    stream.synchronize().expect("sync");
    // The first copy ran before the kernel wrote c, so `out` holds c's poison, not the sum.
    let got = out.to_vec().expect("read");
    assert!(
        got.iter().all(|b| *b == 0xff),
        "the copy before the kernel saw the kernel's output"
    );
    assert_eq!(floats(&t.c.to_vec().expect("read")), t.want);
}

#[test]
fn kernels_on_two_streams_run_at_the_same_time() {
    // Alone on the device: beside other tests' kernels the second launch could wait for free
    // SMs past the first one's bound (seen once on the H200 with parallel test threads).
    let _alone = exclusive_device();
    let Some(env) = env_or_skip() else { return };
    let ctx = Context::primary(env).expect("retain");
    let handshake = Module::load_ptx(&ctx, &own_ptx("handshake"))
        .and_then(|m| m.function("handshake"))
        .expect("load handshake");
    let (a, b) = (
        Stream::new_blocking(&ctx).expect("stream"),
        Stream::new_blocking(&ctx).expect("stream"),
    );
    // Flags at 0 and 4, each kernel's `met` at 8 and 12.
    let cells = DeviceBuffer::alloc(&ctx, 16).expect("alloc");
    cells.fill(0).expect("clear");
    let at = |off: u64| KernelArg::Ptr(cells.ptr() + off);
    // Only a safety bound: the other kernel raises its flag within a few reads when both run.
    let spins = KernelArg::U64(1 << 22);
    a.launch(&handshake, shape_1d(1, 32), &[at(0), at(4), at(8), spins])
        .expect("launch on a");
    b.launch(&handshake, shape_1d(1, 32), &[at(4), at(0), at(12), spins])
        .expect("launch on b");
    a.synchronize().expect("sync a");
    b.synchronize().expect("sync b");
    let bytes = cells.to_vec().expect("read");
    let met = |off: usize| u32::from_le_bytes(bytes[off..off + 4].try_into().expect("4 bytes"));
    assert_eq!(
        (met(8), met(12)),
        (1, 1),
        "on {}, each kernel must see the other's flag while it waits: they did not overlap",
        env.choice.kind
    );
}
