//! gpuhost:cuda/stream (the stream resource): launches enqueue and return at once; each returns
//! a gpuhost `Completion` kept here until `synchronize` (or `read-after`), which awaits them —
//! the guest is suspended on its fiber while the executor thread serves other guests.

use crate::calls::HostCall;
use std::collections::VecDeque;
use std::sync::Arc;

use gpuhost::{Arg as GpuArg, Completion, LaunchConfig as GpuConfig};
use smallvec::SmallVec;
use wasmtime::component::{Resource, ResourceTable, ResourceTableError};

use crate::bindings::WitError;
use crate::bindings::gpuhost::cuda::stream::{Arg, BufferArg, Host, HostStream, LaunchConfig};
use crate::bound_launch::BoundLaunchRes;
use crate::burst::{Burst, Collected, Deferred, Shape, shape};
use crate::confine::{Confinement, KernelSandbox};
use crate::ctx::{CudaCtx, CudaCtxView};
use crate::error::{CudaResult, from_gpu};
use crate::event::EventRes;
use crate::limits::check_range;
use crate::memory::BufferRes;
use crate::module::KernelRes;
use crate::watchdog::{NAMES_KEPT, Stamp, StreamWatch};

/// Largest `read-after` that lands in one pooled page-locked region queued behind the stream's
/// launches; a larger one waits for them first and is staged (it would be zeroed, landed and
/// copied out on one core).
const SMALL_READ: usize = 64 << 10;

/// Kernel arguments converted without a heap allocation (more spill to the heap).
pub(crate) const INLINE_ARGS: usize = 8;

/// A guest's stream and the launches on it not yet observed complete.
pub struct StreamRes {
    pub(crate) stream: Arc<gpuhost::Stream>,
    /// The watchdog's view of its launches (sandboxed guests).
    watch: Option<Arc<StreamWatch>>,
    pending: VecDeque<InFlight>,
    /// The first failure of a launch seen complete before `synchronize` (CUDA reports kernel
    /// errors late, and so does this): returned by the next `synchronize`.
    failed: Option<WitError>,
    /// Work other than launches (event record/wait) was enqueued after the last launch, so the
    /// completions alone do not cover the stream's end.
    tail_untracked: bool,
    /// Everything enqueued on the stream was seen complete (by the last drain, with nothing
    /// enqueued after it): when the guest drops the stream, gpuhost pools it without asking the
    /// driver whether it is idle (`Stream::mark_settled`; a cuStreamQuery per `gpuhost serve`
    /// request, 4–6 µs on the H200 under load).
    settled: bool,
    /// Launches collected for a graph, and when to collect (burst/).
    pub(crate) burst: Burst,
}

/// Where a checked launch goes. Small on purpose: a collected launch is built by the caller and
/// handed to the stream once ([`CudaCtxView::collected`]), not carried through this value's
/// returns (a collected launch is a few hundred bytes, and each return moved it whole).
enum Route {
    /// Not collected (see [`Issue`]).
    Direct(Issue),
    /// To be collected for a graph: every check the direct path makes before the driver passed.
    Collect,
}

/// A launch not collected.
enum Issue {
    /// Issued to the stream; the driver accepted its shape.
    Issued(Completion, Shape),
    /// Not collected while launches are: those go first, then it is routed again.
    FlushFirst,
}

/// One lifted WIT argument: a buffer (which needs the table) or a scalar, already gpuhost's (the
/// one place that maps the WIT cases).
pub(crate) enum Lifted<'a> {
    Buffer(&'a BufferArg),
    Scalar(GpuArg<'static>),
}

pub(crate) fn lift(a: &Arg) -> Lifted<'_> {
    Lifted::Scalar(match *a {
        Arg::Buffer(ref b) => return Lifted::Buffer(b),
        Arg::I8(v) => GpuArg::I8(v),
        Arg::I16(v) => GpuArg::I16(v),
        Arg::I32(v) => GpuArg::I32(v),
        Arg::I64(v) => GpuArg::I64(v),
        Arg::U8(v) => GpuArg::U8(v),
        Arg::U16(v) => GpuArg::U16(v),
        Arg::U32(v) => GpuArg::U32(v),
        Arg::U64(v) => GpuArg::U64(v),
        Arg::F32(v) => GpuArg::F32(v),
        Arg::F64(v) => GpuArg::F64(v),
    })
}

