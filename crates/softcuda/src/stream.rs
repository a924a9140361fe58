//! Streams: an in-order queue of work with one worker thread each. Work is submitted as a boxed
//! closure and gets a ticket; a ticket is done when the worker has run everything up to it, which
//! is what synchronize, query, events and cross-stream waits are built on.

use std::cell::Cell;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::mpsc::{Sender, channel};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError, Weak};
use std::thread::ThreadId;

use cudarc::driver::sys::CUresult;

use crate::abi::CuResult;
use crate::context::Context;
use crate::driver::Tag;
use crate::handles::Table;

/// A unit of stream work.
pub(crate) type Job = Box<dyn FnOnce() + Send>;

/// `CU_STREAM_NON_BLOCKING`: does not synchronize with the legacy default stream.
pub(crate) const NON_BLOCKING: u32 = 1;
/// The handle values cuda.h reserves for the legacy and per-thread default streams.
const STREAM_LEGACY: u64 = 0x1;
const STREAM_PER_THREAD: u64 = 0x2;
/// Priorities as on H100/H200: 0 is the lowest, -5 the greatest.
pub(crate) const LEAST_PRIORITY: i32 = 0;
/// See [`LEAST_PRIORITY`].
pub(crate) const GREATEST_PRIORITY: i32 = -5;

#[derive(Default)]
struct Progress {
    submitted: u64,
    completed: u64,
}

/// One stream: its queue, its worker and how far the worker has got.
pub(crate) struct Stream {
    /// The C handle (0 for a context's legacy default stream).
    pub(crate) handle: u64,
    /// Creation flags (`CU_STREAM_NON_BLOCKING`).
    pub(crate) flags: u32,
    /// Scheduling priority (recorded; the worker does not reorder by it).
    pub(crate) priority: i32,
    /// The owning context; weak because the context owns its streams.
    pub(crate) ctx: Weak<Context>,
    sender: Mutex<Option<Sender<Job>>>,
    progress: Mutex<Progress>,
    done: Condvar,
    worker: Mutex<Option<ThreadId>>,
}

/// Every live created stream, by handle.
pub(crate) static STREAMS: Table<Stream> = Table::new(Tag::Stream);

impl Stream {
    /// A stream with a running worker thread. If the OS refuses a thread, the stream runs its
    /// work inline on the submitting thread instead: slower, same order, same results.
    pub(crate) fn spawn(handle: u64, flags: u32, priority: i32, ctx: Weak<Context>) -> Arc<Stream> {
        let (tx, rx) = channel::<Job>();
        let stream = Arc::new(Stream {
            handle,
            flags,
            priority,
            ctx,
            sender: Mutex::new(None),
            progress: Mutex::new(Progress::default()),
            done: Condvar::new(),
            worker: Mutex::new(None),
        });
        // The worker holds only a weak reference so that dropping the last handle ends it.
        let weak = Arc::downgrade(&stream);
        let spawned = std::thread::Builder::new()
            .name("softcuda-stream".into())
            .spawn(move || {
                for job in rx {
                    // A panicking job must still count as completed, or waiters hang forever.
                    let _ = catch_unwind(AssertUnwindSafe(job));
                    let Some(stream) = weak.upgrade() else { break };
                    let mut p = stream.lock_progress();
                    p.completed += 1;
                    stream.done.notify_all();
                }
            });
        if let Ok(worker) = spawned {
            *stream.worker.lock().unwrap_or_else(PoisonError::into_inner) =
                Some(worker.thread().id());
            *stream.sender.lock().unwrap_or_else(PoisonError::into_inner) = Some(tx);
        }
        stream
    }

    fn lock_progress(&self) -> MutexGuard<'_, Progress> {
        self.progress.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether the stream synchronizes with the legacy default stream.
    pub(crate) fn is_blocking(&self) -> bool {
        self.flags & NON_BLOCKING == 0
    }

    /// Queues `job`; returns its ticket. Without a worker (none could be started, or the stream
    /// is closed) the job runs here and now, after everything queued before it.
    pub(crate) fn submit(&self, job: Job) -> u64 {
        let sender = self.sender.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(tx) = sender.as_ref() {
            let mut p = self.lock_progress();
            p.submitted += 1;
            match tx.send(job) {
                Ok(()) => return p.submitted,
                Err(returned) => {
                    p.submitted -= 1;
                    drop(p);
                    drop(sender);
                    return self.run_inline(returned.0);
                }
            }
        }
        drop(sender);
        self.run_inline(job)
    }

    fn run_inline(&self, job: Job) -> u64 {
        let ticket = {
            let mut p = self.lock_progress();
            p.submitted += 1;
            p.submitted
        };
        self.wait_for(ticket - 1);
        let _ = catch_unwind(AssertUnwindSafe(job));
        let mut p = self.lock_progress();
        p.completed += 1;
        self.done.notify_all();
        ticket
    }

