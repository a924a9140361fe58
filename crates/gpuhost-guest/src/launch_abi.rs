//! `stream.launch` and `bound-launch.bind` with their argument list lowered by the guest SDK
//! (issue #12).
//!
//! wit-bindgen lowers every list parameter whose elements are not plain numbers into a heap
//! allocation made for the call, fills it with 0xff byte by byte when the call returns, and
//! frees it: for the usual handful of kernel arguments that cost more than the rest of the
//! guest's side of a launch. Here a [`Launch`](crate::Launch) keeps each argument lowered as it
//! is added ([`ArgSlot`]), and the same imports are called with that list as it is, so the host
//! sees exactly what the generated bindings would have sent, and an enqueue converts nothing.
//! Only the layouts of `arg`, of `result<_, error>` and of `result<bound-launch, error>` are
//! written out by hand (the canonical ABI's, from wit/); the tests below check the case order
//! against the WIT files, and the gpuhost-wasm `widths` test launches every case and reads back
//! what the kernel received.

use std::mem::MaybeUninit;

use crate::{Arg, BoundLaunch, Error, Kernel, LaunchConfig, Result, Stream};

/// Bytes of one `arg` as the canonical ABI lays it out: its case (`u8`) at byte 0 and its
/// payload at byte 8 (the widest case's alignment, `u64`); `buffer-arg` is a 4-byte handle at
/// byte 8 and its `u64` offset at byte 16.
const ARG_SIZE: usize = 24;

/// One `arg` lowered, 8-aligned as the canonical ABI aligns a list of them: a slice of these is
/// the list an import takes. Only the bytes its case uses are written (the host reads no
/// others).
#[derive(Clone, Copy)]
#[repr(C, align(8))]
pub(crate) struct ArgSlot([MaybeUninit<u8>; ARG_SIZE]);

impl ArgSlot {
    /// A slot not written yet.
    pub(crate) const EMPTY: Self = Self([MaybeUninit::uninit(); ARG_SIZE]);

    /// `arg` lowered.
    #[inline(always)]
    pub(crate) fn of(arg: &Arg<'_>) -> Self {
        let mut slot = Self::EMPTY;
        // SAFETY: the slot is ARG_SIZE bytes, 8-aligned (`repr(align(8))`).
        unsafe { lower(slot.0.as_mut_ptr().cast(), arg) };
        slot
    }

    /// The value of a lowered `u32` argument, `u32::MAX` for another case (for tests).
    #[cfg(test)]
    pub(crate) fn as_u32(&self) -> u32 {
        let base = self.0.as_ptr().cast::<u8>();
        // SAFETY: every slot has its case written at byte 0, and a `u32` case its value at
        // bytes 8..12 (`lower`), 8-aligned.
        unsafe {
            match base.read() {
                7 => base.add(8).cast::<u32>().read(),
                _ => u32::MAX,
            }
        }
    }
}

/// `result<_, error>` and `result<bound-launch, error>` as the canonical ABI lays them out: the
/// result's case at byte 0, then at byte 4 the bound launch's handle, or the error's case and
/// its string's pointer and length at bytes 8 and 12 (all 4-aligned).
#[repr(C, align(4))]
struct RetArea([MaybeUninit<u8>; 16]);

/// Writes `arg` lowered at `base`, as the generated binding writes it (only the bytes its case
/// uses; the host reads no others).
///
/// # Safety
/// `base` is 8-aligned and valid for writes of [`ARG_SIZE`] bytes.
#[inline(always)]
unsafe fn lower(base: *mut u8, arg: &Arg<'_>) {
    /// The case at byte 0, the value at byte 8.
    #[inline(always)]
    unsafe fn put<T>(base: *mut u8, case: u8, value: T) {
        // SAFETY: the caller's: `base` holds ARG_SIZE bytes, 8-aligned, and every payload is at
        // most 16 bytes from byte 8, aligned at most to 8.
        unsafe {
            base.write(case);
            base.add(8).cast::<T>().write(value);
        }
    }
    // SAFETY: as `put`'s, and the offset of a buffer argument lies at bytes 16..24.
    unsafe {
        match *arg {
            Arg::Buffer(ref b) => {
                put(base, 0, b.buffer.handle() as i32);
                base.add(16).cast::<u64>().write(b.offset);
            }
            Arg::I8(v) => put(base, 1, v),
            Arg::I16(v) => put(base, 2, v),
            Arg::I32(v) => put(base, 3, v),
            Arg::I64(v) => put(base, 4, v),
            Arg::U8(v) => put(base, 5, v),
            Arg::U16(v) => put(base, 6, v),
            Arg::U32(v) => put(base, 7, v),
            Arg::U64(v) => put(base, 8, v),
            Arg::F32(v) => put(base, 9, v),
            Arg::F64(v) => put(base, 10, v),
        }
    }
}

