//! A launch builder: geometry plus a typed argument list, enqueued on a stream.

use std::marker::PhantomData;

use crate::launch_abi::{self, ArgSlot};
use crate::{
    Arg, BoundLaunch, Buffer, DeviceBuffer, Dim3, Error, Kernel, LaunchConfig, Pod, Result, Stream,
};

/// Arguments a [`Launch`] keeps without a heap allocation (more spill to the heap): the host
/// keeps as many inline when it converts them.
const INLINE_ARGS: usize = 8;

/// A launch's arguments, each kept lowered as the canonical ABI lays out a WIT `arg` (launch_abi.rs):
/// enqueuing hands the host this list as it is, with nothing converted per launch. Inline up to
/// [`INLINE_ARGS`], on the heap beyond. Not a `SmallVec` (nor an `ArrayVec`, whose methods a
/// guest built for size calls rather than inlines): smallvec 1 is invariant in its item, so a
/// `Launch<'_>` could no longer be shortened to the borrow of a buffer added later
/// (`|l: Launch<'_>| l.buffer(&buf)`), which guests do.
struct Args<'a> {
    inline: [ArgSlot; INLINE_ARGS],
    /// How many arguments there are: the first ones of `inline` while they fit, else all of
    /// `spilled`.
    len: usize,
    spilled: Vec<ArgSlot>,
    /// The buffers of buffer arguments stay borrowed (a lowered one holds their handle).
    _buffers: PhantomData<&'a Buffer>,
}

impl<'a> Args<'a> {
    #[inline(always)]
    fn new() -> Self {
        Self {
            inline: [ArgSlot::EMPTY; INLINE_ARGS],
            len: 0,
            spilled: Vec::new(),
            _buffers: PhantomData,
        }
    }

    // Inlined into the builder (as the builder's steps are into the guest): a `Launch` is then
    // assembled where it lives instead of being moved whole through each step, and a constant
    // argument's case is lowered at compile time.
    #[inline(always)]
    fn push(&mut self, arg: &Arg<'a>) {
        let slot = ArgSlot::of(arg);
        match self.inline.get_mut(self.len) {
            Some(free) => *free = slot,
            None => self.push_spilled(slot),
        }
        self.len += 1;
    }

    /// `push` past the inline arguments: they move to the heap.
    #[cold]
    #[inline(never)]
    fn push_spilled(&mut self, slot: ArgSlot) {
        if self.spilled.is_empty() {
            self.spilled.reserve(INLINE_ARGS * 2);
            self.spilled.extend_from_slice(&self.inline);
        }
        self.spilled.push(slot);
    }

    #[inline(always)]
    fn as_slice(&self) -> &[ArgSlot] {
        self.inline.get(..self.len).unwrap_or(&self.spilled)
    }

    #[inline]
    fn as_mut_slice(&mut self) -> &mut [ArgSlot] {
        match self.inline.get_mut(..self.len) {
            Some(inline) => inline,
            None => &mut self.spilled,
        }
    }
}

/// A scalar kernel argument; its WIT case carries its width.
pub trait Scalar: Pod {
    /// The argument for this value.
    fn arg(self) -> Arg<'static>;
}

macro_rules! scalar {
    ($($t:ty => $case:ident),*) => {$(
        impl Scalar for $t {
            #[inline]
            fn arg(self) -> Arg<'static> {
                Arg::$case(self)
            }
        }
    )*};
}
scalar!(i8 => I8, i16 => I16, i32 => I32, i64 => I64, u8 => U8, u16 => U16, u32 => U32,
        u64 => U64, f32 => F32, f64 => F64);

/// A kernel launch being assembled. Defaults: grid 1×1×1, block 1×1×1, no dynamic shared memory.
///
/// Building and enqueuing one allocates nothing for up to eight arguments. A launch is not consumed by
/// [`Launch::enqueue`]: keep it prepared and enqueue it again, changing an argument in place
/// with [`Launch::set_scalar`] or [`Launch::set_buffer`] between launches.
pub struct Launch<'a> {
    kernel: &'a Kernel,
    config: LaunchConfig,
    args: Args<'a>,
}

#[inline(always)]
fn dim(x: u32, y: u32, z: u32) -> Dim3 {
    Dim3 { x, y, z }
}

impl<'a> Launch<'a> {
    /// Starts a launch of `kernel`.
    #[inline(always)]
    pub fn new(kernel: &'a Kernel) -> Self {
        let config = LaunchConfig {
            grid: dim(1, 1, 1),
            block: dim(1, 1, 1),
            shared_mem_bytes: 0,
        };
        Self {
            kernel,
            config,
            args: Args::new(),
        }
    }

    /// Grid extents in blocks.
    #[inline(always)]
    pub fn grid(mut self, x: u32, y: u32, z: u32) -> Self {
        self.config.grid = dim(x, y, z);
        self
    }

