//! Contexts: the primary context (reference-counted, one stable handle value per device), created
//! contexts, each thread's current-context stack, the sticky error, and the legacy-default-stream
//! ordering rules that tie a context's streams together.
//!
//! A kernel fault poisons the device for the rest of the process, as on NVIDIA's driver (seen on
//! an H200, driver 580): release, reset and destroy do not clear it, and cuDevicePrimaryCtxRetain
//! and cuCtxCreate return the fault's code from then on. Only a new process recovers.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::thread::ThreadId;

use cudarc::driver::sys::CUresult;

use crate::abi::CuResult;
use crate::driver::{self, Tag};
use crate::handles::Table;
use crate::stream::{self, Job, Stream};

/// The handle value of a device's primary context: the same for every (re)creation, as
/// NVIDIA's. Ids 1..=MAX_DEVICES sit below every handle `driver::new_handle` draws.
pub(crate) fn primary_handle(device: i32) -> u64 {
    ((device as u64 + 1) << 4) | Tag::Context as u64
}

/// The device whose primary handle `handle` is, if it is one.
fn primary_device(handle: u64) -> Option<i32> {
    let id = handle >> 4;
    let device = i32::try_from(id.checked_sub(1)?).ok()?;
    (handle == primary_handle(device) && device < driver::device_count()).then_some(device)
}

/// Value cuCtxGetApiVersion reports (what NVIDIA's driver reports for every context).
pub(crate) const API_VERSION: u32 = 3020;

/// `CU_LIMIT_*` count and defaults (stack, printf FIFO, malloc heap, sync depth, pending
/// launches, L2 fetch granularity, persisting L2) as NVIDIA reports them on an H200.
const LIMIT_DEFAULTS: [u64; 7] = [1024, 1 << 20, 8 << 20, 2, 2048, 32, 0];

/// Index of `CU_LIMIT_PRINTF_FIFO_SIZE`.
const PRINTF_FIFO_LIMIT: usize = 1;

static NEXT_CTX_ID: AtomicU64 = AtomicU64::new(1);

/// The device's fault (code and description): set by the first kernel fault in any context and
/// never cleared, because NVIDIA's driver cannot recover a faulted device within the process.
static DEVICE_FAULT: [Mutex<Option<(CUresult, String)>>; driver::MAX_DEVICES] =
    [const { Mutex::new(None) }; driver::MAX_DEVICES];

fn fault_slot(device: i32) -> &'static Mutex<Option<(CUresult, String)>> {
    &DEVICE_FAULT[usize::try_from(device).unwrap_or(0) % driver::MAX_DEVICES]
}

/// The device's fault code, if a kernel has faulted on it in this process.
pub(crate) fn device_fault(device: i32) -> Option<CUresult> {
    lock(fault_slot(device)).as_ref().map(|(code, _)| *code)
}

/// The description of the first device fault (for `softcuda_last_fault`).
pub(crate) fn device_fault_message() -> Option<String> {
    DEVICE_FAULT
        .iter()
        .find_map(|d| lock(d).as_ref().map(|(_, msg)| msg.clone()))
}

/// Fails with the device's fault, if any.
fn check_device(device: i32) -> CuResult<()> {
    device_fault(device).map_or(Ok(()), Err)
}

