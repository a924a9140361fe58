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

use crate::bindings::gpuhost::cuda::stream::{Arg, LaunchConfig};
use crate::bindings::gpuhost::cuda::types::Host as _;
use crate::ctx::CudaView;
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
// alignment against the guest's memory) and then `Arg`'s own lift of each element, as
// `Vec<Arg>`'s lift does.
unsafe impl Lift for ArgList {
    fn linear_lift_from_flat(
        cx: &mut LiftContext<'_>,
        ty: InterfaceType,
        src: &Self::Lower,
    ) -> wasmtime::Result<Self> {
        let list = WasmList::<Arg>::linear_lift_from_flat(cx, ty, src)?;
        Self::elements(cx, &list)
    }

    fn linear_lift_from_memory(
        cx: &mut LiftContext<'_>,
        ty: InterfaceType,
        bytes: &[u8],
    ) -> wasmtime::Result<Self> {
        let list = WasmList::<Arg>::linear_lift_from_memory(cx, ty, bytes)?;
        Self::elements(cx, &list)
    }
}

impl ArgList {
    /// Lifts every element of `list`, in order (the first that fails is the error).
    fn elements(cx: &mut LiftContext<'_>, list: &WasmList<Arg>) -> wasmtime::Result<Self> {
        let mut args = SPARE.take();
        args.reserve(list.len());
        Arg::linear_lift_into_from_memory(cx, list, &mut args)?;
        Ok(Self(args))
    }
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