    /// A one-dimensional grid.
    #[inline(always)]
    pub fn grid1(self, x: u32) -> Self {
        self.grid(x, 1, 1)
    }

    /// Block extents in threads.
    #[inline(always)]
    pub fn block(mut self, x: u32, y: u32, z: u32) -> Self {
        self.config.block = dim(x, y, z);
        self
    }

    /// A one-dimensional block.
    #[inline(always)]
    pub fn block1(self, x: u32) -> Self {
        self.block(x, 1, 1)
    }

    /// Dynamic shared memory per block, in bytes.
    #[inline(always)]
    pub fn shared_mem(mut self, bytes: u32) -> Self {
        self.config.shared_mem_bytes = bytes;
        self
    }

    /// Appends a buffer argument (its first element).
    #[inline(always)]
    pub fn buffer<T: Pod>(self, buffer: &'a DeviceBuffer<T>) -> Self {
        self.arg(buffer.arg_at(0))
    }

    /// Appends a scalar argument.
    #[inline(always)]
    pub fn scalar<S: Scalar>(self, value: S) -> Self {
        self.arg(value.arg())
    }

    /// Appends a raw argument.
    #[inline(always)]
    pub fn arg(mut self, arg: Arg<'a>) -> Self {
        self.args.push(&arg);
        self
    }

    /// Replaces argument `index` (counting from 0) of a prepared launch with a scalar. The
    /// host checks it against the kernel's parameter at the next enqueue, as any argument.
    pub fn set_scalar<S: Scalar>(&mut self, index: usize, value: S) -> Result<()> {
        self.set_arg(index, value.arg())
    }

    /// Replaces argument `index` of a prepared launch with `buffer` from its first element.
    pub fn set_buffer<T: Pod>(&mut self, index: usize, buffer: &'a DeviceBuffer<T>) -> Result<()> {
        self.set_arg(index, buffer.arg_at(0))
    }

    /// Replaces argument `index` of a prepared launch with a raw argument.
    pub fn set_arg(&mut self, index: usize, arg: Arg<'a>) -> Result<()> {
        let args = self.args.as_mut_slice();
        let n = args.len();
        let Some(slot) = args.get_mut(index) else {
            return Err(Error::ArgMismatch(format!(
                "argument {index} does not exist: this launch has {n} (indices 0..{n})"
            )));
        };
        *slot = ArgSlot::of(&arg);
        Ok(())
    }

    /// Enqueues the launch on `stream` and returns without waiting for it. The launch stays
    /// prepared: enqueue it again as often as needed.
    #[inline(always)]
    pub fn enqueue(&self, stream: &Stream) -> Result<()> {
        launch_abi::launch(stream, self.kernel, self.config, self.args.as_slice())
    }

    /// Binds the launch, checked once, for enqueuing many times with `stream.enqueue(&bound)`
    /// (cheaper per launch: no argument list crosses the boundary), or, once
    /// `bound.set_stream(&stream)` gave it a stream, with `bound.enqueue()` (cheaper still: one
    /// handle crosses instead of two). Change a scalar between launches with
    /// `bound.set_scalar(i, value)`. The bound launch keeps its kernel and buffers alive until it
    /// is dropped (not its stream).
    pub fn bind(&self) -> Result<BoundLaunch> {
        launch_abi::bind(self.kernel, self.config, self.args.as_slice())
    }
}

impl BoundLaunch {
    /// Replaces argument `index` (counting from 0) with a scalar of the parameter's size; a
    /// refused change keeps the old value.
    pub fn set_scalar<S: Scalar>(&self, index: u32, value: S) -> Result<()> {
        self.set_arg(index, &value.arg())
    }

    /// Replaces argument `index` with `buffer` from its first element.
    pub fn set_buffer<T: Pod>(&self, index: u32, buffer: &DeviceBuffer<T>) -> Result<()> {
        self.set_arg(index, &buffer.arg_at(0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each argument's `u32` value as lowered (case 7), `u32::MAX` for another case.
    fn values(args: &Args<'_>) -> Vec<u32> {
        args.as_slice().iter().map(ArgSlot::as_u32).collect()
    }

    #[test]
    fn arguments_past_the_inline_ones_move_to_the_heap_in_order_and_stay_settable() {
        let n = INLINE_ARGS as u32 * 2 + 3;
        let mut args = Args::new();
        for i in 0..n {
            args.push(&Arg::U32(i));
            assert_eq!(
                values(&args),
                (0..=i).collect::<Vec<_>>(),
                "after pushing {i}"
            );
        }
        assert_eq!(
            args.spilled.len(),
            n as usize,
            "{n} arguments stayed inline"
        );
        args.as_mut_slice()[INLINE_ARGS] = ArgSlot::of(&Arg::U32(99));
        let at = INLINE_ARGS as u32;
        assert_eq!(
            values(&args)[INLINE_ARGS - 1..INLINE_ARGS + 2],
            [at - 1, 99, at + 1]
        );
    }
}
