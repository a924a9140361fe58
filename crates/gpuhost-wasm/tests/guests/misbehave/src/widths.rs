//! `widths`: every case of WIT's `arg` reaches the kernel as the guest gave it, through each way
//! the guest SDK hands the host an argument list (each argument lowered as it is added,
//! gpuhost-guest's launch_abi.rs): `Launch::enqueue` of up to 8 arguments (kept inline), of
//! more (spilled to the heap), and `Launch::bind`; and an error the host returns to a launch
//! arrives as its own case, with its message.

use gpuhost_guest::{DeviceBuffer, Error, Kernel, Launch, Module, Stream};

use crate::{check, fail};

const WIDTHS: &str = include_str!("../../kernels/widths.ptx");

/// What the kernels write for the scalars of [`ints`] and [`wide`], in order.
const EXPECTED: [u64; 10] = [
    -2i64 as u64,
    -300i64 as u64,
    -70_000i64 as u64,
    -(1i64 << 40) as u64,
    0xfe,
    0xfffe,
    0xffff_fffe,
    0xffff_ffff_ffff_fffe,
    0x3fc0_0000,           // 1.5f32
    0x4004_0000_0000_0000, // 2.5f64
];

/// The seven narrower scalars (`ints`' parameters after its buffer).
fn ints(launch: Launch<'_>) -> Launch<'_> {
    launch
        .scalar(-2i8)
        .scalar(-300i16)
        .scalar(-70_000i32)
        .scalar(-(1i64 << 40))
        .scalar(0xfeu8)
        .scalar(0xfffeu16)
        .scalar(0xffff_fffeu32)
}

/// The three wider ones (`wide`'s).
fn wide(launch: Launch<'_>) -> Launch<'_> {
    launch
        .scalar(0xffff_ffff_ffff_fffeu64)
        .scalar(1.5f32)
        .scalar(2.5f64)
}

pub fn widths() {
    let module = check(Module::from_ptx(WIDTHS), "load widths");
    let kernel = |name| check(module.kernel(name), name);
    let (all, int, wid) = (kernel("widths"), kernel("ints"), kernel("wide"));
    let stream = check(Stream::create(), "stream");
    let outs: Vec<_> = (0..3)
        .map(|_| check(DeviceBuffer::<u64>::zeroed(10), "alloc"))
        .collect();
    // Up to 8 arguments: lowered on the stack.
    check(
        ints(Launch::new(&int).buffer(&outs[0])).enqueue(&stream),
        "launch ints (8 arguments)",
    );
    check(
        wide(Launch::new(&wid).buffer(&outs[0])).enqueue(&stream),
        "launch wide (4 arguments)",
    );
    // 11: the generated binding.
    check(
        wide(ints(Launch::new(&all).buffer(&outs[1]))).enqueue(&stream),
        "launch widths (11 arguments)",
    );
    // Bound: the generated binding, then two handles per enqueue.
    let bound = check(
        wide(ints(Launch::new(&all).buffer(&outs[2]))).bind(),
        "bind widths",
    );
    check(stream.enqueue(&bound), "enqueue bound widths");
    check(stream.synchronize(), "synchronize");
    for (out, path) in outs.iter().zip(["stack", "heap", "bound"]) {
        let got = check(out.download(), "download");
        if got != EXPECTED {
            fail(&format!(
                "{path}: the kernel received {got:x?}, not {EXPECTED:x?}"
            ));
        }
    }
    refused(&stream, &int, &outs[0]);
}

/// A stack-lowered launch the host refuses returns the host's case and message.
fn refused(stream: &Stream, kernel: &Kernel, out: &DeviceBuffer<u64>) {
    match Launch::new(kernel).scalar(1u32).enqueue(stream) {
        Err(Error::ArgMismatch(m)) if m.contains("argument") => {}
        other => fail(&format!("a launch of 1 argument to ints: {other:?}")),
    }
    match ints(Launch::new(kernel).block1(0).buffer(out)).enqueue(stream) {
        Err(Error::InvalidLaunch(m)) if !m.is_empty() => {}
        other => fail(&format!("a launch of block 0: {other:?}")),
    }
}