/// One context: what it owns is found through the handle tables by its `id`.
pub(crate) struct Context {
    /// The C handle value.
    pub(crate) handle: u64,
    /// Unique per creation (cuCtxGetId); objects record it to say which context owns them.
    pub(crate) id: u64,
    /// The device ordinal.
    pub(crate) device: i32,
    /// Ids of the contexts whose memory this one's kernels may use (cuCtxEnablePeerAccess).
    peers: Mutex<Vec<u64>>,
    flags: AtomicU32,
    destroyed: AtomicBool,
    sticky: Mutex<Option<(CUresult, String)>>,
    limits: Mutex<[u64; 7]>,
    cache_config: AtomicU32,
    /// The legacy default stream.
    pub(crate) null_stream: Arc<Stream>,
    streams: Mutex<Vec<Arc<Stream>>>,
    /// Each thread's per-thread default stream (`CU_STREAM_PER_THREAD`), made on first use.
    per_thread: Mutex<HashMap<ThreadId, Arc<Stream>>>,
    /// Serializes submissions so that the legacy-stream dependencies captured are consistent.
    submit_lock: Mutex<()>,
    /// Device printf output not yet printed.
    pub(crate) printf: crate::printf::Fifo,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every critical section here is a plain read or assignment; a panic cannot tear the data.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Context {
    fn create(handle: u64, device: i32, flags: u32) -> Arc<Context> {
        Arc::new_cyclic(|weak| Context {
            handle,
            id: NEXT_CTX_ID.fetch_add(1, Ordering::Relaxed),
            device,
            peers: Mutex::new(Vec::new()),
            flags: AtomicU32::new(flags),
            destroyed: AtomicBool::new(false),
            sticky: Mutex::new(None),
            limits: Mutex::new(LIMIT_DEFAULTS),
            cache_config: AtomicU32::new(0),
            null_stream: Stream::spawn(0, 0, 0, weak.clone()),
            streams: Mutex::new(Vec::new()),
            per_thread: Mutex::new(HashMap::new()),
            submit_lock: Mutex::new(()),
            printf: crate::printf::Fifo::default(),
        })
    }

    /// Flags given at creation or by cuCtxSetFlags / cuDevicePrimaryCtxSetFlags.
    pub(crate) fn flags(&self) -> u32 {
        self.flags.load(Ordering::Relaxed)
    }

    /// Replaces the flags.
    pub(crate) fn set_flags(&self, flags: u32) {
        self.flags.store(flags, Ordering::Relaxed);
    }

    /// The sticky error (a kernel fault in this context, else the device's), if one happened.
    pub(crate) fn sticky(&self) -> Option<CUresult> {
        lock(&self.sticky)
            .as_ref()
            .map(|(code, _)| *code)
            .or_else(|| device_fault(self.device))
    }

    /// The message describing the sticky error.
    pub(crate) fn sticky_message(&self) -> Option<String> {
        lock(&self.sticky)
            .as_ref()
            .map(|(_, msg)| msg.clone())
            .or_else(|| {
                lock(fault_slot(self.device))
                    .as_ref()
                    .map(|(_, m)| m.clone())
            })
    }

    /// Records a fault; the first one wins and every later call in the context returns it. The
    /// device keeps the first fault of the process, so every other context fails too.
    pub(crate) fn poison(&self, code: CUresult, message: String) {
        let mut s = lock(&self.sticky);
        if s.is_none() {
            *s = Some((code, message.clone()));
        }
        let mut d = lock(fault_slot(self.device));
        if d.is_none() {
            *d = Some((code, message));
        }
    }

    /// Fails with the sticky error or `CUDA_ERROR_CONTEXT_IS_DESTROYED`.
    pub(crate) fn check_usable(&self) -> CuResult<()> {
        if self.destroyed.load(Ordering::Acquire) {
            return Err(CUresult::CUDA_ERROR_CONTEXT_IS_DESTROYED);
        }
        match self.sticky() {
            Some(code) => Err(code),
            None => Ok(()),
        }
    }

    /// A `CU_LIMIT_*` value; unknown limits are `CUDA_ERROR_UNSUPPORTED_LIMIT`.
    pub(crate) fn limit(&self, which: u32) -> CuResult<u64> {
        lock(&self.limits)
            .get(which as usize)
            .copied()
            .ok_or(CUresult::CUDA_ERROR_UNSUPPORTED_LIMIT)
    }

    /// Sets a `CU_LIMIT_*` value.
    pub(crate) fn set_limit(&self, which: u32, value: u64) -> CuResult<()> {
        let mut limits = lock(&self.limits);
        let slot = limits
            .get_mut(which as usize)
            .ok_or(CUresult::CUDA_ERROR_UNSUPPORTED_LIMIT)?;
        *slot = value;
        Ok(())
    }

    /// The cache preference (`CUfunc_cache`), recorded only.
    pub(crate) fn cache_config(&self) -> u32 {
        self.cache_config.load(Ordering::Relaxed)
    }

    /// Records a cache preference.
    pub(crate) fn set_cache_config(&self, config: u32) -> CuResult<()> {
        if config > 3 {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        }
        self.cache_config.store(config, Ordering::Relaxed);
        Ok(())
    }

    /// Creates a stream owned by this context.
    pub(crate) fn add_stream(self: &Arc<Self>, flags: u32, priority: i32) -> Arc<Stream> {
        let weak = Arc::downgrade(self);
        let (_, stream) = stream::STREAMS.insert_with(|h| Stream::spawn(h, flags, priority, weak));
        lock(&self.streams).push(Arc::clone(&stream));
        stream
    }

    /// The calling thread's per-thread default stream: a blocking stream (it synchronizes with
    /// the legacy stream, as NVIDIA documents, but not with other streams), made on first use.
    /// It is closed when the thread exits (queued work still runs), as NVIDIA's is.
    pub(crate) fn per_thread_stream(self: &Arc<Self>) -> Arc<Stream> {
        let mut map = lock(&self.per_thread);
        let id = std::thread::current().id();
        if let Some(s) = map.get(&id) {
            return Arc::clone(s);
        }
        let s = self.add_stream(0, 0);
        map.insert(id, Arc::clone(&s));
        // Unavailable only while the thread is already exiting: the stream then lives as long
        // as the context.
        let _ = PER_THREAD_STREAMS.try_with(|owned| {
            owned.contexts.borrow_mut().push(Arc::downgrade(self));
        });
        s
    }

    /// Closes thread `id`'s per-thread default stream, if it has one here.
    fn close_per_thread_stream(&self, id: ThreadId) {
        let Some(s) = lock(&self.per_thread).remove(&id) else {
            return;
        };
        self.remove_stream(s.handle);
        stream::STREAMS.remove(s.handle);
        s.close();
    }

    /// Forgets a created stream (its queued work still runs).
    pub(crate) fn remove_stream(&self, handle: u64) {
        lock(&self.streams).retain(|s| s.handle != handle);
    }

    /// Queues `job` on `stream` with the legacy default stream's rules: work on the NULL stream
    /// waits for all earlier work on blocking streams, and work on a blocking stream waits for
    /// earlier NULL-stream work. Returns the job's ticket.
    pub(crate) fn submit(&self, stream: &Arc<Stream>, job: Job) -> u64 {
        let _serial = lock(&self.submit_lock);
        let mut deps: Vec<(Arc<Stream>, u64)> = Vec::new();
        if Arc::ptr_eq(stream, &self.null_stream) {
            for s in lock(&self.streams).iter() {
                if s.is_blocking() && s.is_busy() {
                    deps.push((Arc::clone(s), s.last_ticket()));
                }
            }
        } else if stream.is_blocking() && self.null_stream.is_busy() {
            deps.push((
                Arc::clone(&self.null_stream),
                self.null_stream.last_ticket(),
            ));
        }
        if deps.is_empty() {
            return stream.submit(job);
        }
        stream.submit(Box::new(move || {
            for (s, ticket) in deps {
                s.wait_for(ticket);
            }
            job();
        }))
    }

    /// Waits for every stream of the context, prints pending device printf output, then reports
    /// the sticky error if any.
    pub(crate) fn synchronize(&self) -> CuResult<()> {
        let streams: Vec<Arc<Stream>> = lock(&self.streams).clone();
        let handles: Vec<u64> = streams.iter().map(|s| s.handle).collect();
        if crate::capture::any_in(&handles) {
            return Err(CUresult::CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
        }
        self.null_stream.synchronize();
        for s in streams {
            s.synchronize();
        }
        self.printf.flush();
        self.check_usable()
    }

    /// The ids of the contexts whose allocations this context's kernels may touch: its own and
    /// its peers'.
    pub(crate) fn visible_ids(&self) -> Vec<u64> {
        let mut ids = lock(&self.peers).clone();
        ids.push(self.id);
        ids
    }

    /// cuCtxEnablePeerAccess from this context to `peer` (a context of another device).
    pub(crate) fn enable_peer(&self, peer: &Context) -> CuResult<()> {
        if peer.device == self.device {
            return Err(CUresult::CUDA_ERROR_PEER_ACCESS_UNSUPPORTED);
        }
        let mut peers = lock(&self.peers);
        if peers.contains(&peer.id) {
            return Err(CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED);
        }
        peers.push(peer.id);
        Ok(())
    }

    /// cuCtxDisablePeerAccess.
    pub(crate) fn disable_peer(&self, peer: &Context) -> CuResult<()> {
        let mut peers = lock(&self.peers);
        let before = peers.len();
        peers.retain(|id| *id != peer.id);
        if peers.len() == before {
            return Err(CUresult::CUDA_ERROR_PEER_ACCESS_NOT_ENABLED);
        }
        Ok(())
    }

    /// Room left in the device printf FIFO (`CU_LIMIT_PRINTF_FIFO_SIZE` minus what is pending).
    pub(crate) fn printf_room(&self) -> u64 {
        self.printf.room(lock(&self.limits)[PRINTF_FIFO_LIMIT])
    }

    /// Destroys the context: waits for its work, stops its streams, and frees everything it
    /// owns (modules, functions, events, memory).
    fn teardown(&self) {
        self.null_stream.synchronize();
        let streams: Vec<Arc<Stream>> = std::mem::take(&mut *lock(&self.streams));
        for s in &streams {
            s.synchronize();
            s.close();
            stream::STREAMS.remove(s.handle);
        }
        self.null_stream.close();
        self.printf.flush();
        self.destroyed.store(true, Ordering::Release);
        crate::event::release_context(self.id);
        crate::module::release_context(self.id);
        crate::memory::release_context(self.id);
    }
}

/// A device's primary context: its retain count, the live instance, and the flags it is (or
/// will be) created with.
struct Primary {
    refcount: u32,
    live: Option<Arc<Context>>,
    flags: u32,
}

static PRIMARY: [Mutex<Primary>; driver::MAX_DEVICES] = [const {
    Mutex::new(Primary {
        refcount: 0,
        live: None,
        flags: 0,
    })
}; driver::MAX_DEVICES];

/// The primary-context slot of a checked device ordinal.
fn primary(device: i32) -> MutexGuard<'static, Primary> {
    lock(&PRIMARY[usize::try_from(device).unwrap_or(0) % driver::MAX_DEVICES])
}

/// Contexts made by cuCtxCreate, by handle.
static CREATED: Table<Context> = Table::new(Tag::Context);

/// The contexts where a thread has a per-thread default stream; dropped as the thread exits,
/// closing those streams.
struct PerThreadStreams {
    thread: ThreadId,
    contexts: RefCell<Vec<Weak<Context>>>,
}

impl Drop for PerThreadStreams {
    fn drop(&mut self) {
        for ctx in self.contexts.borrow().iter().filter_map(Weak::upgrade) {
            ctx.close_per_thread_stream(self.thread);
        }
    }
}

thread_local! {
    static PER_THREAD_STREAMS: PerThreadStreams = PerThreadStreams {
        thread: std::thread::current().id(),
        contexts: RefCell::new(Vec::new()),
    };
    /// This thread's context stack; the last entry is the current context.
    static STACK: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) };
}

