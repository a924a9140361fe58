//! Graph batching of a trusted guest's launch bursts (issue #12): consecutive launches on one
//! stream are collected and replayed as one CUDA graph (gpuhost's `KernelGraph`), so a burst of
//! `n` costs the driver one submission instead of `n`.
//!
//! **When it pays.** A graph only beats stream launches when it is replayed, and it delays the
//! launches it collects until the burst ends. So a stream collects only while the guest works in
//! bursts: it starts launching straight to the stream, and collects once the launches between
//! two flush points (below) were at least [`MIN_GRAPH_BURST`]; it stops as soon as they were
//! fewer. A launch-then-synchronize loop is therefore never delayed; the price is that a burst
//! after a burst starts on the device only at the next flush point (a guest computing on the CPU
//! between its launches and its `synchronize` no longer overlaps that work with the device's).
//! A flush of fewer than [`MIN_GRAPH_BURST`] launches issues them one by one. Graphs are cached per guest by
//! their shape (kernels, grids, blocks, shared memory, in order): the next identical burst only
//! updates the arguments of the nodes whose arguments changed.
//!
//! **Flush points.** Every other call the guest makes on the stream — `synchronize`, recording
//! or waiting for an event, dropping it — issues the collected launches first, so everything
//! after them is ordered exactly as before. A batch reaching `Limits::max_graph_batch` is issued
//! at once, and so is a stream's batch when its guest reaches `max_launches_in_flight` (collected
//! launches cannot finish, so they must not hold the quota longer than issued ones would). Transfers (`buffer.read`/`write`) run on another stream and were never ordered after
//! unsynchronized launches, so they are no flush point. When the Store is dropped with launches
//! collected, they are issued one by one, as they would have been: they run, as every launch
//! enqueued before a Store's drop does.
//!
//! **Semantics.** A launch is collected only after every check the direct path makes (argument
//! count, sizes, offsets, geometry), only if the driver already accepted the same kernel and
//! geometry on this stream (so a launch the driver would refuse for its resources is refused at
//! the call, on its first use), and only while the context is current. It is counted in flight
//! and in the guest's launches at the call. Kernel faults surface at `synchronize`, as before.
//! What is left to a flush — a context lost or poisoned in between — is reported by the next
//! `synchronize` of the stream, and the launches it could not issue are no longer counted.
//!
//! **Per launch**, collecting costs little: a bound launch is collected as one shared form
//! (bound_launch.rs), so collecting it again is one reference count; a flush lays the
//! arguments of the launches it must pass on out in one list; and a cached graph is replayed
//! through `Stream::replay_graph`, which gives the launches of one replay one Completion (they
//! end together with the graph's last node; `synchronize` awaits one) and neither checks nor
//! compares again a launch that is what its node ran last time: the very shared form, or an
//! argument-list launch of the same kernel, geometry and arguments ([`Deferred::same`]: the
//! same buffers, offsets and scalar bits), and for a sandboxed one the same hidden arguments.
//! A cached graph keeps what its nodes ran last for that comparison without keeping a buffer
//! alive (graph_cache.rs; gpuhost's graph holds its nodes' buffers weakly too), so a buffer the
//! guest drops is freed while graphs that ran it stay cached. Every other launch is checked by
//! gpuhost as on the stream, and its node updated.
//!
//! **Sandboxed guests** are batched too, within the watchdog's guarantee (watchdog/): a batch
//! holds at most [`crate::watchdog::FENCE_EVERY`] launches, the length of one watched segment,
//! and it is issued as one segment under the stream's watch, so a runaway kernel in a graph gets
//! no more GPU time than one queued behind as many stream launches. A collected launch keeps the
//! guest's own arguments; the sandbox's hidden ones (arena, globals, control block, abort epoch)
//! are added when the batch is issued, with the epoch current then, so a stop between collecting
//! and issuing ends the batch's kernels at entry and the stream reports it. A sandboxed Store
//! dropped with launches collected discards them: its drop stops the guest's work anyway.

use std::sync::Arc;

use gpuhost::{Arg as GpuArg, DeviceBuffer, GraphLaunch, LaunchConfig as GpuConfig, WeakBuffer};
use smallvec::SmallVec;

use crate::confine::{Confinement, HIDDEN, KernelSandbox};
use crate::limits::{Charge, Usage};
use crate::stream::{INLINE_ARGS, InFlight};
use crate::watchdog::Stamp;

mod graph_cache;
pub(crate) use graph_cache::GraphCache;