/// WIT's `variant arg` cases in order: `lower`'s case numbers are their indices.
#[cfg(test)]
const ARG_CASES: [&str; 11] = [
    "buffer", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "f32", "f64",
];

/// A case of WIT's `variant error`: its name and its constructor.
type ErrorCase = (&'static str, fn(String) -> Error);

/// WIT's `variant error` cases in order: the error's case number indexes this.
const ERROR_CASES: [ErrorCase; 17] = [
    ("invalid-ptx", Error::InvalidPtx),
    ("invalid-module", Error::InvalidModule),
    ("kernel-not-found", Error::KernelNotFound),
    ("arg-mismatch", Error::ArgMismatch),
    ("out-of-bounds", Error::OutOfBounds),
    ("invalid-launch", Error::InvalidLaunch),
    ("quota-exceeded", Error::QuotaExceeded),
    ("out-of-memory", Error::OutOfMemory),
    ("context-lost", Error::ContextLost),
    ("device-fault", Error::DeviceFault),
    ("invalid-handle", Error::InvalidHandle),
    ("not-ready", Error::NotReady),
    ("not-supported", Error::NotSupported),
    ("driver", Error::Driver),
    ("time-limit", Error::TimeLimit),
    ("memory-fenced", Error::MemoryFenced),
    ("binary-refused", Error::BinaryRefused),
];

/// Declares the imports this file calls, each with the core signature its generated binding
/// calls it with, and off wasm, where there is no host to call (native builds only type-check
/// guests), a stand-in of the same signature.
macro_rules! imports {
    ($($(#[$doc:meta])* $link:literal fn $name:ident($($arg:ident: $t:ty),* $(,)?);)*) => {
        #[cfg(target_arch = "wasm32")]
        #[link(wasm_import_module = "gpuhost:cuda/stream@0.1.0")]
        unsafe extern "C" {
            $($(#[$doc])* #[link_name = $link] fn $name($($arg: $t),*);)*
        }
        $(
            #[cfg(not(target_arch = "wasm32"))]
            #[allow(clippy::too_many_arguments)]
            unsafe extern "C" fn $name($(_: $t),*) {
                unreachable!("gpuhost:cuda imports exist only in a wasm32 guest")
            }
        )*
    };
}

imports! {
    /// wit-bindgen's `Stream::launch`: the stream and kernel handles, the 7 numbers of
    /// `launch-config`, the list's address and length, and where the result goes.
    "[method]stream.launch" fn stream_launch(
        stream: i32, kernel: i32, gx: i32, gy: i32, gz: i32, bx: i32, by: i32, bz: i32,
        shared: i32, args: *const u8, len: usize, ret: *mut u8,
    );
    /// wit-bindgen's `BoundLaunch::bind`: the same but for the stream handle.
    "[static]bound-launch.bind" fn bound_launch_bind(
        kernel: i32, gx: i32, gy: i32, gz: i32, bx: i32, by: i32, bz: i32, shared: i32,
        args: *const u8, len: usize, ret: *mut u8,
    );
}

/// Calls `$import` with `$lead` (the stream's handle for `stream.launch`), then a launch's
/// kernel, geometry and lowered list; evaluates to the result's area, written by the host.
macro_rules! call_with_list {
    ($import:ident($($lead:expr,)*) $kernel:expr, $config:expr, $args:expr) => {{
        let mut ret = RetArea([MaybeUninit::uninit(); 16]);
        let (config, args): (LaunchConfig, &[ArgSlot]) = ($config, $args);
        let (g, b) = (config.grid, config.block);
        // SAFETY: the arguments are the import's core signature as WIT defines it (the
        // generated binding calls the same import with the same values): `args` is
        // `args.len()` canonical-ABI `arg`s, 8-aligned (`ArgSlot`), which the host only reads,
        // and `ret` is a 4-aligned area of the result's 16 bytes, which the host writes before
        // returning. The handles are borrowed from live resources.
        unsafe {
            $import(
                $($lead,)*
                $kernel.handle() as i32,
                g.x as i32,
                g.y as i32,
                g.z as i32,
                b.x as i32,
                b.y as i32,
                b.z as i32,
                config.shared_mem_bytes as i32,
                args.as_ptr().cast(),
                args.len(),
                ret.0.as_mut_ptr().cast(),
            )
        };
        ret
    }};
}

/// `stream.launch(kernel, config, args)`, as the generated `Stream::launch` does it, with the
/// list as the launch keeps it (lowered).
#[inline(always)]
pub(crate) fn launch(
    stream: &Stream,
    kernel: &Kernel,
    config: LaunchConfig,
    args: &[ArgSlot],
) -> Result<()> {
    let ret = call_with_list!(stream_launch(stream.handle() as i32,) kernel, config, args);
    // SAFETY: the host wrote the result's case at byte 0 of `ret` before returning.
    if unsafe { ret.0.as_ptr().cast::<u8>().read() } == 0 {
        return Ok(());
    }
    Err(returned_error(&ret))
}

/// `bound-launch.bind(kernel, config, args)`, as the generated `BoundLaunch::bind` does it, with
/// the list as the launch keeps it (lowered). Its result has the layout of `launch`'s, with the
/// new handle at byte 4 on success.
pub(crate) fn bind(kernel: &Kernel, config: LaunchConfig, args: &[ArgSlot]) -> Result<BoundLaunch> {
    let ret = call_with_list!(bound_launch_bind() kernel, config, args);
    let at = ret.0.as_ptr().cast::<u8>();
    // SAFETY: the host wrote the result's case at byte 0 of `ret` before returning.
    if unsafe { at.read() } != 0 {
        return Err(returned_error(&ret));
    }
    // SAFETY: case 0 (success): the host wrote the new bound launch's handle at byte 4,
    // 4-aligned as `RetArea` is. The guest owns it from here: taken over as the generated
    // binding does.
    Ok(unsafe { BoundLaunch::from_handle(at.add(4).cast::<i32>().read() as u32) })
}

/// The error a host call returned in `ret` (case 1 of its `result`), taken over.
#[cold]
#[inline(never)]
fn returned_error(ret: &RetArea) -> Error {
    let ret = ret.0.as_ptr().cast::<u8>();
    // SAFETY: case 1 (an error): the host wrote the error's case at byte 4 and its string at
    // bytes 8 (pointer) and 12 (length), 4-aligned as `RetArea` is.
    let (case, ptr, len) = unsafe {
        (
            ret.add(4).read(),
            ret.add(8).cast::<*mut u8>().read(),
            ret.add(12).cast::<usize>().read(),
        )
    };
    // SAFETY: the host allocated the string's bytes for the guest with its `cabi_realloc`
    // (this allocator's, alignment 1, exactly `len` long) and they are the guest's now: taken
    // over as a `Vec` as the generated binding does. The canonical ABI lowers only valid UTF-8.
    let message = unsafe { String::from_utf8_unchecked(Vec::from_raw_parts(ptr, len, len)) };
    match ERROR_CASES.get(usize::from(case)) {
        Some((_, error)) => error(message),
        None => Error::Driver(format!(
            "the host returned error case {case}, which this guest does not know: {message}"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The cases of `variant NAME` in a WIT file's text, in order.
    fn variant_cases(wit: &str, name: &str) -> Vec<String> {
        let start = wit
            .find(&format!("variant {name} {{"))
            .unwrap_or_else(|| panic!("no variant {name}"));
        let body = &wit[start..];
        let body = &body[body.find('{').unwrap() + 1..body.find("\n    }").unwrap()];
        body.lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with("//"))
            .map(|l| {
                let case = l.split(['(', ',']).next().unwrap();
                case.trim_start_matches('%').to_string()
            })
            .collect()
    }

    /// A file of the workspace's `wit/` folder, read at run time.
    fn wit(name: &str) -> String {
        let dir = std::env::var("CARGO_MANIFEST_DIR").expect("run under cargo");
        let path = std::path::Path::new(&dir).join("../../wit").join(name);
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    #[test]
    fn the_hand_lowered_cases_are_wits_in_order() {
        let stream = wit("stream.wit");
        assert_eq!(variant_cases(&stream, "arg"), ARG_CASES);
        let types = wit("types.wit");
        let names: Vec<_> = ERROR_CASES.iter().map(|(n, _)| *n).collect();
        assert_eq!(variant_cases(&types, "error"), names);
        // `launch` reads every error's payload as a string at bytes 8 and 12.
        for case in &names {
            assert!(
                types.contains(&format!("{case}(string),")),
                "error case {case} must carry a string for the hand-read result"
            );
        }
    }

    #[test]
    fn each_error_case_builds_the_error_it_is_named_for() {
        for (name, error) in ERROR_CASES {
            let camel: String = name
                .split('-')
                .map(|w| w[..1].to_uppercase() + &w[1..])
                .collect();
            let shown = format!("{:?}", error("m".into()));
            assert!(shown.contains(&camel), "{name} builds {shown}");
        }
    }

    #[test]
    fn arguments_are_laid_out_as_the_canonical_abi_does() {
        let mut slot = [0xaau64; 3];
        let base = slot.as_mut_ptr().cast::<u8>();
        let bytes =
            |slot: &[u64; 3]| -> Vec<u8> { slot.iter().flat_map(|w| w.to_le_bytes()).collect() };
        // SAFETY: `slot` is 24 bytes, 8-aligned.
        unsafe { lower(base, &Arg::I16(-2)) };
        let b = bytes(&slot);
        assert_eq!((b[0], &b[8..10]), (2, &(-2i16).to_le_bytes()[..]));
        // SAFETY: as above.
        unsafe { lower(base, &Arg::F64(1.5)) };
        let b = bytes(&slot);
        assert_eq!((b[0], &b[8..16]), (10, &1.5f64.to_le_bytes()[..]));
    }
}
