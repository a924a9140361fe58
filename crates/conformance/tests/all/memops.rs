//! Stream memory operations (cuStreamWriteValue32/64, cuStreamWaitValue32/64): a write lands in
//! device memory in stream order, a wait holds its stream until another stream's write satisfies
//! it, and a write on one stream reaches a kernel still running on another. The last is how
//! gpuhost stops a kernel that would run forever, so it is bounded: the kernel gives up after a
//! fixed number of reads and reports whether the value arrived.

use std::ffi::{CString, c_uint, c_void};

use conformance::case::shape_1d;
use conformance::context::Context;
use conformance::driver::{exclusive_device, shared_device};
use conformance::memory::DeviceBuffer;
use conformance::module::Module;
use conformance::stream::{Event, KernelArg, Stream};
use cudarc::driver::sys::{self, CUresult};

use crate::support::{Steps, env_or_skip, own_ptx};

/// `CU_STREAM_WRITE_VALUE_*` and `CU_STREAM_WAIT_VALUE_*` (cuda.h).
const WRITE_DEFAULT: c_uint = 0;
const WRITE_NO_MEMORY_BARRIER: c_uint = 1;
const WAIT_GEQ: c_uint = 0;
const WAIT_EQ: c_uint = 1;
const WAIT_AND: c_uint = 2;
const WAIT_NOR: c_uint = 3;

fn write32(s: &Stream, addr: sys::CUdeviceptr, value: u32, flags: c_uint) -> CUresult {
    // SAFETY: the stream is live; the driver validates the address and flags.
    unsafe { sys::cuStreamWriteValue32_v2(s.raw(), addr, value, flags) }
}

fn write64(s: &Stream, addr: sys::CUdeviceptr, value: u64, flags: c_uint) -> CUresult {
    // SAFETY: as in `write32`.
    unsafe { sys::cuStreamWriteValue64_v2(s.raw(), addr, value, flags) }
}

fn wait32(s: &Stream, addr: sys::CUdeviceptr, value: u32, flags: c_uint) -> CUresult {
    // SAFETY: as in `write32`.
    unsafe { sys::cuStreamWaitValue32_v2(s.raw(), addr, value, flags) }
}

fn wait64(s: &Stream, addr: sys::CUdeviceptr, value: u64, flags: c_uint) -> CUresult {
    // SAFETY: as in `write32`.
    unsafe { sys::cuStreamWaitValue64_v2(s.raw(), addr, value, flags) }
}

fn query(s: &Stream) -> CUresult {
    // SAFETY: the stream is live.
    unsafe { sys::cuStreamQuery(s.raw()) }
}

fn u32_at(bytes: &[u8], off: usize) -> u32 {
    u32::from_le_bytes(bytes[off..off + 4].try_into().expect("4 bytes"))
}

fn u64_at(bytes: &[u8], off: usize) -> u64 {
    u64::from_le_bytes(bytes[off..off + 8].try_into().expect("8 bytes"))
}

/// cuStreamWriteValue32 as cuGetProcAddress resolves it for CUDA 13 (the `_v2` symbol).
type WriteValue32 = unsafe extern "C" fn(sys::CUstream, sys::CUdeviceptr, u32, c_uint) -> CUresult;

fn resolved_write32() -> WriteValue32 {
    let name = CString::new("cuStreamWriteValue32").expect("no NUL");
    let mut pfn: *mut c_void = std::ptr::null_mut();
    let mut status = sys::CUdriverProcAddressQueryResult::CU_GET_PROC_ADDRESS_SUCCESS;
    // SAFETY: `name` is NUL-terminated; `pfn` and `status` are valid out-pointers.
    let r = unsafe { sys::cuGetProcAddress_v2(name.as_ptr(), &mut pfn, 13000, 0, &mut status) };
    assert_eq!(
        r,
        CUresult::CUDA_SUCCESS,
        "cuGetProcAddress(cuStreamWriteValue32, 13000)"
    );
    assert!(!pfn.is_null(), "cuGetProcAddress answered a NULL function");
    // SAFETY: cuGetProcAddress answered the CUDA 13 cuStreamWriteValue32, whose C signature
    // this type is.
    unsafe { std::mem::transmute::<*mut c_void, WriteValue32>(pfn) }
}

#[test]
fn stream_memory_operation_attributes_answer_as_on_the_h200() {
    let Some(env) = env_or_skip() else { return };
    let ctx = Context::primary(env).expect("retain");
    // 92..=94: CUDA 11's `_V1` names (memory ops, 64-bit ops, wait NOR), for the removed v1 API:
    // the H200 answers 0 to each (2026-12-01); 122, 123: CUDA 12's, supported.
    for (attr, want) in [(92u32, 0), (93, 0), (94, 0), (122, 1), (123, 1)] {
        let mut value = -1;
        // SAFETY: `value` is a valid out-pointer; the attribute is passed by value as C does.
        let r = unsafe {
            sys::cuDeviceGetAttribute(
                &mut value,
                std::mem::transmute::<u32, sys::CUdevice_attribute>(attr),
                ctx.device(),
            )
        };
        assert_eq!(r, CUresult::CUDA_SUCCESS, "attribute {attr}");
        eprintln!("{}: attribute {attr} = {value}", env.choice.kind);
        assert_eq!(value, want, "on {}, attribute {attr}", env.choice.kind);
    }
}