/// What a sandboxed batch is issued with: the guest's confinement and what its stream's watch
/// gives its launches (the abort epoch, the start counter).
pub(crate) type Hidden<'a> = Option<(&'a Confinement, Stamp)>;

/// Launches a flush must hold for a graph to pay, and the launches between two flush points
/// that make a stream collect. Below it, the graph's own submission and updates cost more than
/// the launches they replace.
pub(crate) const MIN_GRAPH_BURST: usize = 4;

/// One argument of a launch, owned, its buffer held as `B`.
enum OwnedArg<B> {
    Buffer(B, usize),
    Bytes(Box<[u8]>),
    Scalar(GpuArg<'static>),
}

/// One argument a collected launch owns (a buffer stays alive until the launch is issued).
type Owned = OwnedArg<DeviceBuffer>;

/// One argument a cached graph's node ran last, its buffer held weakly (graph_cache.rs).
type RanArg = OwnedArg<WeakBuffer>;

/// An argument-list launch a cached graph's node ran last, as far as telling whether the next
/// launch of the node (the same kernel and geometry: the graph's shape) is the same: whether it
/// is sandboxed and its arguments, holding no buffer alive.
pub(crate) struct Ran {
    sandboxed: bool,
    args: SmallVec<[RanArg; INLINE_ARGS]>,
}

/// A launch accepted and not issued yet.
pub(crate) struct Deferred {
    kernel: Arc<gpuhost::Kernel>,
    /// The kernel's module quota share (a cached graph keeps the module loaded, so it keeps a
    /// clone of this: graph_cache.rs).
    charge: Charge,
    cfg: GpuConfig,
    args: SmallVec<[Owned; INLINE_ARGS]>,
    /// A sandboxed kernel's sandbox side: its hidden arguments are added at the flush.
    sandbox: Option<Arc<KernelSandbox>>,
}

impl Deferred {
    /// A checked launch of `kernel` (whose module quota share is `charge`), owning the guest's
    /// arguments (without a sandboxed kernel's hidden ones).
    pub(crate) fn new(
        kernel: &Arc<gpuhost::Kernel>,
        charge: &Charge,
        cfg: GpuConfig,
        args: &[GpuArg<'_>],
        sandbox: Option<&Arc<KernelSandbox>>,
    ) -> Self {
        let args = args
            .iter()
            .map(|a| match *a {
                GpuArg::Buffer(b, off) => OwnedArg::Buffer(b.clone(), off),
                GpuArg::Bytes(b) => OwnedArg::Bytes(b.into()),
                GpuArg::I8(v) => OwnedArg::Scalar(GpuArg::I8(v)),
                GpuArg::I16(v) => OwnedArg::Scalar(GpuArg::I16(v)),
                GpuArg::I32(v) => OwnedArg::Scalar(GpuArg::I32(v)),
                GpuArg::I64(v) => OwnedArg::Scalar(GpuArg::I64(v)),
                GpuArg::U8(v) => OwnedArg::Scalar(GpuArg::U8(v)),
                GpuArg::U16(v) => OwnedArg::Scalar(GpuArg::U16(v)),
                GpuArg::U32(v) => OwnedArg::Scalar(GpuArg::U32(v)),
                GpuArg::U64(v) => OwnedArg::Scalar(GpuArg::U64(v)),
                GpuArg::F32(v) => OwnedArg::Scalar(GpuArg::F32(v)),
                GpuArg::F64(v) => OwnedArg::Scalar(GpuArg::F64(v)),
            })
            .collect();
        // A sandboxed launch that may skip the entry's read runs the kernel's skip copy.
        let kernel = sandbox
            .and_then(|sb| sb.skip_copy_for(&cfg))
            .unwrap_or(kernel);
        Self {
            kernel: kernel.clone(),
            charge: charge.clone(),
            cfg,
            args,
            sandbox: sandbox.cloned(),
        }
    }

    /// Appends the launch's arguments to `out`: the guest's, then a sandboxed kernel's hidden
    /// ones for `hidden`.
    fn push_args<'a>(&'a self, hidden: Hidden<'a>, out: &mut Vec<GpuArg<'a>>) {
        out.extend(self.args.iter().map(|a| match a {
            OwnedArg::Buffer(b, off) => GpuArg::Buffer(b, *off),
            OwnedArg::Bytes(b) => GpuArg::Bytes(b),
            OwnedArg::Scalar(v) => *v,
        }));
        if let (Some(sb), Some((c, stamp))) = (&self.sandbox, hidden) {
            out.extend(c.hidden(sb, &self.cfg, stamp));
        }
    }

