//! `stream.launch` without a heap allocation per launch (issue #12): the generated binding
//! lifts `list<arg>` into a fresh `Vec` for every launch and frees it when the call returns, a
//! malloc and a free per launch (and the allocator's periodic cache sweeps they trigger) for the
//! usual handful of arguments. [`add_launch_in_place`] replaces that import with one that lifts
//! the same list, through the same checks and per-argument lift, into a `Vec` kept for the next
//! launch on this thread ([`ArgList`]).
//!
//! [`ArgList`] implements wasmtime's `ComponentType` and `Lift` by delegating every step to what
//! the generated `Vec<Arg>` would have used: the list's type check is `[Arg]`'s, its pointer and
//! length are lifted and bounds-checked as a `WasmList<Arg>` (the same errors, the same hostcall
//! fuel), and its elements are lifted by `Arg`'s own derived lift. Only where the `Vec` comes
//! from differs. (An inline `SmallVec` was tried first: a few hundred bytes moved through
//! wasmtime's parameter tuple three times cost more than the allocation.) These traits' items
//! are wasmtime's `#[doc(hidden)]` ones (the bindgen macro's generated code uses them the same
//! way): a wasmtime upgrade that changes them fails to compile here.

use std::cell::Cell;

use wasmtime::StoreContextMut;
use wasmtime::component::__internal::{CanonicalAbiInfo, InstanceType, InterfaceType, LiftContext};
use wasmtime::component::{ComponentType, Lift, Linker, Resource, WasmList};

use crate::bindings::gpuhost::cuda::stream::{Arg, BufferArg, LaunchConfig};
use crate::bindings::gpuhost::cuda::types::Host as _;
use crate::ctx::CudaView;
use crate::memory::BufferRes;
use crate::module::KernelRes;
use crate::stream::StreamRes;

/// The WIT instance and function [`add_launch_in_place`] replaces.
const STREAM: &str = "gpuhost:cuda/stream@0.1.0";
const LAUNCH: &str = "[method]stream.launch";

/// The most arguments whose `Vec` is kept for the next launch: a guest's longer list (up to its
/// `max_launch_args`, or a list refused for being longer) is not held on to.
const KEPT_CAPACITY: usize = 64;

thread_local! {
    /// The empty `Vec` of the last launch on this thread, for the next one to lift into. Taken
    /// and given back within one synchronous host call (lifting and running it happen on one
    /// thread, with no await between), so a guest moved to another thread takes that one's.
    static SPARE: Cell<Vec<Arg>> = const { Cell::new(Vec::new()) };
}

/// A launch's lifted `list<arg>`, in a `Vec` taken from this thread's spare.
pub(crate) struct ArgList(Vec<Arg>);

impl ArgList {
    /// The lifted arguments, in order.
    pub(crate) fn as_slice(&self) -> &[Arg] {
        &self.0
    }

    /// Gives the emptied `Vec` back for the next launch on this thread (unless it grew past
    /// [`KEPT_CAPACITY`]).
    pub(crate) fn recycle(mut self) {
        if self.0.capacity() <= KEPT_CAPACITY {
            // The borrowed handles are plain values: nothing to release but the slots.
            self.0.clear();
            SPARE.set(self.0);
        }
    }
}

// SAFETY: `Lower` and `ABI` are those of `WasmList<Arg>` (a list's pointer and length, two flat
// values), whose lift this type's lift calls on the same flat values, and `typecheck` accepts
// exactly the types `[Arg]` (hence `Vec<Arg>`) accepts.
unsafe impl ComponentType for ArgList {
    type Lower = <WasmList<Arg> as ComponentType>::Lower;

    const ABI: CanonicalAbiInfo = <WasmList<Arg> as ComponentType>::ABI;

    fn typecheck(ty: &InterfaceType, types: &InstanceType<'_>) -> wasmtime::Result<()> {
        <[Arg] as ComponentType>::typecheck(ty, types)
    }
}

// SAFETY: both lifts go through `WasmList<Arg>`'s (which validates the pointer, length and
// alignment against the guest's memory) and then lift each element as `Arg`'s own lift does
// (`scalar` and `buffer` read a case's bytes exactly as it would, the handle through the same
// borrow lift; any other element is lifted by it), as `Vec<Arg>`'s lift does.
unsafe impl Lift for ArgList {
    fn linear_lift_from_flat(
        cx: &mut LiftContext<'_>,
        ty: InterfaceType,
        src: &Self::Lower,
    ) -> wasmtime::Result<Self> {
        let list = WasmList::<Arg>::linear_lift_from_flat(cx, ty, src)?;
        // The list's place, from the flat values `WasmList` just checked against the memory.
        let at = usize::try_from(src[0].get_u32())?;
        Self::elements(cx, ty, &list, at)
    }