/// The byte offset of buffer argument `i` into a buffer of `len` bytes, checked. The error text
/// is built only on failure, so a valid launch allocates nothing here.
pub(crate) fn buffer_offset(i: usize, offset: u64, len: usize) -> CudaResult<usize> {
    match usize::try_from(offset) {
        Ok(o) if o <= len => Ok(o),
        _ => Ok(check_range(&format!("buffer argument {i}"), offset, 0, len)?.0),
    }
}

/// Converts one WIT argument to gpuhost's, borrowing a buffer argument's `DeviceBuffer` straight
/// out of `table` (no clone: the kernel and stream lookups borrow the table immutably too).
fn to_gpu_arg<'t>(table: &'t ResourceTable, i: usize, a: &Arg) -> CudaResult<GpuArg<'t>> {
    match lift(a) {
        Lifted::Buffer(b) => {
            let buf = &table.get(&b.buffer)?.buf;
            Ok(GpuArg::Buffer(buf, buffer_offset(i, b.offset, buf.len())?))
        }
        Lifted::Scalar(v) => Ok(v),
    }
}

/// Converts a launch's WIT arguments to gpuhost's into `out`, in order (the first failing one
/// is the error). A plain loop into the caller's list: collecting results into a returned
/// `SmallVec` went through `try_process` and copied the list out once more.
fn to_gpu_args<'t>(
    table: &'t ResourceTable,
    args: &[Arg],
    out: &mut SmallVec<[GpuArg<'t>; INLINE_ARGS]>,
) -> CudaResult<()> {
    out.reserve(args.len());
    for (i, a) in args.iter().enumerate() {
        out.push(to_gpu_arg(table, i, a)?);
    }
    Ok(())
}

/// The WIT launch geometry as gpuhost's.
pub(crate) fn to_gpu_config(c: &LaunchConfig) -> GpuConfig {
    GpuConfig {
        grid: [c.grid.x, c.grid.y, c.grid.z],
        block: [c.block.x, c.block.y, c.block.z],
        shared_mem_bytes: c.shared_mem_bytes,
    }
}

/// Refuses an argument list longer than the guest's limit (before anything is looked up).
pub(crate) fn check_arg_count(n: usize, max: u32) -> CudaResult<()> {
    if n > max as usize {
        return Err(WitError::ArgMismatch(format!(
            "{n} arguments given; at most {max} are accepted"
        ))
        .into());
    }
    Ok(())
}

/// Issued launches not yet seen complete: the Completion of the last, and how many they are
/// (one, or the launches of one graph replay, which end together with its last node).
pub(crate) struct InFlight {
    done: Completion,
    launches: u32,
}

impl InFlight {
    /// A launch issued on its own.
    pub(crate) fn one(done: Completion) -> Self {
        Self { done, launches: 1 }
    }

    /// The `launches` of one graph replay, `done` when its last node is: the others resolve
    /// with it, so `synchronize` awaits one instead of each.
    pub(crate) fn replay(done: Completion, launches: usize) -> Self {
        Self {
            done,
            launches: launches as u32,
        }
    }

    /// The Completion of the last of these launches.
    pub(crate) fn done(&self) -> &Completion {
        &self.done
    }

    /// How many launches this stands for.
    pub(crate) fn launches(&self) -> u32 {
        self.launches
    }
}