    /// Whether `other` launches exactly what this does: the same kernel function and geometry,
    /// and the same arguments (the same buffers at the same offsets, the same bytes, scalars of
    /// the same type and bits: `-0.0` is not `0.0`). A graph node that ran `other` last holds
    /// this launch's parameters (a sandboxed kernel's hidden ones aside).
    pub(crate) fn same(&self, other: &Deferred) -> bool {
        (Arc::ptr_eq(&self.kernel, &other.kernel) || self.kernel.raw() == other.kernel.raw())
            && self.cfg == other.cfg
            && self.sandbox.is_some() == other.sandbox.is_some()
            && self.args.len() == other.args.len()
            && (self.args.iter().zip(&other.args)).all(|(a, b)| a.same(b))
    }

    /// What the launch adds to its stream's start counter, if it is sandboxed
    /// (`ptxvm::sandbox::launch_starts`).
    pub(crate) fn starts(&self) -> u32 {
        self.sandbox.as_ref().map_or(0, |sb| sb.starts(&self.cfg))
    }

    /// The kernel's name for the watchdog, if it is sandboxed.
    pub(crate) fn sandboxed_name(&self) -> Option<&Arc<str>> {
        self.sandbox.as_ref().map(|sb| &sb.name)
    }

    /// Whether this launch is what a node of a graph of its shape ran last as `ran` (see
    /// [`Deferred::same`]: the kernel and geometry are the graph's).
    fn same_as_ran(&self, ran: &Ran) -> bool {
        self.sandbox.is_some() == ran.sandboxed
            && self.args.len() == ran.args.len()
            && (self.args.iter().zip(&ran.args)).all(|(a, r)| a.same_by(r, |b, w| w.is(b)))
    }

    /// Drops this launch, giving its module quota share back to `usage` if it is the last.
    fn release(self, usage: &mut Usage) {
        self.charge.release(usage);
    }

    /// What a graph node that ran this launch remembers of it.
    fn ran(&self) -> Ran {
        Ran {
            sandboxed: self.sandbox.is_some(),
            args: self.args.iter().map(Owned::weak).collect(),
        }
    }
}

impl Owned {
    /// Whether two owned arguments pass the kernel the same parameter (see [`Deferred::same`]).
    fn same(&self, other: &Owned) -> bool {
        self.same_by(other, DeviceBuffer::same)
    }

    /// The argument, its buffer held weakly.
    fn weak(&self) -> RanArg {
        match self {
            OwnedArg::Buffer(b, off) => OwnedArg::Buffer(b.downgrade(), *off),
            OwnedArg::Bytes(b) => OwnedArg::Bytes(b.clone()),
            OwnedArg::Scalar(v) => OwnedArg::Scalar(*v),
        }
    }
}

impl<B> OwnedArg<B> {
    /// Whether two arguments pass the kernel the same parameter (see [`Deferred::same`]), their
    /// buffers compared by `same_buffer`.
    fn same_by<C>(&self, other: &OwnedArg<C>, same_buffer: impl Fn(&B, &C) -> bool) -> bool {
        use GpuArg as A;
        match (self, other) {
            (OwnedArg::Buffer(a, x), OwnedArg::Buffer(b, y)) => x == y && same_buffer(a, b),
            (OwnedArg::Bytes(a), OwnedArg::Bytes(b)) => a == b,
            (OwnedArg::Scalar(a), OwnedArg::Scalar(b)) => match (*a, *b) {
                (A::I8(a), A::I8(b)) => a == b,
                (A::I16(a), A::I16(b)) => a == b,
                (A::I32(a), A::I32(b)) => a == b,
                (A::I64(a), A::I64(b)) => a == b,
                (A::U8(a), A::U8(b)) => a == b,
                (A::U16(a), A::U16(b)) => a == b,
                (A::U32(a), A::U32(b)) => a == b,
                (A::U64(a), A::U64(b)) => a == b,
                // By their bits: the kernel gets the bits, and `==` makes -0.0 equal to 0.0.
                (A::F32(a), A::F32(b)) => a.to_bits() == b.to_bits(),
                (A::F64(a), A::F64(b)) => a.to_bits() == b.to_bits(),
                _ => false,
            },
            _ => false,
        }
    }
}

/// A collected launch: its own (an argument-list launch), or a bound launch's, shared with the
/// bound launch and every other collected launch of it, so that collecting a bound launch again
/// costs one reference count instead of a copy of its kernel, arguments and quota shares.
// Kept in a Vec that keeps its capacity between bursts: boxing the owned launch would cost an
// allocation per argument-list launch for nothing.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Collected {
    Own(Deferred),
    Shared(Arc<Deferred>),
}

