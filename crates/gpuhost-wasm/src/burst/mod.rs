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
//! (bound_launch.rs), so collecting it again is one reference count; a flush lays every
//! launch's arguments out in one list; and a cached graph is replayed through
//! `Stream::replay_graph`, which gives the launches of one replay one Completion (they end
//! together with the graph's last node; `synchronize` awaits one) and neither checks nor
//! compares again a launch that is the very collected form its node ran last time (same
//! [`Deferred::id`], and for a sandboxed one the same hidden arguments): its arguments cannot
//! have changed. Every other launch is checked by gpuhost as on the stream.
//!
//! **Sandboxed guests** are batched too, within the watchdog's guarantee (watchdog.rs): a batch
//! holds at most [`crate::watchdog::FENCE_EVERY`] launches, the length of one watched segment,
//! and it is issued as one segment under the stream's watch, so a runaway kernel in a graph gets
//! no more GPU time than one queued behind as many stream launches. A collected launch keeps the
//! guest's own arguments; the sandbox's hidden ones (arena, globals, control block, abort epoch)
//! are added when the batch is issued, with the epoch current then, so a stop between collecting
//! and issuing ends the batch's kernels at entry and the stream reports it. A sandboxed Store
//! dropped with launches collected discards them: its drop stops the guest's work anyway.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use gpuhost::{Arg as GpuArg, DeviceBuffer, GraphLaunch, LaunchConfig as GpuConfig};
use smallvec::SmallVec;

use crate::confine::{Confinement, HIDDEN, KernelSandbox};
use crate::limits::{Charge, Usage};
use crate::stream::{INLINE_ARGS, InFlight};

mod graph_cache;
pub(crate) use graph_cache::GraphCache;

/// What a sandboxed batch is issued with: the guest's confinement and the abort epoch its
/// launches are given.
pub(crate) type Hidden<'a> = Option<(&'a Confinement, u32)>;

/// Launches a flush must hold for a graph to pay, and the launches between two flush points
/// that make a stream collect. Below it, the graph's own submission and updates cost more than
/// the launches they replace.
pub(crate) const MIN_GRAPH_BURST: usize = 4;

/// One argument a collected launch owns (a buffer stays alive until the launch is issued).
enum Owned {
    Buffer(DeviceBuffer, usize),
    Bytes(Box<[u8]>),
    Scalar(GpuArg<'static>),
}

/// A launch accepted and not issued yet.
pub(crate) struct Deferred {
    /// Unique for the process's life: a graph node last replayed with the launch of this id
    /// holds its arguments (a shared form never changes; a changed bound launch makes a new one).
    id: u64,
    kernel: Arc<gpuhost::Kernel>,
    /// The kernel's module quota share: a cached graph keeps the module loaded, so it keeps
    /// the module counted too.
    charge: Charge,
    cfg: GpuConfig,
    args: SmallVec<[Owned; INLINE_ARGS]>,
    /// A sandboxed kernel's sandbox side: its hidden arguments are added at the flush.
    sandbox: Option<KernelSandbox>,
}

impl Deferred {
    /// A checked launch of `kernel` (whose module quota share is `charge`), owning the guest's
    /// arguments (without a sandboxed kernel's hidden ones).
    pub(crate) fn new(
        kernel: &Arc<gpuhost::Kernel>,
        charge: &Charge,
        cfg: GpuConfig,
        args: &[GpuArg<'_>],
        sandbox: Option<&KernelSandbox>,
    ) -> Self {
        let args = args
            .iter()
            .map(|a| match *a {
                GpuArg::Buffer(b, off) => Owned::Buffer(b.clone(), off),
                GpuArg::Bytes(b) => Owned::Bytes(b.into()),
                GpuArg::I8(v) => Owned::Scalar(GpuArg::I8(v)),
                GpuArg::I16(v) => Owned::Scalar(GpuArg::I16(v)),
                GpuArg::I32(v) => Owned::Scalar(GpuArg::I32(v)),
                GpuArg::I64(v) => Owned::Scalar(GpuArg::I64(v)),
                GpuArg::U8(v) => Owned::Scalar(GpuArg::U8(v)),
                GpuArg::U16(v) => Owned::Scalar(GpuArg::U16(v)),
                GpuArg::U32(v) => Owned::Scalar(GpuArg::U32(v)),
                GpuArg::U64(v) => Owned::Scalar(GpuArg::U64(v)),
                GpuArg::F32(v) => Owned::Scalar(GpuArg::F32(v)),
                GpuArg::F64(v) => Owned::Scalar(GpuArg::F64(v)),
            })
            .collect();
        // Relaxed: only uniqueness matters.
        static NEXT_ID: AtomicU64 = AtomicU64::new(0);
        Self {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
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
            Owned::Buffer(b, off) => GpuArg::Buffer(b, *off),
            Owned::Bytes(b) => GpuArg::Bytes(b),
            Owned::Scalar(v) => *v,
        }));
        if let (Some(sb), Some((c, epoch))) = (&self.sandbox, hidden) {
            out.extend(c.hidden(sb, epoch));
        }
    }