/// The launches of a stream the guest dropped before they finished: still counted in flight
/// (dropping a stream does not stop its work), and the stream kept until they end.
pub(crate) struct Orphan {
    /// Kept so that gpuhost pools it again only after this work (it would anyway, once idle).
    _stream: Arc<gpuhost::Stream>,
    pending: VecDeque<InFlight>,
}

/// Retires the finished launches at the front of `pending` without waiting; returns how many.
fn retire_done(pending: &mut VecDeque<InFlight>, failed: &mut Option<WitError>) -> u32 {
    let mut n = 0;
    while pending.front().is_some_and(|f| f.done.is_done()) {
        let Some(f) = pending.pop_front() else {
            break;
        };
        n += f.launches;
        // Finished: `wait` returns at once.
        if let Err(e) = f.done.wait() {
            failed.get_or_insert(from_gpu(&e));
        }
    }
    n
}

/// Launches `kernel` on `s` with the user's `args`: as given for a trusted guest; for a
/// sandboxed one after checking the user's argument count and local memory, with the hidden
/// arguments appended to `args`, under the watchdog.
pub(crate) fn launch_on<'a>(
    ctx: &'a CudaCtx,
    s: &StreamRes,
    kernel: &gpuhost::Kernel,
    sandbox: Option<&'a KernelSandbox>,
    cfg: GpuConfig,
    args: &mut SmallVec<[GpuArg<'a>; INLINE_ARGS]>,
) -> CudaResult<Completion> {
    let Some(sb) = sandbox else {
        return Ok(s.stream.launch(kernel, cfg, args)?);
    };
    let (Some(watch), Some(c)) = (&s.watch, &ctx.confine) else {
        // A sandboxed kernel on a stream made before the guest was: never, Limits are fixed.
        return Err(WitError::InvalidHandle(
            "this stream cannot launch sandboxed kernels; create a new one".into(),
        )
        .into());
    };
    sb.check(&ctx.limits, ctx.host.facts(), &cfg, args.len())?;
    // Laid out in the caller's list before the watch, the epoch's word last, set once the watch
    // gives the epoch: building a second list there was a third of a lone launch's host work.
    args.extend_from_slice(&c.hidden(sb, &cfg, Stamp::default()));
    // A launch that may skip the entry's read runs the kernel's skip copy.
    let kernel = sb.skip_copy_for(&cfg).map_or(kernel, |copy| &**copy);
    let starts = sb.starts(&cfg);
    let done = watch.launch(&c.watch, &sb.name, starts, |stamp| {
        if let Some(word) = args.last_mut() {
            *word = Confinement::launch_word(sb, &cfg, stamp);
        }
        s.stream.launch(kernel, cfg, args)
    });
    done.map_err(|e| guest_named(e).into())
}

/// gpuhost's refusal of a launch of a kernel's skip copy names the guest's kernel, as the same
/// refusal of a collected launch (checked against the kernel itself) does.
pub(crate) fn guest_named(mut e: gpuhost::Error) -> gpuhost::Error {
    if let gpuhost::Error::ArgMismatch { kernel, .. } | gpuhost::Error::InvalidLaunch { kernel, .. } =
        &mut e
        && let Some(name) = kernel.strip_suffix(ptxvm::sandbox::SKIP_COPY_SUFFIX)
    {
        *kernel = name.to_string();
    }
    e
}

/// How much of a launch's checking is already done when it is routed.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Checked {
    /// Nothing yet: an argument list, lifted for this call.
    No,
    /// A bound launch: checked as it is now (geometry, argument count, sizes and offsets, a
    /// sandboxed kernel's local memory and hidden arguments) when it was bound or last changed.
    /// What it owns cannot change otherwise, so collecting it repeats none of that.
    Bound,
}