impl std::ops::Deref for Collected {
    type Target = Deferred;

    fn deref(&self) -> &Deferred {
        match self {
            Collected::Own(d) => d,
            Collected::Shared(d) => d,
        }
    }
}

impl Collected {
    /// Drops this holder; the last holder of a launch gives its module quota share back.
    pub(crate) fn release(self, usage: &mut Usage) {
        match self {
            Collected::Own(d) => d.release(usage),
            // A Store's data is used by one thread at a time: the count cannot change under us.
            Collected::Shared(d) => {
                if let Ok(d) = Arc::try_unwrap(d) {
                    d.release(usage);
                }
            }
        }
    }
}

/// A launch shape the driver accepted: function, context generation, geometry.
pub(crate) type Shape = (usize, u64, GpuConfig);

pub(crate) fn shape(kernel: &gpuhost::Kernel, cfg: GpuConfig) -> Shape {
    (kernel.raw() as usize, kernel.generation(), cfg)
}

/// What a flush did: the launches it issued (one entry per launch, or one for all the launches
/// of a graph replay, which end together), how many it could not issue, and why.
#[derive(Default)]
pub(crate) struct Flushed {
    pub(crate) issued: Vec<InFlight>,
    pub(crate) not_issued: u32,
    pub(crate) error: Option<gpuhost::Error>,
}

/// The batching state of one guest stream.
pub(crate) struct Burst {
    stream: Arc<gpuhost::Stream>,
    /// Launches collected, in order.
    pending: Vec<Collected>,
    /// Launches accepted since the last flush point.
    interval: usize,
    /// Whether launches are collected now (the last interval was a burst).
    collecting: bool,
    /// Shapes the driver accepted on this stream, oldest first (at most `max_graph_batch`).
    known: Vec<Shape>,
}

impl Burst {
    pub(crate) fn new(stream: Arc<gpuhost::Stream>) -> Self {
        Self {
            stream,
            pending: Vec::new(),
            interval: 0,
            collecting: false,
            known: Vec::new(),
        }
    }

    /// Whether a checked launch of `kernel` with `cfg` is collected rather than issued now.
    pub(crate) fn collects(&self, kernel: &gpuhost::Kernel, cfg: GpuConfig) -> bool {
        let s = shape(kernel, cfg);
        self.collecting
            && kernel.generation() == self.stream.host().generation()
            && self.known.iter().rev().any(|k| *k == s)
    }

    /// Whether launches are collected and not issued yet.
    pub(crate) fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Collects `launch`; true when the batch is full (the caller flushes it).
    pub(crate) fn collect(&mut self, launch: Collected, max_batch: u32) -> bool {
        self.pending.push(launch);
        self.interval += 1;
        self.pending.len() >= max_batch as usize
    }

    /// Notes a launch issued straight to the stream (the driver accepted its shape).
    pub(crate) fn issued(&mut self, s: Shape, max_batch: u32) {
        self.interval += 1;
        // Newest first: a guest repeating a launch finds it at once.
        if self.known.iter().rev().any(|k| *k == s) {
            return;
        }
        if self.known.len() >= max_batch as usize {
            if self.known.is_empty() {
                return;
            }
            self.known.remove(0);
        }
        self.known.push(s);
    }

    /// A flush point (the collected launches were flushed): the interval since the last one
    /// decides whether the stream collects from here on.
    pub(crate) fn flush_point(&mut self, max_batch: u32) {
        self.collecting = max_batch as usize >= MIN_GRAPH_BURST && self.interval >= MIN_GRAPH_BURST;
        self.interval = 0;
    }

    /// The collected launches, in order.
    pub(crate) fn pending(&self) -> &[Collected] {
        &self.pending
    }

    /// Issues the collected launches, in order: through a cached (or new) graph of `graphs`
    /// when there are enough of them, else one by one; sandboxed ones with `hidden`'s arguments.
    /// Quota shares go back to `usage`.
    pub(crate) fn flush(
        &mut self,
        graphs: Option<&mut GraphCache>,
        usage: &mut Usage,
        hidden: Hidden<'_>,
    ) -> Flushed {
        let mut batch = std::mem::take(&mut self.pending);
        // Issued, the launches are released here (a cached graph remembers them without
        // holding their buffers); the Vec keeps its capacity.
        let out = issue(&self.stream, &batch, graphs, usage, hidden);
        for d in batch.drain(..) {
            d.release(usage);
        }
        // Its capacity is kept for the next burst.
        self.pending = batch;
        out
    }
}

