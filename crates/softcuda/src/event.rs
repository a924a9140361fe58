//! Events: markers recorded into a stream. An event is complete when its stream has run
//! everything before the marker; the marker takes a monotonic timestamp when it runs, which is
//! what cuEventElapsedTime subtracts.
//!
//! Lock order: an event's `state`, then its `stamp`. The marker takes only `stamp`, because a
//! stream that is closed (destroyed, or its context reset) runs a submitted marker inline on the
//! recording thread, which still holds `state`.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use cudarc::driver::sys::CUresult;

use crate::abi::CuResult;
use crate::context;
use crate::driver::Tag;
use crate::handles::Table;
use crate::stream::{self, Job, Stream};

/// `CU_EVENT_DISABLE_TIMING`.
const DISABLE_TIMING: u32 = 2;
/// Every flag cuEventCreate accepts (DEFAULT, BLOCKING_SYNC, DISABLE_TIMING, INTERPROCESS).
const KNOWN_FLAGS: u32 = 0x7;

#[derive(Default)]
struct State {
    /// The stream and ticket of the latest record.
    recorded: Option<(Arc<Stream>, u64)>,
    /// Counts records, so a marker from an older record cannot stamp a newer one.
    generation: u64,
}

/// (generation, time) stamped by the latest marker that ran.
type Stamp = Option<(u64, Instant)>;

/// One event.
pub(crate) struct Event {
    ctx_id: u64,
    flags: u32,
    state: Mutex<State>,
    stamp: Mutex<Stamp>,
}

static EVENTS: Table<Event> = Table::new(Tag::Event);