/// Routes a launch (checked by `launch_on` or here, unless `checked` says it was): to be
/// collected for a graph when the stream `collects` this shape (`Burst::collects`, asked by the
/// caller; the caller collects it); else issued, after the launches collected.
fn route<'a>(
    ctx: &'a CudaCtx,
    s: &StreamRes,
    (kernel, sandbox): (&Arc<gpuhost::Kernel>, Option<&'a KernelSandbox>),
    cfg: GpuConfig,
    args: &mut SmallVec<[GpuArg<'a>; INLINE_ARGS]>,
    checked: Checked,
    collects: bool,
) -> CudaResult<Route> {
    if collects {
        // The checks the direct path makes before the driver (the context's currency is part
        // of `collects`); a sandboxed kernel's with its hidden arguments, as they will be.
        match (sandbox, &ctx.confine, &s.watch) {
            (None, ..) if checked == Checked::Bound => {}
            (None, ..) => kernel.check_launch(&cfg, args)?,
            (Some(_), Some(_), Some(_)) if checked == Checked::Bound => {}
            // The hidden arguments are the sandbox's own, and gpuhost checks them with the rest
            // when the batch is issued: building them here to check them was a third of what
            // collecting a sandboxed launch cost.
            (Some(sb), Some(_), Some(_)) => {
                sb.check(&ctx.limits, ctx.host.facts(), &cfg, args.len())?;
                kernel.check_launch_leading(&cfg, args)?;
            }
            // Not collected: the direct path refuses it below.
            (Some(_), ..) => {
                let done = launch_on(ctx, s, kernel, sandbox, cfg, args)?;
                return Ok(Route::Direct(Issue::Issued(done, shape(kernel, cfg))));
            }
        }
        return Ok(Route::Collect);
    }
    if s.burst.has_pending() {
        return Ok(Route::Direct(Issue::FlushFirst));
    }
    let done = launch_on(ctx, s, kernel, sandbox, cfg, args)?;
    Ok(Route::Direct(Issue::Issued(done, shape(kernel, cfg))))
}

impl crate::ctx::CudaCtx {
    /// Retires the finished launches of dropped streams (their errors have nobody to go to).
    pub(crate) fn retire_orphans(&mut self) {
        let mut retired = 0;
        self.orphans.retain_mut(|o| {
            retired += retire_done(&mut o.pending, &mut None);
            !o.pending.is_empty()
        });
        self.usage.launches_in_flight = self.usage.launches_in_flight.saturating_sub(retired);
    }
}

impl CudaCtxView<'_> {
    /// What every launch checks first: finished launches retired, then the in-flight quota.
    /// The stream is about to get work (unsettled) and its finished launches are retired in
    /// one look-up of it.
    fn before_launch(&mut self, stream: &Resource<StreamRes>) -> CudaResult<()> {
        let s = self.table.get_mut(stream)?;
        s.settled = false;
        let n = retire_done(&mut s.pending, &mut s.failed);
        self.ctx.usage.launches_in_flight = self.ctx.usage.launches_in_flight.saturating_sub(n);
        if self.ctx.usage.launches_in_flight >= self.ctx.limits.max_launches_in_flight {
            // Collected launches cannot finish before they are issued: at the quota, issue them
            // so that they count as the same launches issued one by one would.
            self.flush(stream)?;
            self.ctx.retire_orphans();
        }
        Ok(self.ctx.usage.check_launch(&self.ctx.limits)?)
    }

    /// Counts a launch issued in flight, its completion kept for `synchronize`. Returns false
    /// for [`Issue::FlushFirst`], after flushing (the caller routes the launch again).
    fn launched(&mut self, stream: &Resource<StreamRes>, issue: Issue) -> CudaResult<bool> {
        let (done, shape) = match issue {
            Issue::Issued(done, shape) => (done, shape),
            Issue::FlushFirst => {
                self.flush(stream)?;
                return Ok(false);
            }
        };
        let max_batch = self.ctx.max_batch();
        let s = self.table.get_mut(stream)?;
        s.pending.push_back(InFlight::one(done));
        s.burst.issued(shape, max_batch);
        s.tail_untracked = false;
        self.ctx.usage.launches_in_flight += 1;
        self.ctx.launches += 1;
        Ok(true)
    }

    /// Counts a launch collected for a graph in flight, kept for the next flush (now, when it
    /// fills the batch).
    fn collected(&mut self, stream: &Resource<StreamRes>, launch: Collected) -> CudaResult<()> {
        let max_batch = self.ctx.max_batch();
        let s = self.table.get_mut(stream)?;
        let full = s.burst.collect(launch, max_batch);
        s.tail_untracked = false;
        self.ctx.usage.launches_in_flight += 1;
        self.ctx.launches += 1;
        if full {
            self.flush(stream)?;
        }
        Ok(())
    }

    /// Issues the launches collected on `stream` (burst/), keeping their completions; those
    /// it could not issue are no longer counted, and its error goes to the next `synchronize`.
    pub(crate) fn flush(&mut self, stream: &Resource<StreamRes>) -> Result<(), ResourceTableError> {
        let s = self.table.get_mut(stream)?;
        if !s.burst.has_pending() {
            return Ok(());
        }
        let ctx = &mut *self.ctx;
        let graphs = ctx.graphs.usable().then_some(&mut ctx.graphs);
        let flushed = match (&s.watch, &ctx.confine) {
            // A sandboxed guest's batch: one watched segment, given the epoch current now.
            (Some(watch), Some(c)) => {
                // The watchdog keeps the first NAMES_KEPT distinct names of a segment: the
                // batch's first ones, each once, tell it the same for one count per name.
                let mut names: SmallVec<[Arc<str>; NAMES_KEPT]> = SmallVec::new();
                for name in s.burst.pending().iter().filter_map(|d| d.sandboxed_name()) {
                    if names.len() == NAMES_KEPT {
                        break;
                    }
                    // A kernel's launches share its name's allocation: compared by address
                    // first, the text only for two handles of one name.
                    if !names.iter().any(|n| Arc::ptr_eq(n, name) || n == name) {
                        names.push(name.clone());
                    }
                }
                // What each launch adds to the stream's start counter, in order.
                let starts: SmallVec<[u32; 32]> =
                    s.burst.pending().iter().map(|d| d.starts()).collect();
                let (burst, usage) = (&mut s.burst, &mut ctx.usage);
                watch.launch_batch(&c.watch, &names, &starts, |stamp| {
                    burst.flush(graphs, usage, Some((c, stamp)))
                })
            }
            _ => s.burst.flush(graphs, &mut ctx.usage, None),
        };
        s.pending.extend(flushed.issued);
        ctx.usage.launches_in_flight = ctx
            .usage
            .launches_in_flight
            .saturating_sub(flushed.not_issued);
        if let Some(e) = flushed.error {
            s.failed.get_or_insert(from_gpu(&guest_named(e)));
        }
        Ok(())
    }

    /// A flush point (burst/): every other call on `stream` flushes its collected launches
    /// first, and the launches since the last one decide whether it collects next.
    fn flush_point(&mut self, stream: &Resource<StreamRes>) -> CudaResult<()> {
        let max_batch = self.ctx.max_batch();
        let mut s = self.table.get_mut(stream)?;
        if s.burst.has_pending() {
            self.flush(stream)?;
            s = self.table.get_mut(stream)?;
        }
        // One look-up of the stream when nothing was collected (a launch alone, then this).
        s.burst.flush_point(max_batch);
        Ok(())
    }

    /// Waits for every launch issued on `stream` (flushed first by the caller), then reports, in
    /// this order, the first launch error, a sandboxed kernel stopped by the watchdog and a
    /// fenced access: `synchronize`, and `read-after` once its copy has landed.
    async fn drain(&mut self, stream: &Resource<StreamRes>) -> CudaResult<()> {
        let s = self.table.get_mut(stream)?;
        let mut pending = std::mem::take(&mut s.pending);
        let mut failed = s.failed.take();
        let tail = std::mem::take(&mut s.tail_untracked);
        while let Some(f) = pending.pop_front() {
            let r = f.done.await;
            self.ctx.usage.launches_in_flight =
                self.ctx.usage.launches_in_flight.saturating_sub(f.launches);
            if let Err(e) = r {
                failed.get_or_insert(from_gpu(&e));
            }
        }
        // The emptied queue goes back with its capacity: the next launch queues its Completion
        // without an allocation (a launch between synchronizes is the usual loop).
        let s = self.table.get_mut(stream)?;
        if s.pending.is_empty() {
            s.pending = pending;
        }
        if let Some(e) = failed {
            return Err(e.into());
        }
        // A sandboxed guest's kernels stopped by the watchdog, then fenced accesses, in that
        // order: both mean the results are wrong, and the first is the cause of any second.
        // (The look-up of the stream above serves these and the settling below, where each
        // took its own: three fewer per synchronize.)
        if let Some(segment) = s.watch.as_ref().and_then(|w| w.take_stopped()) {
            // The kernel caught running, when one was; else the kernels of the late segment.
            let caught = self.ctx.confine.as_ref().and_then(|c| c.stopped_kernel());
            let what = caught.unwrap_or(segment);
            let ms = self.ctx.limits.max_kernel_time.as_millis();
            return Err(WitError::TimeLimit(format!(
                "{what} ran past this guest's GPU-time limit of {ms} ms per launch and was stopped, with the launches queued with it on this guest's streams; split the work into shorter launches, or ask the embedder to raise the limit (gpuhost run --max-kernel-ms)"
            ))
            .into());
        }
        if let Some(e) = self.ctx.confine.as_ref().and_then(|c| c.take_fault()) {
            return Err(e.into());
        }
        let s = if tail {
            // An event record/wait follows the last launch: a fence covers it (no kernel).
            let fence = s.stream.fence()?;
            fence.await?;
            self.table.get_mut(stream)?
        } else {
            s
        };
        // Everything enqueued before this drain has completed. (A host call that enqueues
        // unsettles the stream before it does, so one that failed midway leaves it unsettled.)
        s.settled = !s.burst.has_pending() && s.pending.is_empty();
        Ok(())
    }

    /// The stream is about to get work this context may not see complete.
    fn unsettle(&mut self, stream: &Resource<StreamRes>) -> Result<(), ResourceTableError> {
        self.table.get_mut(stream)?.settled = false;
        Ok(())
    }
}