#[test]
fn written_values_land_in_device_memory_in_stream_order() {
    let _shared = shared_device();
    let Some(env) = env_or_skip() else { return };
    let ctx = Context::primary(env).expect("retain");
    let s = Stream::new(&ctx).expect("stream");
    let cells = DeviceBuffer::alloc(&ctx, 32).expect("alloc");
    cells.fill(0xee).expect("poison");
    let mut steps = Steps::default();
    let resolved = resolved_write32();
    // SAFETY: the resolved cuStreamWriteValue32 with a live stream and an address in `cells`.
    let r = unsafe { resolved(s.raw(), cells.ptr(), 0x1234_5678, WRITE_DEFAULT) };
    steps.expect(
        "write32 through cuGetProcAddress",
        r,
        CUresult::CUDA_SUCCESS,
    );
    // A later write to the same word on the same stream wins.
    steps.expect(
        "first write32 to a word",
        write32(&s, cells.ptr() + 4, 1, WRITE_DEFAULT),
        CUresult::CUDA_SUCCESS,
    );
    // The v2 API takes no write flags: the H200 refuses NO_MEMORY_BARRIER.
    steps.expect(
        "write32 no-barrier",
        write32(&s, cells.ptr() + 4, 7, WRITE_NO_MEMORY_BARRIER),
        CUresult::CUDA_ERROR_INVALID_VALUE,
    );
    steps.expect(
        "second write32 to the same word",
        write32(&s, cells.ptr() + 4, 0xcafe_f00d, WRITE_DEFAULT),
        CUresult::CUDA_SUCCESS,
    );
    let wide = 0x0123_4567_89ab_cdef;
    steps.expect(
        "write64",
        write64(&s, cells.ptr() + 8, wide, WRITE_DEFAULT),
        CUresult::CUDA_SUCCESS,
    );
    steps.expect(
        "write32 with an undefined flag",
        write32(&s, cells.ptr(), 0, 0x2),
        CUresult::CUDA_ERROR_INVALID_VALUE,
    );
    s.synchronize().expect("sync");
    let bytes = cells.to_vec().expect("read");
    steps.check(
        "values read back",
        (u32_at(&bytes, 0), u32_at(&bytes, 4), u64_at(&bytes, 8))
            == (0x1234_5678, 0xcafe_f00d, wide),
        || {
            format!(
                "got {:#x}, {:#x}, {:#x}",
                u32_at(&bytes, 0),
                u32_at(&bytes, 4),
                u64_at(&bytes, 8)
            )
        },
    );
    steps.check(
        "bytes beyond the words untouched",
        bytes[16..].iter().all(|&b| b == 0xee),
        || format!("{:x?}", &bytes[16..]),
    );
    steps.finish(&env.choice.kind.to_string());
}

/// One wait condition: the word's value that does not satisfy it, the waited-on operand, and
/// the value whose write releases the wait.
struct Case {
    name: &'static str,
    flags: c_uint,
    before: u64,
    operand: u64,
    release: u64,
    wide: bool,
}

const CASES: &[Case] = &[
    Case {
        name: "EQ",
        flags: WAIT_EQ,
        before: 0,
        operand: 9,
        release: 9,
        wide: false,
    },
    Case {
        name: "GEQ",
        flags: WAIT_GEQ,
        before: 3,
        operand: 5,
        release: 6,
        wide: false,
    },
    Case {
        name: "AND",
        flags: WAIT_AND,
        before: 0b0100,
        operand: 0b0011,
        release: 0b0010,
        wide: false,
    },
    // NOR holds when some bit is clear in both the word and the operand.
    Case {
        name: "NOR",
        flags: WAIT_NOR,
        before: 0xffff_0000,
        operand: 0x0000_ffff,
        release: 0x0000_fff0,
        wide: false,
    },
    Case {
        name: "EQ 64",
        flags: WAIT_EQ,
        before: 5,
        operand: (1 << 40) | 5,
        release: (1 << 40) | 5,
        wide: true,
    },
];