    fn linear_lift_from_memory(
        cx: &mut LiftContext<'_>,
        ty: InterfaceType,
        bytes: &[u8],
    ) -> wasmtime::Result<Self> {
        let list = WasmList::<Arg>::linear_lift_from_memory(cx, ty, bytes)?;
        let mut args = SPARE.take();
        args.reserve(list.len());
        Arg::linear_lift_into_from_memory(cx, &list, &mut args)?;
        Ok(Self(args))
    }
}

/// Bytes of one lowered `arg`: its case at byte 0, its payload at byte 8 (gpuhost-guest's
/// launch_abi.rs writes the same layout).
const ARG_SIZE: usize = 24;

impl ArgList {
    /// Lifts every element of `list` (of list type `ty`, at byte `at` of the guest's memory), in
    /// order (the first that fails is the error): a scalar straight from its bytes, a buffer
    /// argument's handle through wasmtime's lift of a borrow and its offset from its bytes, and
    /// anything else (a case that is not an `arg`'s) by `Arg`'s derived lift, which refuses it.
    fn elements(
        cx: &mut LiftContext<'_>,
        ty: InterfaceType,
        list: &WasmList<Arg>,
        at: usize,
    ) -> wasmtime::Result<Self> {
        let InterfaceType::List(list_ty) = ty else {
            wasmtime::bail!("stream.launch's arguments are not a list");
        };
        let elem = cx.types[list_ty].element;
        let handle = handle_type(cx, elem);
        let memory = cx.memory();
        let mut args = SPARE.take();
        args.reserve(list.len());
        for i in 0..list.len() {
            // In bounds: `WasmList` checked the whole list against the memory.
            let slot = i
                .checked_mul(ARG_SIZE)
                .and_then(|off| memory.get(at.checked_add(off)?..)?.get(..ARG_SIZE));
            let Some(slot) = slot else {
                wasmtime::bail!("list pointer/length out of bounds of memory");
            };
            let lifted = match (scalar(slot), handle) {
                (Some(a), _) => Some(a),
                (None, Some(h)) => buffer(cx, h, slot)?,
                (None, None) => None,
            };
            match lifted {
                Some(a) => args.push(a),
                None => args.push(Arg::linear_lift_from_memory(cx, elem, slot)?),
            }
        }
        Ok(Self(args))
    }
}

/// The type of a buffer argument's handle (`borrow<buffer>`, the first field of the record of
/// `arg`'s case 0) in `elem`, `arg`'s type as the guest's component declares it; None if it is
/// not laid out so (the derived lift then lifts every buffer argument).
fn handle_type(cx: &LiftContext<'_>, elem: InterfaceType) -> Option<InterfaceType> {
    let InterfaceType::Variant(arg) = elem else {
        return None;
    };
    let Some(Some(InterfaceType::Record(buffer_arg))) = cx.types[arg].cases.values().next() else {
        return None;
    };
    let handle = cx.types[*buffer_arg].fields.first()?.ty;
    matches!(handle, InterfaceType::Borrow(_)).then_some(handle)
}

/// The buffer argument lowered in `slot` (case 0: the handle at byte 8, the offset at byte 16),
/// lifted as `Arg`'s derived lift does, its handle of type `handle` through wasmtime's lift of
/// a borrow; None for another case.
fn buffer(
    cx: &mut LiftContext<'_>,
    handle: InterfaceType,
    slot: &[u8],
) -> wasmtime::Result<Option<Arg>> {
    let (Some(0), Some(index), Some(offset)) =
        (slot.first(), slot.get(8..12), slot.get(16..ARG_SIZE))
    else {
        return Ok(None);
    };
    let buffer = Resource::<BufferRes>::linear_lift_from_memory(cx, handle, index)?;
    let offset = u64::from_le_bytes(offset.try_into()?);
    Ok(Some(Arg::Buffer(BufferArg { buffer, offset })))
}