impl Drop for Burst {
    /// The Store is going with launches collected: they are issued, as they would have been
    /// at their call (their Completions have nobody left to report to).
    fn drop(&mut self) {
        // A sandboxed guest's are discarded: its confinement (their hidden arguments) is going,
        // and the Store's drop stops its work; nothing reads what they would have written.
        if self.pending.iter().any(|d| d.sandbox.is_some()) {
            self.pending.clear();
        }
        if self.has_pending() {
            // The Store's usage is gone with it: what is given back here counts nowhere.
            drop(self.flush(None, &mut Usage::default(), None));
        }
    }
}

/// Launches of one flush, as gpuhost takes them (inline for a full default batch).
pub(super) type Launches<'a> = SmallVec<[GraphLaunch<'a>; 32]>;

/// The launches of `batch` as gpuhost takes them, into `out` (filled in place: a returned
/// list of 32 was a 1.8 KB copy), every launch's arguments (with `hidden`'s) laid out in
/// `args` (made by [`args_room`] with the same `skip`); a launch flagged in `skip` gets none:
/// `Stream::replay_graph` reads no arguments of a launch it is told is unchanged.
pub(super) fn lay_out<'a>(
    batch: &'a [Collected],
    hidden: Hidden<'a>,
    skip: &[bool],
    args: &'a mut Vec<GpuArg<'a>>,
    out: &mut Launches<'a>,
) {
    let skipped = |i: usize| skip.get(i).copied().unwrap_or(false);
    let mut ends: SmallVec<[usize; 32]> = SmallVec::with_capacity(batch.len());
    for (i, d) in batch.iter().enumerate() {
        if !skipped(i) {
            d.push_args(hidden, args);
        }
        ends.push(args.len());
    }
    let args: &'a [GpuArg<'a>] = args;
    let mut start = 0;
    out.extend(batch.iter().zip(&ends).map(|(d, &end)| {
        let l = GraphLaunch {
            kernel: &d.kernel,
            cfg: d.cfg,
            args: &args[start..end],
        };
        start = end;
        l
    }));
}

/// Room for the arguments of the launches of `batch` not flagged in `skip`, with their hidden
/// ones: none when every launch is skipped (an unchanged replay allocates nothing; this list
/// of a few KB was ~340 instructions per launch of a flush on glibc, which consolidates its
/// free lists for a request that size).
pub(super) fn args_room<'a>(batch: &[Collected], skip: &[bool]) -> Vec<GpuArg<'a>> {
    let skipped = |i: usize| skip.get(i).copied().unwrap_or(false);
    let room = batch.iter().enumerate().filter(|&(i, _)| !skipped(i));
    Vec::with_capacity(room.map(|(_, d)| d.args.len() + HIDDEN).sum())
}

/// Issues `batch` on `stream` (see [`Burst::flush`]), leaving it for the caller to release.
fn issue(
    stream: &gpuhost::Stream,
    batch: &[Collected],
    graphs: Option<&mut GraphCache>,
    usage: &mut Usage,
    hidden: Hidden<'_>,
) -> Flushed {
    let n = batch.len();
    if n >= MIN_GRAPH_BURST
        && let Some(cache) = graphs
        && !cache.broken
    {
        match cache.replay(stream, batch, usage, hidden) {
            Ok(replay) => {
                return Flushed {
                    issued: vec![replay],
                    ..Flushed::default()
                };
            }
            Err(
                e @ (gpuhost::Error::ContextLost { .. } | gpuhost::Error::ContextPoisoned { .. }),
            ) => {
                cache.clear(usage);
                return Flushed {
                    not_issued: n as u32,
                    error: Some(e),
                    ..Flushed::default()
                };
            }
            // A driver that cannot build or update this graph: this guest launches one by one
            // from now on (nothing was issued, so the launches below are the first).
            Err(_) => cache.broken = true,
        }
    }
    let mut args = args_room(batch, &[]);
    let mut launches = Launches::new();
    lay_out(batch, hidden, &[], &mut args, &mut launches);
    let mut out = Flushed::default();
    for (i, l) in launches.iter().enumerate() {
        match stream.launch(l.kernel, l.cfg, l.args) {
            Ok(done) => out.issued.push(InFlight::one(done)),
            Err(e) => {
                // Later launches of the burst would run after one that did not: none is issued.
                out.not_issued = (n - i) as u32;
                out.error = Some(e);
                break;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests;