#[test]
fn a_wait_value_holds_its_stream_until_another_streams_write_releases_it() {
    // Alone on the device: on NVIDIA a stream held by a wait (or a spinning kernel) makes other
    // threads' driver calls that wait for the device (module loads, large allocations) hold a
    // lock the releasing write needs; beside other tests that deadlocked (H200, 2026-12-01).
    let _alone = exclusive_device();
    let Some(env) = env_or_skip() else { return };
    let ctx = Context::primary(env).expect("retain");
    let (waiter, writer) = (
        Stream::new(&ctx).expect("stream"),
        Stream::new(&ctx).expect("stream"),
    );
    // The waited-on word at 0 (8 bytes), a marker the waiting stream sets after its wait at 8.
    let cells = DeviceBuffer::alloc(&ctx, 16).expect("alloc");
    let mut steps = Steps::default();
    for case in CASES {
        let (word, marker) = (cells.ptr(), cells.ptr() + 8);
        cells.fill(0).expect("clear");
        cells.write_at(0, &case.before.to_le_bytes()).expect("word");
        let r = if case.wide {
            wait64(&waiter, word, case.operand, case.flags)
        } else {
            wait32(&waiter, word, case.operand as u32, case.flags)
        };
        steps.expect(&format!("{}: wait", case.name), r, CUresult::CUDA_SUCCESS);
        if r != CUresult::CUDA_SUCCESS {
            continue;
        }
        steps.expect(
            &format!("{}: marker", case.name),
            write32(&waiter, marker, 1, WRITE_DEFAULT),
            CUresult::CUDA_SUCCESS,
        );
        let behind = Event::new(&ctx).expect("event");
        behind.record(&waiter).expect("record");
        // Nothing writes the word yet, so the waiting stream cannot have got past its wait.
        steps.expect(
            &format!("{}: query while held", case.name),
            query(&waiter),
            CUresult::CUDA_ERROR_NOT_READY,
        );
        let mut marker_now = [0u8; 4];
        cells.read_at(8, &mut marker_now).expect("read marker");
        steps.check(
            &format!("{}: marker while held", case.name),
            marker_now == [0; 4],
            || format!("the work behind the wait ran: {marker_now:?}"),
        );
        let w = if case.wide {
            write64(&writer, word, case.release, WRITE_DEFAULT)
        } else {
            write32(&writer, word, case.release as u32, WRITE_DEFAULT)
        };
        steps.expect(
            &format!("{}: releasing write", case.name),
            w,
            CUresult::CUDA_SUCCESS,
        );
        writer.synchronize().expect("sync writer");
        behind.synchronize().expect("the released stream finishes");
        cells.read_at(8, &mut marker_now).expect("read marker");
        steps.check(
            &format!("{}: marker after release", case.name),
            marker_now == 1u32.to_le_bytes(),
            || format!("{marker_now:?}"),
        );
    }
    steps.finish(&env.choice.kind.to_string());
}

/// How many reads the spinning kernel makes before giving up: far more than a write on a running
/// stream needs to land (one poll of the other stream's worker), and only reached when it never
/// does, so a failing driver ends the test in seconds.
const SPINS: u64 = 1 << 20;

#[test]
fn a_write_value_on_one_stream_stops_a_kernel_spinning_on_another() {
    // Alone on the device: on NVIDIA a stream held by a wait (or a spinning kernel) makes other
    // threads' driver calls that wait for the device (module loads, large allocations) hold a
    // lock the releasing write needs; beside other tests that deadlocked (H200, 2026-12-01).
    let _alone = exclusive_device();
    let Some(env) = env_or_skip() else { return };
    let ctx = Context::primary(env).expect("retain");
    let spin = Module::load_ptx(&ctx, &own_ptx("spin_until"))
        .and_then(|m| m.function("spin_until"))
        .expect("load spin_until");
    let (kernel_stream, host_stream) = (
        Stream::new(&ctx).expect("stream"),
        Stream::new(&ctx).expect("stream"),
    );
    // flag at 0, started at 4, seen at 8.
    let cells = DeviceBuffer::alloc(&ctx, 16).expect("alloc");
    cells.fill(0).expect("clear");
    let (flag, started, seen) = (cells.ptr(), cells.ptr() + 4, cells.ptr() + 8);
    let want = 0x5ca1_ab1e;
    let args = [
        KernelArg::Ptr(flag),
        KernelArg::U32(want),
        KernelArg::Ptr(started),
        KernelArg::Ptr(seen),
        KernelArg::U64(SPINS),
    ];
    kernel_stream
        .launch(&spin, shape_1d(1, 32), &args)
        .expect("launch spin_until");
    // The write is ordered after the kernel has started, so it can only reach it while it runs.
    assert_eq!(
        wait32(&host_stream, started, 1, WAIT_EQ),
        CUresult::CUDA_SUCCESS,
        "wait for started"
    );
    assert_eq!(
        write32(&host_stream, flag, want, WRITE_DEFAULT),
        CUresult::CUDA_SUCCESS,
        "write the flag"
    );
    kernel_stream.synchronize().expect("the kernel ends");
    let bytes = cells.to_vec().expect("read");
    // Should the kernel never have raised `started` visibly, release the waiting stream so the
    // test reports instead of hanging.
    // SAFETY: `started` is a word of `cells`; the stream is live.
    let r = unsafe { sys::cuMemsetD32Async(started, 1, 1, kernel_stream.raw()) };
    assert_eq!(r, CUresult::CUDA_SUCCESS, "cuMemsetD32Async(started)");
    kernel_stream.synchronize().expect("sync");
    host_stream.synchronize().expect("sync the writing stream");
    assert_eq!(
        u32_at(&bytes, 4),
        1,
        "on {}, the kernel's start was not seen",
        env.choice.kind
    );
    assert_eq!(
        u32_at(&bytes, 8),
        1,
        "on {}, the kernel spun {SPINS} reads without seeing the stream write of {want:#x}",
        env.choice.kind
    );
}