/// The scalar argument lowered in `slot`, read as `Arg`'s derived lift reads it (the case at
/// byte 0 in WIT's order, the value's little-endian bytes from byte 8); None for a buffer
/// argument or a case `arg` does not have.
fn scalar(slot: &[u8]) -> Option<Arg> {
    let v: [u8; 8] = slot.get(8..16)?.try_into().ok()?;
    let w2 = [v[0], v[1]];
    let w4 = [v[0], v[1], v[2], v[3]];
    Some(match *slot.first()? {
        1 => Arg::I8(i8::from_le_bytes([v[0]])),
        2 => Arg::I16(i16::from_le_bytes(w2)),
        3 => Arg::I32(i32::from_le_bytes(w4)),
        4 => Arg::I64(i64::from_le_bytes(v)),
        5 => Arg::U8(v[0]),
        6 => Arg::U16(u16::from_le_bytes(w2)),
        7 => Arg::U32(u32::from_le_bytes(w4)),
        8 => Arg::U64(u64::from_le_bytes(v)),
        9 => Arg::F32(f32::from_le_bytes(w4)),
        10 => Arg::F64(f64::from_le_bytes(v)),
        _ => return None,
    })
}

/// Replaces `stream.launch` in `linker` (defined just before by the generated bindings) with one
/// whose argument list is lifted into an [`ArgList`]. Leaves the linker's name shadowing off.
pub(crate) fn add_launch_in_place<T: CudaView + 'static>(
    linker: &mut Linker<T>,
) -> wasmtime::Result<()> {
    type Params = (
        Resource<StreamRes>,
        Resource<KernelRes>,
        LaunchConfig,
        ArgList,
    );
    linker.allow_shadowing(true);
    let defined = linker.instance(STREAM).and_then(|mut stream| {
        stream.func_wrap(
            LAUNCH,
            |mut store: StoreContextMut<'_, T>, (stream, kernel, config, args): Params| {
                let mut view = store.data_mut().cuda();
                let r = view.launch_args(stream, kernel, config, args.as_slice());
                args.recycle();
                // As the generated bindings do: a guest error is returned, a host bug traps.
                let r = match r {
                    Ok(()) => Ok(()),
                    Err(e) => Err(view.convert_error(e)?),
                };
                Ok((r,))
            },
        )
    });
    linker.allow_shadowing(false);
    defined
}

#[cfg(test)]
mod tests {
    use super::*;

    /// WIT's `variant arg` cases in the order `scalar` numbers them (0 is `buffer`).
    const CASES: [&str; 11] = [
        "buffer", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "f32", "f64",
    ];

    #[test]
    fn scalar_cases_are_numbered_in_wits_order() {
        let wit = include_str!("../../../wit/stream.wit");
        let body = &wit[wit.find("variant arg {").unwrap()..];
        let body = &body[body.find('{').unwrap() + 1..body.find('}').unwrap()];
        let cases: Vec<&str> = body
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with("//"))
            .map(|l| l.split(['(', ',']).next().unwrap().trim_start_matches('%'))
            .collect();
        assert_eq!(cases, CASES);
    }

    /// A lowered slot of `case` whose value bytes are `value`'s, the rest 0xaa.
    fn slot(case: u8, value: &[u8]) -> [u8; ARG_SIZE] {
        let mut s = [0xaa; ARG_SIZE];
        s[0] = case;
        s[8..8 + value.len()].copy_from_slice(value);
        s
    }

    #[test]
    fn each_scalar_case_reads_its_width_from_byte_8_and_nothing_else() {
        let got = |case: u8, value: &[u8]| format!("{:?}", scalar(&slot(case, value)));
        assert_eq!(got(1, &(-3i8).to_le_bytes()), "Some(Arg::I8(-3))");
        assert_eq!(got(2, &(-300i16).to_le_bytes()), "Some(Arg::I16(-300))");
        assert_eq!(got(3, &(-7i32).to_le_bytes()), "Some(Arg::I32(-7))");
        assert_eq!(
            got(4, &(-1i64 << 40).to_le_bytes()),
            format!("Some(Arg::I64({}))", -1i64 << 40)
        );
        assert_eq!(got(5, &[200]), "Some(Arg::U8(200))");
        assert_eq!(got(6, &60000u16.to_le_bytes()), "Some(Arg::U16(60000))");
        assert_eq!(got(7, &256u32.to_le_bytes()), "Some(Arg::U32(256))");
        assert_eq!(
            got(8, &(u64::MAX - 1).to_le_bytes()),
            format!("Some(Arg::U64({}))", u64::MAX - 1)
        );
        assert_eq!(got(9, &1.5f32.to_le_bytes()), "Some(Arg::F32(1.5))");
        assert_eq!(got(10, &(-2.25f64).to_le_bytes()), "Some(Arg::F64(-2.25))");
        // The buffer case and unknown cases go to the derived lift.
        assert_eq!(got(0, &[1, 0, 0, 0]), "None");
        assert_eq!(got(11, &[]), "None");
        assert!(scalar(&[7; 12]).is_none(), "a short slot is not read");
    }
}
