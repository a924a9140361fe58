//! gpuhost:cuda/stream (the stream resource): launches enqueue and return at once; each returns
//! a gpuhost `Completion` kept here until `synchronize`, which awaits them — the guest is
//! suspended on its fiber while the executor thread serves other guests.

use std::collections::VecDeque;

use gpuhost::{Arg as GpuArg, Completion, LaunchConfig as GpuConfig};
use smallvec::SmallVec;
use wasmtime::component::{Resource, ResourceTable};

use crate::bindings::WitError;
use crate::bindings::gpuhost::cuda::stream::{Arg, BufferArg, Host, HostStream, LaunchConfig};
use crate::bound_launch::BoundLaunchRes;
use crate::ctx::CudaCtxView;
use crate::error::{CudaResult, from_gpu};
use crate::event::EventRes;
use crate::limits::check_range;
use crate::module::KernelRes;

/// Kernel arguments converted without a heap allocation (more spill to the heap).
pub(crate) const INLINE_ARGS: usize = 8;

/// A guest's stream and the launches on it not yet observed complete.
pub struct StreamRes {
    pub(crate) stream: gpuhost::Stream,
    pending: VecDeque<Completion>,
    /// The first failure of a launch seen complete before `synchronize` (CUDA reports kernel
    /// errors late, and so does this): returned by the next `synchronize`.
    failed: Option<WitError>,
    /// Work other than launches (event record/wait) was enqueued after the last launch, so the
    /// completions alone do not cover the stream's end.
    tail_untracked: bool,
}

/// One lifted WIT argument, sorted: a buffer (which needs the table) or a scalar, already
/// gpuhost's (the one place that maps the WIT cases).
pub(crate) enum Sorted<'a> {
    Buffer(&'a BufferArg),
    Scalar(GpuArg<'static>),
}

pub(crate) fn sort(a: &Arg) -> Sorted<'_> {
    Sorted::Scalar(match *a {
        Arg::Buffer(ref b) => return Sorted::Buffer(b),
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
    match sort(a) {
        Sorted::Buffer(b) => {
            let buf = &table.get(&b.buffer)?.buf;
            Ok(GpuArg::Buffer(buf, buffer_offset(i, b.offset, buf.len())?))
        }
        Sorted::Scalar(v) => Ok(v),
    }
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

/// The launches of a stream the guest dropped before they finished: still counted in flight
/// (dropping a stream does not stop its work), and the stream kept until they end.
pub(crate) struct Orphan {
    /// Kept so that gpuhost pools it again only after this work (it would anyway, once idle).
    _stream: gpuhost::Stream,
    pending: VecDeque<Completion>,
}

/// Retires the finished launches at the front of `pending` without waiting; returns how many.
fn retire_done(pending: &mut VecDeque<Completion>, failed: &mut Option<WitError>) -> u32 {
    let mut n = 0;
    while pending.front().is_some_and(Completion::is_done) {
        let Some(done) = pending.pop_front() else {
            break;
        };
        n += 1;
        // Finished: `wait` returns at once.
        if let Err(e) = done.wait() {
            failed.get_or_insert(from_gpu(&e));
        }
    }
    n
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
    fn before_launch(&mut self, stream: &Resource<StreamRes>) -> CudaResult<()> {
        self.retire_finished(stream)?;
        if self.ctx.usage.launches_in_flight >= self.ctx.limits.max_launches_in_flight {
            self.ctx.retire_orphans();
        }
        Ok(self.ctx.usage.check_launch(&self.ctx.limits)?)
    }

    /// Keeps a launch's completion for `synchronize`, counting it in flight.
    fn launched(&mut self, stream: &Resource<StreamRes>, done: Completion) -> CudaResult<()> {
        let s = self.table.get_mut(stream)?;
        s.pending.push_back(done);
        s.tail_untracked = false;
        self.ctx.usage.launches_in_flight += 1;
        self.ctx.launches += 1;
        Ok(())
    }

    /// Retires the launches at the front of `stream` that have finished, without waiting.
    fn retire_finished(&mut self, stream: &Resource<StreamRes>) -> CudaResult<()> {
        let s = self.table.get_mut(stream)?;
        let n = retire_done(&mut s.pending, &mut s.failed);
        self.ctx.usage.launches_in_flight = self.ctx.usage.launches_in_flight.saturating_sub(n);
        Ok(())
    }
}

impl HostStream for CudaCtxView<'_> {
    fn create(&mut self) -> CudaResult<Resource<StreamRes>> {
        self.ctx.usage.add_stream_or_event(&self.ctx.limits)?;
        let made = self
            .ctx
            .host
            .stream()
            .map_err(Into::into)
            .and_then(|stream| {
                let res = StreamRes {
                    stream,
                    pending: VecDeque::new(),
                    failed: None,
                    tail_untracked: false,
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
        check_arg_count(args.len(), self.ctx.limits.max_launch_args)?;
        self.before_launch(&stream)?;
        let completion = {
            let table: &ResourceTable = self.table;
            let args = args
                .iter()
                .enumerate()
                .map(|(i, a)| to_gpu_arg(table, i, a))
                .collect::<CudaResult<SmallVec<[GpuArg<'_>; INLINE_ARGS]>>>()?;
            let k = &table.get(&kernel)?.kernel;
            table
                .get(&stream)?
                .stream
                .launch(k, to_gpu_config(&config), &args)?
        };
        self.launched(&stream, completion)
    }

    fn enqueue(
        &mut self,
        stream: Resource<StreamRes>,
        launch: Resource<BoundLaunchRes>,
    ) -> CudaResult<()> {
        self.before_launch(&stream)?;
        let completion = {
            let b = self.table.get(&launch)?;
            let s = &self.table.get(&stream)?.stream;
            s.launch(b.kernel(), b.config(), &b.args())?
        };
        self.launched(&stream, completion)
    }

    async fn synchronize(&mut self, stream: Resource<StreamRes>) -> CudaResult<()> {
        let s = self.table.get_mut(&stream)?;
        let pending = std::mem::take(&mut s.pending);
        let mut failed = s.failed.take();
        let tail = std::mem::take(&mut s.tail_untracked);
        for c in pending {
            let r = c.await;
            self.ctx.usage.launches_in_flight = self.ctx.usage.launches_in_flight.saturating_sub(1);
            if let Err(e) = r {
                failed.get_or_insert(from_gpu(&e));
            }
        }
        if let Some(e) = failed {
            return Err(e.into());
        }
        if tail {
            // An event record/wait follows the last launch: a fence covers it (no kernel).
            let fence = self.table.get(&stream)?.stream.fence()?;
            fence.await?;
        }
        Ok(())
    }

    fn record_event(&mut self, stream: Resource<StreamRes>) -> CudaResult<Resource<EventRes>> {
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
        let e = &self.table.get(&event)?.event;
        self.table.get(&stream)?.stream.wait(e)?;
        self.table.get_mut(&stream)?.tail_untracked = true;
        Ok(())
    }

    fn drop(&mut self, stream: Resource<StreamRes>) -> wasmtime::Result<()> {
        let mut s = self.table.delete(stream)?;
        // Dropping a stream does not stop its launches: they stay counted in flight until they
        // finish (retired by later launches, or seen by `quotas`).
        let n = retire_done(&mut s.pending, &mut None);
        self.ctx.usage.launches_in_flight = self.ctx.usage.launches_in_flight.saturating_sub(n);
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