/// cuDevicePrimaryCtxRetain: creates the primary context if it is not active; a faulted device
/// answers with its fault and takes no reference.
pub(crate) fn primary_retain(device: i32) -> CuResult<u64> {
    driver::ensure_init()?;
    check_device(device)?;
    let mut p = primary(device);
    p.refcount = p
        .refcount
        .checked_add(1)
        .ok_or(CUresult::CUDA_ERROR_INVALID_VALUE)?;
    if p.live.is_none() {
        p.live = Some(Context::create(primary_handle(device), device, p.flags));
    }
    Ok(primary_handle(device))
}

/// cuDevicePrimaryCtxRelease: destroys the primary context when the count reaches zero.
pub(crate) fn primary_release(device: i32) -> CuResult<()> {
    driver::ensure_init()?;
    let doomed = {
        let mut p = primary(device);
        if p.refcount == 0 {
            return Err(CUresult::CUDA_ERROR_INVALID_CONTEXT);
        }
        p.refcount -= 1;
        if p.refcount == 0 { p.live.take() } else { None }
    };
    if let Some(ctx) = doomed {
        ctx.teardown();
    }
    Ok(())
}

/// cuDevicePrimaryCtxReset: destroys the primary context and everything in it now; the next
/// retain creates a fresh one under the same handle value (unless the device has faulted, which
/// a reset does not clear).
pub(crate) fn primary_reset(device: i32) -> CuResult<()> {
    driver::ensure_init()?;
    let doomed = {
        let mut p = primary(device);
        p.refcount = 0;
        p.live.take()
    };
    if let Some(ctx) = doomed {
        ctx.teardown();
    }
    Ok(())
}