impl CudaCtxView<'_> {
    /// `stream.launch` of `args`, lifted as the generated binding's `Vec` or in place
    /// (arg_list.rs).
    pub(crate) fn launch_args(
        &mut self,
        stream: Resource<StreamRes>,
        kernel: Resource<KernelRes>,
        config: LaunchConfig,
        args: &[Arg],
    ) -> CudaResult<()> {
        let _timer = self.ctx.time(HostCall::StreamLaunch);
        check_arg_count(args.len(), self.ctx.limits.max_launch_args)?;
        self.before_launch(&stream)?;
        loop {
            let table: &ResourceTable = self.table;
            let mut gpu_args = SmallVec::new();
            to_gpu_args(table, args, &mut gpu_args)?;
            let k = table.get(&kernel)?;
            let s = table.get(&stream)?;
            let cfg = to_gpu_config(&config);
            let sb = k.sandbox.as_deref();
            let collects = s.burst.collects(&k.kernel, cfg);
            let issue = match route(
                self.ctx,
                s,
                (&k.kernel, sb),
                cfg,
                &mut gpu_args,
                Checked::No,
                collects,
            )? {
                Route::Collect => {
                    // Built here and handed over once (the table's borrows end with `gpu_args`).
                    let launch =
                        Deferred::new(&k.kernel, &k.charge, cfg, &gpu_args, k.sandbox.as_ref());
                    drop(gpu_args);
                    return self.collected(&stream, Collected::Own(launch));
                }
                Route::Direct(issue) => issue,
            };
            drop(gpu_args);
            if self.launched(&stream, issue)? {
                return Ok(());
            }
        }
    }
}

