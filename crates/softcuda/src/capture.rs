//! Stream capture: between cuStreamBeginCapture and cuStreamEndCapture, work queued on a
//! capturing stream is recorded as graph nodes instead of running. The nodes go straight into
//! the graph the capture ends with, made when it begins, so cuStreamGetCaptureInfo can hand out
//! that graph while it is being built (as NVIDIA's driver does: the program may read it, or add
//! nodes to it). Each capturing stream keeps
//! the nodes the next one depends on. An event recorded on a capturing stream carries that set;
//! a stream that waits on it joins the capture (fork) or merges the set (join). Ending the
//! capture requires every forked stream to have been joined back into the origin stream.
//!
//! Not captured (an error, as on NVIDIA's driver): synchronising or querying a capturing stream
//! (`CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED`, which also invalidates the capture), capturing the
//! legacy default stream, and waiting on an event recorded outside the capture
//! (`CUDA_ERROR_STREAM_CAPTURE_ISOLATION`).

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use cudarc::driver::sys::CUresult;

use crate::abi::CuResult;
use crate::graph::{self, NodeKind};

/// `CUstreamCaptureStatus`.
pub(crate) const STATUS_NONE: u32 = 0;
const STATUS_ACTIVE: u32 = 1;
const STATUS_INVALIDATED: u32 = 2;

/// One capture sequence.
pub(crate) struct Capture {
    /// Unique per capture (cuStreamGetCaptureInfo's id).
    pub(crate) id: u64,
    origin: u64,
    /// The graph being built (a graph handle, registered from the start).
    graph: u64,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Per capturing stream, the nodes its next node depends on.
    frontier: HashMap<u64, Vec<u64>>,
    invalidated: bool,
    /// The last dependency list handed out by cuStreamGetCaptureInfo (kept alive for the
    /// caller until the capture changes).
    shown: Vec<u64>,
}

/// Streams capturing now, by handle; and how many, so the common case takes no lock.
static STREAMS: Mutex<Option<HashMap<u64, Arc<Capture>>>> = Mutex::new(None);
static ACTIVE: AtomicUsize = AtomicUsize::new(0);
/// An event recorded during a capture: the capture's id and the recording stream's frontier.
type CapturedEvent = (u64, Vec<u64>);

