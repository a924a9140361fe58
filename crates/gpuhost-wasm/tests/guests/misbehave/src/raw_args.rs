//! `raw-args <which>`: `stream.launch` called through its core import with an argument list no
//! binding would lower, as a hostile guest can: `case` (an `arg` case that does not exist),
//! `handle` (a buffer argument whose handle names no resource), `bounds` (a list running past
//! the guest's memory). The host lifts these lists itself (gpuhost-wasm's arg_list.rs); each must
//! trap the guest, as wasmtime's generated lift does, and harm nothing else. Reaching the end
//! means the host took the list.

use std::mem::MaybeUninit;

use gpuhost_guest::{Module, Stream};

use crate::{NOOP, check, fail};

#[cfg(target_arch = "wasm32")]
#[link(wasm_import_module = "gpuhost:cuda/stream@0.1.0")]
unsafe extern "C" {
    /// The generated `Stream::launch`'s import: stream, kernel, the 7 numbers of
    /// `launch-config`, the list's address and length, where the result goes.
    #[link_name = "[method]stream.launch"]
    fn stream_launch(
        stream: i32,
        kernel: i32,
        gx: i32,
        gy: i32,
        gz: i32,
        bx: i32,
        by: i32,
        bz: i32,
        shared: i32,
        args: *const u8,
        len: usize,
        ret: *mut u8,
    );
}

/// Off wasm there is no host to call (native builds only type-check guests).
#[cfg(not(target_arch = "wasm32"))]
#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn stream_launch(
    _: i32,
    _: i32,
    _: i32,
    _: i32,
    _: i32,
    _: i32,
    _: i32,
    _: i32,
    _: i32,
    _: *const u8,
    _: usize,
    _: *mut u8,
) {
    unreachable!("gpuhost:cuda imports exist only in a wasm32 guest")
}

/// Two lowered `arg`s (24 bytes each: the case at byte 0, the payload from byte 8), 8-aligned.
#[repr(C, align(8))]
struct List([u8; 48]);

pub(crate) fn raw_args(which: &str) {
    let module = check(Module::from_ptx(NOOP), "load noop");
    let noop = check(module.kernel("noop"), "kernel noop");
    let stream = check(Stream::create(), "stream");
    // noop's own list: a buffer (case 0) then a `u32` (case 7); each attack spoils one part.
    let mut list = List([0; 48]);
    list.0[24] = 7;
    list.0[32..36].copy_from_slice(&16u32.to_le_bytes());
    let mut len = 2;
    match which {
        "case" => list.0[0] = 200,
        "handle" => list.0[8..12].copy_from_slice(&0x7fff_fff0u32.to_le_bytes()),
        "bounds" => len = usize::MAX / 64,
        other => fail(&format!("raw-args: unknown attack {other:?}")),
    }
    let mut ret = [MaybeUninit::<u32>::uninit(); 4];
    // SAFETY: the import's core signature as WIT defines it; `list` and `ret` live across the
    // call, `ret` 4-aligned and 16 bytes as the result's area is. The list's contents are the
    // attack: the host must refuse them.
    unsafe {
        stream_launch(
            stream.handle() as i32,
            noop.handle() as i32,
            1,
            1,
            1,
            32,
            1,
            1,
            0,
            list.0.as_ptr(),
            len,
            ret.as_mut_ptr().cast(),
        )
    };
    fail(&format!("raw-args {which}: the host took the list"));
}