impl CudaCtxView<'_> {
    /// `stream.enqueue` of `launch` on `stream`, and `bound-launch.enqueue` on its stream
    /// (bound_launch.rs): one body, so the two report the same errors.
    pub(crate) fn enqueue_bound(
        &mut self,
        stream: &Resource<StreamRes>,
        launch: &Resource<BoundLaunchRes>,
    ) -> CudaResult<()> {
        self.before_launch(stream)?;
        loop {
            let routed = {
                let b = self.table.get(launch)?;
                let s = self.table.get(stream)?;
                let collects = s.burst.collects(b.kernel(), b.config());
                // A sandboxed kernel is collected only where the direct path would launch it.
                let sandboxed_ok =
                    b.sandbox().is_none() || (self.ctx.confine.is_some() && s.watch.is_some());
                if collects && sandboxed_ok {
                    // A bound launch was checked as it is when it was bound or last changed,
                    // and is collected as its shared form: its arguments are not even built.
                    Route::Collect
                } else {
                    let mut args = SmallVec::new();
                    b.args_into(&mut args);
                    let (kernel, sb, cfg) = (b.kernel(), b.sandbox(), b.config());
                    route(
                        self.ctx,
                        s,
                        (kernel, sb),
                        cfg,
                        &mut args,
                        Checked::Bound,
                        collects,
                    )?
                }
            };
            match routed {
                Route::Collect => {
                    let shared = self.table.get_mut(launch)?.collected();
                    return self.collected(stream, Collected::Shared(shared));
                }
                Route::Direct(issue) => {
                    if self.launched(stream, issue)? {
                        return Ok(());
                    }
                }
            }
        }
    }
}