/// Events recorded during a capture, by handle.
static EVENTS: Mutex<Option<HashMap<u64, CapturedEvent>>> = Mutex::new(None);
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every critical section is an insert, a removal or a scan; a panic cannot tear them.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Capture {
    fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    /// Records a node on capturing stream `stream` after its frontier; the node becomes the
    /// stream's frontier.
    pub(crate) fn add(&self, stream: u64, kind: NodeKind) -> CuResult<()> {
        let mut st = self.state();
        if st.invalidated {
            return Err(CUresult::CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
        }
        let deps = st.frontier.get(&stream).cloned().unwrap_or_default();
        // A graph the program destroyed mid-capture (NVIDIA forbids it) fails here.
        let node = graph::add_node(self.graph, &deps, kind)?;
        st.frontier.insert(stream, vec![node]);
        Ok(())
    }

    fn invalidate(&self) {
        self.state().invalidated = true;
    }
}

/// The capture `stream` is part of, if any.
pub(crate) fn active(stream: u64) -> Option<Arc<Capture>> {
    if ACTIVE.load(Ordering::Acquire) == 0 || crate::stream::is_default(stream) {
        return None;
    }
    lock(&STREAMS).as_ref()?.get(&stream).cloned()
}

fn join(stream: u64, capture: &Arc<Capture>) {
    let mut map = lock(&STREAMS);
    if map
        .get_or_insert_with(HashMap::new)
        .insert(stream, Arc::clone(capture))
        .is_none()
    {
        ACTIVE.fetch_add(1, Ordering::AcqRel);
    }
}

fn leave(stream: u64) {
    if lock(&STREAMS)
        .as_mut()
        .and_then(|m| m.remove(&stream))
        .is_some()
    {
        ACTIVE.fetch_sub(1, Ordering::AcqRel);
    }
}

/// cuStreamBeginCapture: `stream` starts recording (modes: global 0, thread-local 1, relaxed 2).
pub(crate) fn begin(stream: u64, mode: u32) -> CuResult<()> {
    if mode > 2 {
        return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
    }
    crate::stream::resolve(stream)?;
    if crate::stream::is_default(stream) {
        return Err(CUresult::CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    }
    if active(stream).is_some() {
        return Err(CUresult::CUDA_ERROR_ILLEGAL_STATE);
    }
    let capture = Arc::new(Capture {
        id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
        origin: stream,
        graph: graph::register(Vec::new(), false),
        state: Mutex::new(State::default()),
    });
    capture.state().frontier.insert(stream, Vec::new());
    join(stream, &capture);
    Ok(())
}

/// cuStreamEndCapture: the captured graph. Ends the capture on every stream in it; an
/// invalidated capture or a forked stream never joined back is an error, and the graph is
/// destroyed.
pub(crate) fn end(stream: u64) -> CuResult<u64> {
    crate::stream::resolve_any(stream)?;
    let capture = active(stream).ok_or(CUresult::CUDA_ERROR_ILLEGAL_STATE)?;
    if capture.origin != stream {
        return Err(CUresult::CUDA_ERROR_STREAM_CAPTURE_UNMATCHED);
    }
    let st = std::mem::take(&mut *capture.state());
    for s in st.frontier.keys() {
        leave(*s);
    }
    if let Some(events) = lock(&EVENTS).as_mut() {
        events.retain(|_, (id, _)| *id != capture.id);
    }
    let failed = |e: CUresult| {
        // Already gone if the program destroyed it mid-capture.
        let _ = graph::destroy(capture.graph);
        Err(e)
    };
    if st.invalidated || graph::nodes(capture.graph).is_err() {
        return failed(CUresult::CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    }
    // Every node a forked stream ended on must precede the origin's frontier.
    let mut before: HashSet<u64> = HashSet::new();
    let mut todo: Vec<u64> = st.frontier.get(&stream).cloned().unwrap_or_default();
    while let Some(n) = todo.pop() {
        if before.insert(n) {
            todo.extend(graph::dependencies(n).unwrap_or_default());
        }
    }
    let unjoined = st
        .frontier
        .iter()
        .any(|(s, f)| *s != stream && f.iter().any(|n| !before.contains(n)));
    if unjoined {
        return failed(CUresult::CUDA_ERROR_STREAM_CAPTURE_UNJOINED);
    }
    Ok(capture.graph)
}

/// cuStreamIsCapturing / cuStreamGetCaptureInfo's status and id.
pub(crate) fn status(stream: u64) -> CuResult<(u32, u64)> {
    crate::stream::resolve_any(stream)?;
    Ok(match active(stream) {
        None => (STATUS_NONE, 0),
        Some(c) if c.state().invalidated => (STATUS_INVALIDATED, c.id),
        Some(c) => (STATUS_ACTIVE, c.id),
    })
}

/// cuStreamGetCaptureInfo's graph being built, and its dependency list: a pointer valid until
/// the capture next changes, and its length.
pub(crate) fn progress(stream: u64) -> Option<(u64, *const u64, usize)> {
    let c = active(stream)?;
    let mut st = c.state();
    st.shown = st.frontier.get(&stream).cloned().unwrap_or_default();
    Some((c.graph, st.shown.as_ptr(), st.shown.len()))
}

/// Called by an operation a capturing stream cannot take (synchronize, query): invalidates
/// the capture and answers `CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED`.
pub(crate) fn refuse(stream: u64) -> CuResult<()> {
    match active(stream) {
        Some(c) => {
            c.invalidate();
            Err(CUresult::CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED)
        }
        None => Ok(()),
    }
}

/// cuEventRecord on a capturing stream: the event carries the stream's frontier.
pub(crate) fn record_event(event: u64, capture: &Capture, stream: u64) {
    let frontier = capture
        .state()
        .frontier
        .get(&stream)
        .cloned()
        .unwrap_or_default();
    lock(&EVENTS)
        .get_or_insert_with(HashMap::new)
        .insert(event, (capture.id, frontier));
}

/// cuEventRecord outside a capture: the event no longer carries a capture's frontier.
pub(crate) fn forget_event(event: u64) {
    if let Some(events) = lock(&EVENTS).as_mut() {
        events.remove(&event);
    }
}

/// cuStreamWaitEvent when a capture is involved: `Ok(true)` when handled here (a fork, a join,
/// or a capturing stream waiting on an event never recorded: nothing to wait for), `Ok(false)`
/// when neither the event nor the stream is part of a capture.
pub(crate) fn wait_event(stream: u64, event: u64, ever_recorded: bool) -> CuResult<bool> {
    let recorded = lock(&EVENTS).as_ref().and_then(|m| m.get(&event).cloned());
    let here = active(stream);
    match (recorded, here) {
        (None, None) => Ok(false),
        (None, Some(_)) if !ever_recorded => Ok(true),
        (None, Some(c)) => {
            c.invalidate();
            Err(CUresult::CUDA_ERROR_STREAM_CAPTURE_ISOLATION)
        }
        (Some((id, deps)), here) => {
            let capture = match here {
                Some(c) if c.id == id => c,
                Some(c) => {
                    c.invalidate();
                    return Err(CUresult::CUDA_ERROR_STREAM_CAPTURE_ISOLATION);
                }
                None => {
                    let Some(c) = capture_by_id(id) else {
                        return Ok(false);
                    };
                    c.state().frontier.insert(stream, Vec::new());
                    join(stream, &c);
                    c
                }
            };
            let mut st = capture.state();
            let f = st.frontier.entry(stream).or_default();
            for d in deps {
                if !f.contains(&d) {
                    f.push(d);
                }
            }
            Ok(true)
        }
    }
}

fn capture_by_id(id: u64) -> Option<Arc<Capture>> {
    lock(&STREAMS)
        .as_ref()?
        .values()
        .find(|c| c.id == id)
        .cloned()
}

/// Whether any stream of context `ctx_id` is capturing (cuCtxSynchronize is refused then).
pub(crate) fn any_in(streams: &[u64]) -> bool {
    ACTIVE.load(Ordering::Acquire) != 0 && streams.iter().any(|s| active(*s).is_some())
}