impl Event {
    /// A new event of context `ctx_id`, never recorded.
    fn new(ctx_id: u64, flags: u32) -> Self {
        Event {
            ctx_id,
            flags,
            state: Mutex::new(State::default()),
            stamp: Mutex::new(None),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn lock_stamp(&self) -> MutexGuard<'_, Stamp> {
        self.stamp.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records on `stream`: `submit` queues the timestamping marker there and returns its ticket.
    /// Holding the state lock across `submit` keeps `generation` and the ticket consistent when
    /// two threads record the same event; the marker may run inside `submit` (see the header).
    fn record_on(self: &Arc<Self>, stream: Arc<Stream>, submit: impl FnOnce(Job) -> u64) {
        let mut state = self.lock();
        state.generation += 1;
        let generation = state.generation;
        let marker = Arc::clone(self);
        let ticket = submit(Box::new(move || {
            let now = Instant::now();
            let mut stamp = marker.lock_stamp();
            if stamp.is_none_or(|(g, _)| g < generation) {
                *stamp = Some((generation, now));
            }
        }));
        state.recorded = Some((stream, ticket));
    }

    /// (stream, ticket) of the latest record, if any.
    pub(crate) fn recorded(&self) -> Option<(Arc<Stream>, u64)> {
        self.lock().recorded.clone()
    }

    fn is_complete(&self) -> bool {
        match self.recorded() {
            None => true,
            Some((stream, ticket)) => stream.is_done(ticket),
        }
    }
}

/// cuEventCreate in the current context.
pub(crate) fn create(flags: u32) -> CuResult<u64> {
    let ctx = context::live()?;
    if flags & !KNOWN_FLAGS != 0 {
        return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
    }
    let (handle, _) = EVENTS.insert_with(|_| Arc::new(Event::new(ctx.id, flags)));
    Ok(handle)
}

/// The live event behind `handle`.
pub(crate) fn get(handle: u64) -> CuResult<Arc<Event>> {
    crate::driver::ensure_init()?;
    EVENTS
        .get(handle)
        .ok_or(CUresult::CUDA_ERROR_INVALID_HANDLE)
}

/// cuEventDestroy: a pending record still completes; the handle is dead at once.
pub(crate) fn destroy(handle: u64) -> CuResult<()> {
    crate::driver::ensure_init()?;
    EVENTS
        .remove(handle)
        .map(drop)
        .ok_or(CUresult::CUDA_ERROR_INVALID_HANDLE)
}

/// cuEventRecord: queues a timestamping marker on the stream.
pub(crate) fn record(handle: u64, stream_handle: u64) -> CuResult<()> {
    let event = get(handle)?;
    let (ctx, stream) = stream::resolve(stream_handle)?;
    if ctx.id != event.ctx_id {
        return Err(CUresult::CUDA_ERROR_INVALID_HANDLE);
    }
    if let Some(capture) = crate::capture::active(stream_handle) {
        crate::capture::record_event(handle, &capture, stream_handle);
        return Ok(());
    }
    crate::capture::forget_event(handle);
    event.record_on(Arc::clone(&stream), |job| ctx.submit(&stream, job));
    Ok(())
}

/// cuEventQuery: `CUDA_ERROR_NOT_READY` until the marker has run; an event never recorded is
/// complete; a faulted context answers with its sticky error.
pub(crate) fn query(handle: u64) -> CuResult<()> {
    let event = get(handle)?;
    if let Some(ctx) = context::by_id(event.ctx_id) {
        ctx.check_usable()?;
    }
    if event.is_complete() {
        Ok(())
    } else {
        Err(CUresult::CUDA_ERROR_NOT_READY)
    }
}

/// cuEventSynchronize: waits for the marker, then reports the context's sticky error if any.
pub(crate) fn synchronize(handle: u64) -> CuResult<()> {
    let event = get(handle)?;
    if let Some((stream, ticket)) = event.recorded() {
        stream.wait_for(ticket);
        if let Some(ctx) = stream.ctx.upgrade() {
            ctx.printf.flush();
            ctx.check_usable()?;
        }
    }
    Ok(())
}

/// cuEventElapsedTime in milliseconds. As in NVIDIA's driver: an event never recorded or created
/// with `CU_EVENT_DISABLE_TIMING` is `CUDA_ERROR_INVALID_HANDLE`; one not yet complete is
/// `CUDA_ERROR_NOT_READY`.
pub(crate) fn elapsed_ms(start: u64, end: u64) -> CuResult<f32> {
    let (start, end) = (get(start)?, get(end)?);
    let mut stamps = [None, None];
    for (slot, ev) in stamps.iter_mut().zip([&start, &end]) {
        if ev.flags & DISABLE_TIMING != 0 {
            return Err(CUresult::CUDA_ERROR_INVALID_HANDLE);
        }
        let s = ev.lock();
        let Some((stream, ticket)) = &s.recorded else {
            return Err(CUresult::CUDA_ERROR_INVALID_HANDLE);
        };
        if !stream.is_done(*ticket) {
            return Err(CUresult::CUDA_ERROR_NOT_READY);
        }
        match *ev.lock_stamp() {
            Some((g, t)) if g == s.generation => *slot = Some(t),
            // Complete but unstamped: the stream was torn down before the marker ran.
            _ => return Err(CUresult::CUDA_ERROR_INVALID_HANDLE),
        }
    }
    let (Some(t0), Some(t1)) = (stamps[0], stamps[1]) else {
        return Err(CUresult::CUDA_ERROR_INVALID_HANDLE);
    };
    let ms = if t1 >= t0 {
        t1.duration_since(t0).as_secs_f64() * 1e3
    } else {
        -(t0.duration_since(t1).as_secs_f64() * 1e3)
    };
    Ok(ms as f32)
}

/// cuStreamWaitEvent: later work on `stream_handle` waits for the event's latest record.
pub(crate) fn stream_wait(stream_handle: u64, handle: u64, flags: u32) -> CuResult<()> {
    let event = get(handle)?;
    if flags & !1 != 0 {
        return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
    }
    let (ctx, stream) = stream::resolve(stream_handle)?;
    if crate::capture::wait_event(stream_handle, handle, event.recorded().is_some())? {
        return Ok(());
    }
    let Some((source, ticket)) = event.recorded() else {
        return Ok(());
    };
    if Arc::ptr_eq(&source, &stream) {
        return Ok(());
    }
    ctx.submit(&stream, Box::new(move || source.wait_for(ticket)));
    Ok(())
}

/// Drops every event of a destroyed context.
pub(crate) fn release_context(ctx_id: u64) {
    EVENTS.remove_where(|e| e.ctx_id == ctx_id);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Weak;
    use std::sync::mpsc::channel;
    use std::time::Duration;

    #[test]
    fn recording_on_a_closed_stream_stamps_the_event_without_deadlocking() {
        let event = Arc::new(Event::new(0, 0));
        let stream = Stream::spawn(1, 0, 0, Weak::new());
        // Closed, as a destroyed stream or a reset context leaves it: submit runs jobs inline.
        stream.close();
        let (done, finished) = channel();
        let recorder = Arc::clone(&event);
        std::thread::spawn(move || {
            recorder.record_on(Arc::clone(&stream), |job| stream.submit(job));
            let _ = done.send(());
        });
        finished
            .recv_timeout(Duration::from_secs(10))
            .expect("cuEventRecord on a closed stream deadlocked");
        let (stream, ticket) = event.recorded().expect("the record was kept");
        assert!(stream.is_done(ticket));
        assert_eq!(event.lock_stamp().map(|(g, _)| g), Some(1));
    }
}