impl HostStream for CudaCtxView<'_> {
    fn create(&mut self) -> CudaResult<Resource<StreamRes>> {
        let _timer = self.ctx.time(HostCall::StreamCreate);
        self.ctx.usage.add_stream_or_event(&self.ctx.limits)?;
        let made = self
            .ctx
            .host
            .stream()
            .map_err(Into::into)
            .and_then(|stream| {
                let stream = Arc::new(stream);
                let watch = match self.ctx.confinement()? {
                    Some(c) => Some(c.watch.stream()),
                    None => None,
                };
                let res = StreamRes {
                    burst: Burst::new(stream.clone()),
                    stream,
                    watch,
                    pending: VecDeque::new(),
                    failed: None,
                    tail_untracked: false,
                    // A stream from the host's pool is idle.
                    settled: true,
                };
                Ok(self.table.push(res)?)
            });
        if made.is_err() {
            self.ctx.usage.remove_stream_or_event();
        }
        made
    }

    fn launch(
        &mut self,
        stream: Resource<StreamRes>,
        kernel: Resource<KernelRes>,
        config: LaunchConfig,
        args: Vec<Arg>,
    ) -> CudaResult<()> {
        self.launch_args(stream, kernel, config, &args)
    }

    fn enqueue(
        &mut self,
        stream: Resource<StreamRes>,
        launch: Resource<BoundLaunchRes>,
    ) -> CudaResult<()> {
        let _timer = self.ctx.time(HostCall::StreamEnqueue);
        self.enqueue_bound(&stream, &launch)
    }

    async fn synchronize(&mut self, stream: Resource<StreamRes>) -> CudaResult<()> {
        let _timer = self.ctx.time(HostCall::StreamSynchronize);
        self.flush_point(&stream)?;
        self.drain(&stream).await
    }

    async fn read_after(
        &mut self,
        stream: Resource<StreamRes>,
        buffer: Resource<BufferRes>,
        offset: u64,
        len: u64,
    ) -> CudaResult<Vec<u8>> {
        let _timer = self.ctx.time(HostCall::StreamReadAfter);
        self.unsettle(&stream)?;
        self.flush_point(&stream)?;
        let (b, offset, len) = self.start_read(&buffer, offset, len)?;
        // A small read lands in a pooled page-locked region with one DMA queued behind the
        // stream's launches: when it has landed they have ended, so the drain then finds them
        // finished (its checks of the sandbox's words see their end), and the guest is
        // suspended once where `synchronize` and `read` suspended it twice.
        let landing = (len <= SMALL_READ)
            .then(|| self.ctx.host.try_host_buffer(len))
            .flatten();
        let Some(mut landing) = landing else {
            // A larger read, or no pooled region free: a staged download may take the driver's
            // pageable path, which waits for its stream on this thread, so the launches are
            // waited for first and the read goes on the transfer stream, as `synchronize` and
            // `read` would.
            self.drain(&stream).await?;
            let transfer = self.transfer_stream()?;
            return Ok(transfer.download_to_vec(&b, offset, len).await?);
        };
        let s = self.table.get(&stream)?.stream.clone();
        let read = s.download_into(&b, offset, &mut landing, 0..len).await;
        // A launch's error says why the bytes are not to be trusted, or why the read failed.
        self.drain(&stream).await?;
        if read.is_err() {
            // The copy may not have run to its end.
            self.unsettle(&stream)?;
        }
        read?;
        Ok(landing.as_slice().to_vec())
    }

    fn record_event(&mut self, stream: Resource<StreamRes>) -> CudaResult<Resource<EventRes>> {
        let _timer = self.ctx.time(HostCall::StreamRecordEvent);
        self.unsettle(&stream)?;
        self.flush_point(&stream)?;
        self.ctx.usage.add_stream_or_event(&self.ctx.limits)?;
        let made = self
            .table
            .get(&stream)
            .map_err(Into::into)
            .and_then(|s| Ok(s.stream.record()?));
        let made = made.and_then(|event| Ok(self.table.push(EventRes { event })?));
        match made {
            Ok(e) => {
                self.table.get_mut(&stream)?.tail_untracked = true;
                Ok(e)
            }
            Err(e) => {
                self.ctx.usage.remove_stream_or_event();
                Err(e)
            }
        }
    }

    fn wait(&mut self, stream: Resource<StreamRes>, event: Resource<EventRes>) -> CudaResult<()> {
        let _timer = self.ctx.time(HostCall::StreamWait);
        self.unsettle(&stream)?;
        self.flush_point(&stream)?;
        let e = &self.table.get(&event)?.event;
        self.table.get(&stream)?.stream.wait(e)?;
        self.table.get_mut(&stream)?.tail_untracked = true;
        Ok(())
    }

    fn drop(&mut self, stream: Resource<StreamRes>) -> wasmtime::Result<()> {
        let _timer = self.ctx.time(HostCall::StreamDrop);
        // A flush error has no synchronize left to go to: its launches are uncounted.
        self.flush(&stream)?;
        let mut s = self.table.delete(stream)?;
        // Dropping a stream does not stop its launches: they stay counted in flight until they
        // finish (retired by later launches, or seen by `quotas`).
        let n = retire_done(&mut s.pending, &mut None);
        self.ctx.usage.launches_in_flight = self.ctx.usage.launches_in_flight.saturating_sub(n);
        if s.settled && s.pending.is_empty() {
            s.stream.mark_settled();
        }
        if !s.pending.is_empty() {
            self.ctx.orphans.push(Orphan {
                _stream: s.stream,
                pending: s.pending,
            });
        }
        self.ctx.usage.remove_stream_or_event();
        Ok(())
    }
}

impl Host for CudaCtxView<'_> {}