/// cuDevicePrimaryCtxGetState: (flags, active).
pub(crate) fn primary_state(device: i32) -> CuResult<(u32, bool)> {
    driver::ensure_init()?;
    let p = primary(device);
    Ok((p.flags, p.live.is_some()))
}

/// cuDevicePrimaryCtxSetFlags: recorded for the next creation and applied to a live instance.
pub(crate) fn primary_set_flags(device: i32, flags: u32) -> CuResult<()> {
    driver::ensure_init()?;
    check_flags(flags)?;
    let mut p = primary(device);
    p.flags = flags;
    if let Some(ctx) = &p.live {
        ctx.set_flags(flags);
    }
    Ok(())
}

/// Valid `CU_CTX_*` flags: a scheduling mode (0..=4, not 3) plus MAP_HOST (8), LMEM_RESIZE (16),
/// COREDUMP (32), USER_COREDUMP (64), SYNC_MEMOPS (128).
fn check_flags(flags: u32) -> CuResult<()> {
    if flags & !0xff != 0 || flags & 0x7 == 3 || flags & 0x7 > 4 {
        return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
    }
    Ok(())
}

/// The context behind `handle`: a primary handle resolves to its live instance or
/// `CUDA_ERROR_CONTEXT_IS_DESTROYED`; a destroyed created context is `CUDA_ERROR_INVALID_CONTEXT`.
pub(crate) fn resolve(handle: u64) -> CuResult<Arc<Context>> {
    driver::ensure_init()?;
    if let Some(device) = primary_device(handle) {
        return primary(device)
            .live
            .clone()
            .ok_or(CUresult::CUDA_ERROR_CONTEXT_IS_DESTROYED);
    }
    CREATED
        .get(handle)
        .ok_or(CUresult::CUDA_ERROR_INVALID_CONTEXT)
}