    /// The kernel's name for the watchdog, if it is sandboxed.
    pub(crate) fn sandboxed_name(&self) -> Option<&Arc<str>> {
        self.sandbox.as_ref().map(|sb| &sb.name)
    }

    /// Drops this launch, giving its module quota share back to `usage` if it is the last.
    fn release(self, usage: &mut Usage) {
        self.charge.release(usage);
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

/// Issues `batch` on `stream` (see [`Burst::flush`]).
fn issue(
    stream: &gpuhost::Stream,
    batch: &[Collected],
    graphs: Option<&mut GraphCache>,
    usage: &mut Usage,
    hidden: Hidden<'_>,
) -> Flushed {
    // Every launch's arguments in one list (two allocations a flush, not one per launch).
    let mut args = Vec::with_capacity(batch.iter().map(|d| d.args.len() + HIDDEN).sum());
    let mut ends: SmallVec<[usize; 32]> = SmallVec::with_capacity(batch.len());
    for d in batch {
        d.push_args(hidden, &mut args);
        ends.push(args.len());
    }
    let mut start = 0;
    let launches: Vec<GraphLaunch<'_>> = batch
        .iter()
        .zip(&ends)
        .map(|(d, &end)| {
            let l = GraphLaunch {
                kernel: &d.kernel,
                cfg: d.cfg,
                args: &args[start..end],
            };
            start = end;
            l
        })
        .collect();
    if launches.len() >= MIN_GRAPH_BURST
        && let Some(cache) = graphs
        && !cache.broken
    {
        match cache.replay(stream, batch, &launches, usage, hidden) {
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
                    not_issued: launches.len() as u32,
                    error: Some(e),
                    ..Flushed::default()
                };
            }
            // A driver that cannot build or update this graph: this guest launches one by one
            // from now on (nothing was issued, so the launches below are the first).
            Err(_) => cache.broken = true,
        }
    }
    let mut out = Flushed::default();
    for (i, l) in launches.iter().enumerate() {
        match stream.launch(l.kernel, l.cfg, l.args) {
            Ok(done) => out.issued.push(InFlight::one(done)),
            Err(e) => {
                // Later launches of the burst would run after one that did not: none is issued.
                out.not_issued = (launches.len() - i) as u32;
                out.error = Some(e);
                break;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use wasmtime::component::{Resource, ResourceTable};

    use super::*;
    use crate::bindings::gpuhost::cuda::memory::HostBuffer;
    use crate::bindings::gpuhost::cuda::module::HostModule;
    use crate::bindings::gpuhost::cuda::stream::{
        Arg, BufferArg, HostBoundLaunch, HostStream, LaunchConfig,
    };
    use crate::bindings::gpuhost::cuda::types::Dim3;
    use crate::bound_launch::BoundLaunchRes;
    use crate::ctx::CudaCtxView;
    use crate::memory::BufferRes;
    use crate::stream::StreamRes;
    use crate::{CudaCtx, Limits};

    /// `mix(p, v)`: `*p = *p * 3 + v`, so the value tells which launches ran, in which order.
    const PTX: &str = include_str!("../../../gpuhost/tests/fixtures/mix.ptx");

    fn mix(value: u32, v: u32) -> u32 {
        value.wrapping_mul(3).wrapping_add(v)
    }

    fn borrow<T: 'static>(r: &Resource<T>) -> Resource<T> {
        Resource::new_borrow(r.rep())
    }

    /// A trusted guest (on device 0) with one 4-byte buffer and one stream, the buffer's value
    /// 1, and a bound launch of `mix(buffer, 0)` on one thread (`shared` bytes of shared memory).
    struct Guest {
        ctx: CudaCtx,
        table: ResourceTable,
        buf: Resource<BufferRes>,
        stream: Resource<StreamRes>,
        bound: Resource<BoundLaunchRes>,
    }

    fn config(shared: u32) -> LaunchConfig {
        let one = Dim3 { x: 1, y: 1, z: 1 };
        LaunchConfig {
            grid: one,
            block: one,
            shared_mem_bytes: shared,
        }
    }

    impl Guest {
        async fn new(limits: Limits) -> Self {
            let mut ctx = CudaCtx::new(gpuhost::host(0).unwrap(), limits);
            let mut table = ResourceTable::new();
            let mut v = CudaCtxView {
                ctx: &mut ctx,
                table: &mut table,
            };
            let module = HostModule::from_ptx(&mut v, PTX.into()).unwrap();
            let kernel = HostModule::kernel(&mut v, borrow(&module), "mix".into()).unwrap();
            let buf = HostBuffer::create(&mut v, 4).unwrap();
            HostBuffer::write(&mut v, borrow(&buf), 0, 1u32.to_le_bytes().to_vec())
                .await
                .unwrap();
            let stream = HostStream::create(&mut v).unwrap();
            let args = vec![
                Arg::Buffer(BufferArg {
                    buffer: borrow(&buf),
                    offset: 0,
                }),
                Arg::U32(0),
            ];
            let bound = HostBoundLaunch::bind(&mut v, borrow(&kernel), config(0), args).unwrap();
            // The guest keeps only the bound launch: it holds the kernel and its module.
            crate::bindings::gpuhost::cuda::module::HostKernel::drop(&mut v, kernel).unwrap();
            HostModule::drop(&mut v, module).unwrap();
            Self {
                ctx,
                table,
                buf,
                stream,
                bound,
            }
        }

        /// A guest whose stream collects: a burst of 4 and a synchronize are behind it. Also
        /// returns the buffer's value then.
        async fn collecting(limits: Limits) -> (Self, u32) {
            let mut g = Self::new(limits).await;
            g.enqueue(4);
            let want = (0..4).fold(1, |x, _| mix(x, 0));
            assert_eq!(g.value().await, want);
            assert!(
                g.collected().is_empty(),
                "a burst after a launch was collected"
            );
            (g, want)
        }

        fn view(&mut self) -> CudaCtxView<'_> {
            CudaCtxView {
                ctx: &mut self.ctx,
                table: &mut self.table,
            }
        }

        fn enqueue(&mut self, n: usize) {
            let (s, b) = (borrow(&self.stream), borrow(&self.bound));
            for _ in 0..n {
                HostStream::enqueue(&mut self.view(), borrow(&s), borrow(&b)).unwrap();
            }
        }

        fn set_scalar(&mut self, v: u32) {
            let b = borrow(&self.bound);
            HostBoundLaunch::set_arg(&mut self.view(), b, 1, Arg::U32(v)).unwrap();
        }

        async fn synchronize(&mut self) {
            let s = borrow(&self.stream);
            HostStream::synchronize(&mut self.view(), s).await.unwrap();
        }

        async fn value(&mut self) -> u32 {
            self.synchronize().await;
            let b = borrow(&self.buf);
            let bytes = HostBuffer::read(&mut self.view(), b, 0, 4).await.unwrap();
            u32::from_le_bytes(bytes.try_into().unwrap())
        }

        /// The collected launches of the stream, each as the address of its shared form (None
        /// for one it owns).
        fn collected(&self) -> Vec<Option<*const Deferred>> {
            let s = self.table.get(&self.stream).unwrap();
            s.burst
                .pending()
                .iter()
                .map(|c| match c {
                    Collected::Own(_) => None,
                    Collected::Shared(d) => Some(Arc::as_ptr(d)),
                })
                .collect()
        }
    }

    fn trusted() -> Limits {
        Limits {
            sandbox: false,
            ..Limits::default()
        }
    }

    #[tokio::test]
    async fn a_bound_launch_is_collected_as_one_shared_form_until_a_change_makes_a_new_one() {
        let (mut g, mut want) = Guest::collecting(trusted()).await;
        g.enqueue(3);
        g.set_scalar(5);
        g.enqueue(2);
        let c = g.collected();
        assert!(
            c.iter().all(Option::is_some),
            "an enqueue copied its launch"
        );
        assert!(c[..3].iter().all(|p| *p == c[0]) && c[3..].iter().all(|p| *p == c[3]));
        assert_ne!(c[0], c[3], "a changed launch reused its old collected form");
        let graphed = g.ctx.graphs.launches();
        want = (0..3).fold(want, |x, _| mix(x, 0));
        want = (0..2).fold(want, |x, _| mix(x, 5));
        assert_eq!(
            g.value().await,
            want,
            "collected launches ran other arguments"
        );
        assert_eq!(
            g.ctx.graphs.launches(),
            graphed + 5,
            "the burst was no graph"
        );
        // A new shape (shared memory) is not collected: the launches collected go first.
        g.enqueue(4);
        let b = borrow(&g.bound);
        HostBoundLaunch::set_config(&mut g.view(), b, config(16)).unwrap();
        g.enqueue(1);
        assert!(
            g.collected().is_empty(),
            "a launch of a new shape was collected"
        );
        want = (0..5).fold(want, |x, _| mix(x, 5));
        assert_eq!(g.value().await, want);
        assert_eq!(g.ctx.usage.launches_in_flight, 0);
    }

    #[tokio::test]
    async fn a_cached_graph_replays_changed_launches_with_their_new_arguments_and_counts_each_in_flight()
     {
        let (mut g, mut want) = Guest::collecting(trusted()).await;
        let mut scalar = 0;
        // Each burst replays one cached graph: some nodes get the collected form they ran last
        // time (unchanged), the others one made by a set-arg since.
        for (round, burst) in [
            [0, 0, 0, 0],
            [0, 0, 5, 5],
            [5, 5, 5, 5],
            [5, 5, 5, 5],
            [7, 5, 5, 7],
        ]
        .into_iter()
        .enumerate()
        {
            for v in burst {
                if v != scalar {
                    g.set_scalar(v);
                    scalar = v;
                }
                g.enqueue(1);
                want = mix(want, v);
            }
            let graphed = g.ctx.graphs.launches();
            let s = borrow(&g.stream);
            g.view().flush(&s).unwrap();
            assert_eq!(
                g.ctx.graphs.launches(),
                graphed + 4,
                "round {round}: the burst was no graph"
            );
            assert_eq!(
                g.ctx.usage.launches_in_flight, 4,
                "round {round}: a replay's launches are not each counted in flight"
            );
            assert_eq!(
                g.value().await,
                want,
                "round {round}: a replay ran other arguments"
            );
            assert_eq!(g.ctx.usage.launches_in_flight, 0);
            assert_eq!(g.ctx.usage.cached_graphs, 1, "one shape made another graph");
        }
    }

    #[tokio::test]
    async fn at_the_in_flight_quota_collected_bound_launches_are_issued_and_the_next_refused() {
        let (mut g, mut want) = Guest::collecting(Limits {
            max_launches_in_flight: 6,
            ..trusted()
        })
        .await;
        g.enqueue(6);
        assert_eq!(g.collected().len(), 6);
        let (s, b) = (borrow(&g.stream), borrow(&g.bound));
        let refused = HostStream::enqueue(&mut g.view(), s, b).unwrap_err();
        assert!(
            format!("{refused:?}").contains("launches in flight"),
            "{refused:?}"
        );
        assert!(
            g.collected().is_empty(),
            "the quota left launches collected"
        );
        want = (0..6).fold(want, |x, _| mix(x, 0));
        assert_eq!(g.value().await, want);
    }

    #[tokio::test]
    async fn a_bound_launch_dropped_with_launches_collected_keeps_its_module_counted_until_they_run()
     {
        // No graph cache: a cached graph would keep the module counted itself.
        let (mut g, mut want) = Guest::collecting(Limits {
            max_cached_graphs: 0,
            ..trusted()
        })
        .await;
        g.enqueue(3);
        let b = std::mem::replace(&mut g.bound, Resource::new_own(u32::MAX));
        HostBoundLaunch::drop(&mut g.view(), b).unwrap();
        assert_eq!(g.collected().len(), 3);
        assert_eq!(
            g.ctx.usage.modules, 1,
            "a collected launch's module went uncounted"
        );
        want = (0..3).fold(want, |x, _| mix(x, 0));
        assert_eq!(g.value().await, want);
        assert_eq!(
            g.ctx.usage.modules, 0,
            "the module stayed counted after its launches"
        );
    }
}