    /// The ticket of the last job submitted.
    pub(crate) fn last_ticket(&self) -> u64 {
        self.lock_progress().submitted
    }

    /// Whether every job up to `ticket` has run.
    pub(crate) fn is_done(&self, ticket: u64) -> bool {
        self.lock_progress().completed >= ticket
    }

    /// Whether work is queued or running.
    pub(crate) fn is_busy(&self) -> bool {
        let p = self.lock_progress();
        p.completed < p.submitted
    }

    /// Blocks until every job up to `ticket` has run. Called from this stream's own worker (a host
    /// function that synchronizes) it returns at once instead of deadlocking.
    pub(crate) fn wait_for(&self, ticket: u64) {
        if self.on_worker() {
            return;
        }
        let mut p = self.lock_progress();
        while p.completed < ticket {
            p = self.done.wait(p).unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// Blocks until everything submitted so far has run.
    pub(crate) fn synchronize(&self) {
        let ticket = self.last_ticket();
        self.wait_for(ticket);
    }

    fn on_worker(&self) -> bool {
        *self.worker.lock().unwrap_or_else(PoisonError::into_inner)
            == Some(std::thread::current().id())
    }

    /// Stops accepting work; the worker finishes what is queued, then exits.
    pub(crate) fn close(&self) {
        self.sender
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
    }
}

/// Whether `handle` names a default stream (NULL, `CU_STREAM_LEGACY`, `CU_STREAM_PER_THREAD`).
pub(crate) fn is_default(handle: u64) -> bool {
    matches!(handle, 0 | STREAM_LEGACY | STREAM_PER_THREAD)
}

thread_local! {
    /// Inside a `_ptsz` / `_ptds` export: NULL (and a synchronous call's implicit stream) means
    /// this thread's per-thread default stream.
    static PER_THREAD_DEFAULT: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f` (a legacy export's body) with the NULL stream meaning the calling thread's
/// per-thread default stream, as the `_ptsz` / `_ptds` variants of an export do.
pub(crate) fn per_thread_scope<R>(f: impl FnOnce() -> R) -> R {
    crate::abi::with_flag(&PER_THREAD_DEFAULT, f)
}

/// Whether `handle` means the calling thread's per-thread default stream: `CU_STREAM_PER_THREAD`
/// always, NULL inside [`per_thread_scope`].
fn is_per_thread(handle: u64) -> bool {
    handle == STREAM_PER_THREAD || (handle == 0 && PER_THREAD_DEFAULT.get())
}

/// The stream a default-stream handle means in `ctx`: the legacy stream, or this thread's
/// per-thread default stream (a blocking stream of its own, made on first use).
fn default_of(ctx: &Arc<Context>, handle: u64) -> Arc<Stream> {
    if is_per_thread(handle) {
        ctx.per_thread_stream()
    } else {
        Arc::clone(&ctx.null_stream)
    }
}

/// Where a synchronous call (a blocking copy or fill) runs in `ctx`: the legacy stream, or the
/// per-thread default stream inside [`per_thread_scope`].
pub(crate) fn implicit(ctx: &Arc<Context>) -> Arc<Stream> {
    default_of(ctx, 0)
}

/// The stream behind `handle` and its live context: a default stream is the current context's.
pub(crate) fn resolve(handle: u64) -> CuResult<(Arc<Context>, Arc<Stream>)> {
    if is_default(handle) {
        let ctx = crate::context::live()?;
        let s = default_of(&ctx, handle);
        return Ok((ctx, s));
    }
    crate::driver::ensure_init()?;
    let stream = STREAMS
        .get(handle)
        .ok_or(CUresult::CUDA_ERROR_INVALID_HANDLE)?;
    let ctx = stream
        .ctx
        .upgrade()
        .ok_or(CUresult::CUDA_ERROR_INVALID_HANDLE)?;
    ctx.check_usable()?;
    Ok((ctx, stream))
}

/// Like [`resolve`], but a context with a sticky error still resolves (synchronize and query
/// report the error after waiting).
pub(crate) fn resolve_any(handle: u64) -> CuResult<(Arc<Context>, Arc<Stream>)> {
    if is_default(handle) {
        let ctx = crate::context::current()?;
        if ctx.sticky().is_none() {
            ctx.check_usable()?;
        }
        let s = default_of(&ctx, handle);
        return Ok((ctx, s));
    }
    crate::driver::ensure_init()?;
    let stream = STREAMS
        .get(handle)
        .ok_or(CUresult::CUDA_ERROR_INVALID_HANDLE)?;
    let ctx = stream
        .ctx
        .upgrade()
        .ok_or(CUresult::CUDA_ERROR_INVALID_HANDLE)?;
    Ok((ctx, stream))
}

/// cuStreamCreate(WithPriority) in the current context; the priority is clamped to the range.
pub(crate) fn create(flags: u32, priority: i32) -> CuResult<u64> {
    let ctx = crate::context::live()?;
    if flags & !NON_BLOCKING != 0 {
        return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
    }
    let priority = priority.clamp(GREATEST_PRIORITY, LEAST_PRIORITY);
    Ok(ctx.add_stream(flags, priority).handle)
}

/// cuStreamDestroy: the handle dies now; queued work still runs.
pub(crate) fn destroy(handle: u64) -> CuResult<()> {
    crate::driver::ensure_init()?;
    if is_default(handle) {
        return Err(CUresult::CUDA_ERROR_INVALID_HANDLE);
    }
    let stream = STREAMS
        .remove(handle)
        .ok_or(CUresult::CUDA_ERROR_INVALID_HANDLE)?;
    if let Some(ctx) = stream.ctx.upgrade() {
        ctx.remove_stream(handle);
    }
    stream.close();
    Ok(())
}

/// The C callback and its argument, moved to the stream worker.
struct HostCall {
    f: unsafe extern "C" fn(*mut std::ffi::c_void),
    user_data: usize,
}

// SAFETY: cuLaunchHostFunc's contract is that the callback runs on a driver thread with
// `userData`; the pointer is passed through untouched, never dereferenced by softcuda.
unsafe impl Send for HostCall {}

/// cuLaunchHostFunc: runs the callback on the stream's worker, in order; skipped after a fault.
pub(crate) fn host_func(
    handle: u64,
    f: unsafe extern "C" fn(*mut std::ffi::c_void),
    user_data: usize,
) -> CuResult<()> {
    let (ctx, s) = resolve(handle)?;
    if let Some(capture) = crate::capture::active(handle) {
        let replay = move |s| host_func(s, f, user_data);
        return capture.add(
            handle,
            crate::graph::NodeKind::Call(Arc::new(replay), crate::graph::TYPE_HOST),
        );
    }
    let call = HostCall { f, user_data };
    let guard_ctx = Arc::clone(&ctx);
    ctx.submit(
        &s,
        Box::new(move || {
            if guard_ctx.sticky().is_none() {
                let call = call;
                // SAFETY: the caller supplied a callback valid for this argument (cuda.h
                // contract); it is called exactly once, as NVIDIA's driver does.
                crate::abi::in_host_call(|| unsafe {
                    (call.f)(std::ptr::with_exposed_provenance_mut(call.user_data))
                });
            }
        }),
    );
    Ok(())
}

/// A `CUstreamCallback` with its status parameter as the raw `CUresult` integer.
pub(crate) type StreamCallback = unsafe extern "C" fn(u64, u32, *mut std::ffi::c_void);

/// cuStreamAddCallback: like a host function, but called with the stream and the context's
/// error status, and called even after a fault (so the program learns of it), as NVIDIA's are.
pub(crate) fn add_callback(handle: u64, f: StreamCallback, user_data: usize) -> CuResult<()> {
    let (ctx, s) = resolve_any(handle)?;
    let guard_ctx = Arc::clone(&ctx);
    ctx.submit(
        &s,
        Box::new(move || {
            let status = guard_ctx.sticky().map_or(0, |code| code as u32);
            // SAFETY: the caller supplied a callback valid for these arguments (cuda.h
            // contract); it is called exactly once.
            crate::abi::in_host_call(|| unsafe {
                f(
                    handle,
                    status,
                    std::ptr::with_exposed_provenance_mut(user_data),
                )
            });
        }),
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[test]
    fn jobs_run_in_submission_order_and_tickets_complete() {
        let s = Stream::spawn(0, 0, 0, Weak::new());
        let log = Arc::new(Mutex::new(Vec::new()));
        for i in 0..50 {
            let log = Arc::clone(&log);
            s.submit(Box::new(move || log.lock().unwrap().push(i)));
        }
        s.synchronize();
        assert_eq!(*log.lock().unwrap(), (0..50).collect::<Vec<_>>());
        assert!(!s.is_busy());
    }

    #[test]
    fn panicking_job_still_completes_its_ticket() {
        let s = Stream::spawn(0, 0, 0, Weak::new());
        let hits = Arc::new(AtomicU32::new(0));
        s.submit(Box::new(|| panic!("job failed")));
        let h = Arc::clone(&hits);
        let t = s.submit(Box::new(move || {
            h.fetch_add(1, Ordering::SeqCst);
        }));
        s.wait_for(t);
        assert_eq!(hits.load(Ordering::SeqCst), 1);
    }
}