/// Whether `handle` can be made current: a primary handle (even while destroyed, as NVIDIA
/// accepts) or a live created context.
fn settable(handle: u64) -> bool {
    primary_device(handle).is_some() || CREATED.get(handle).is_some()
}

/// The handle on top of this thread's stack (0 when none).
pub(crate) fn current_handle() -> u64 {
    STACK.with(|s| s.borrow().last().copied().unwrap_or(0))
}

/// The current context, even one with a sticky error (for queries).
pub(crate) fn current() -> CuResult<Arc<Context>> {
    driver::ensure_init()?;
    match current_handle() {
        0 => Err(CUresult::CUDA_ERROR_INVALID_CONTEXT),
        h => resolve(h),
    }
}

/// The current context, ready for work: not destroyed and without a sticky error.
pub(crate) fn live() -> CuResult<Arc<Context>> {
    let ctx = current()?;
    ctx.check_usable()?;
    Ok(ctx)
}

/// cuCtxSetCurrent: replaces the top of the stack (NULL pops it). The primary handle is accepted
/// even while its context is destroyed, as NVIDIA's driver does; calls made with it then fail.
pub(crate) fn set_current(handle: u64) -> CuResult<()> {
    driver::ensure_init()?;
    if handle != 0 && !settable(handle) {
        return Err(CUresult::CUDA_ERROR_INVALID_CONTEXT);
    }
    STACK.with(|s| {
        let mut s = s.borrow_mut();
        s.pop();
        if handle != 0 {
            s.push(handle);
        }
    });
    Ok(())
}

/// cuCtxPushCurrent.
pub(crate) fn push_current(handle: u64) -> CuResult<()> {
    driver::ensure_init()?;
    if !settable(handle) {
        return Err(CUresult::CUDA_ERROR_INVALID_CONTEXT);
    }
    STACK.with(|s| s.borrow_mut().push(handle));
    Ok(())
}

/// cuCtxPopCurrent: the handle popped; an empty stack is `CUDA_ERROR_INVALID_CONTEXT`.
pub(crate) fn pop_current() -> CuResult<u64> {
    driver::ensure_init()?;
    STACK
        .with(|s| s.borrow_mut().pop())
        .ok_or(CUresult::CUDA_ERROR_INVALID_CONTEXT)
}

/// cuCtxCreate: a new context, pushed on this thread's stack; a faulted device answers with its
/// fault.
pub(crate) fn create(flags: u32, device: i32) -> CuResult<u64> {
    driver::ensure_init()?;
    check_flags(flags)?;
    check_device(device)?;
    let (handle, _) = CREATED.insert_with(|h| Context::create(h, device, flags));
    STACK.with(|s| s.borrow_mut().push(handle));
    Ok(handle)
}

/// cuCtxDestroy: destroys a created context (the primary context is destroyed only through
/// release/reset) and pops it if it is current on this thread.
pub(crate) fn destroy(handle: u64) -> CuResult<()> {
    driver::ensure_init()?;
    if handle == 0 || primary_device(handle).is_some() {
        return Err(CUresult::CUDA_ERROR_INVALID_CONTEXT);
    }
    let ctx = CREATED
        .remove(handle)
        .ok_or(CUresult::CUDA_ERROR_INVALID_CONTEXT)?;
    ctx.teardown();
    STACK.with(|s| {
        let mut s = s.borrow_mut();
        if s.last() == Some(&handle) {
            s.pop();
        }
    });
    Ok(())
}

/// The live context whose id is `ctx_id`.
pub(crate) fn by_id(ctx_id: u64) -> Option<Arc<Context>> {
    for device in 0..driver::device_count() {
        let live = primary(device).live.clone();
        if let Some(ctx) = live.filter(|c| c.id == ctx_id) {
            return Some(ctx);
        }
    }
    CREATED.find(|c| c.id == ctx_id)
}

/// The handle of the live context whose id is `ctx_id`.
pub(crate) fn handle_of(ctx_id: u64) -> Option<u64> {
    by_id(ctx_id).map(|c| c.handle)
}
