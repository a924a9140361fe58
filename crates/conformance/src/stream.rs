//! Streams, events and kernel launches as safe types.

use std::ffi::c_void;
use std::sync::Arc;

use cudarc::driver::{result, sys};

use crate::context::{Context, record_drop_error};
use crate::error::{Error, Result};
use crate::module::Function;

/// One kernel argument by value. Buffers are passed as their device address.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum KernelArg {
    /// A device pointer (`.u64` param).
    Ptr(sys::CUdeviceptr),
    /// `int`.
    I32(i32),
    /// `unsigned`.
    U32(u32),
    /// `float`.
    F32(f32),
    /// `unsigned long long`.
    U64(u64),
}

impl KernelArg {
    /// The value in a u64 slot whose first bytes are the argument's little-endian bytes — the
    /// driver reads exactly the parameter's size from the slot's address.
    fn slot(self) -> u64 {
        match self {
            KernelArg::Ptr(p) | KernelArg::U64(p) => p,
            KernelArg::I32(v) => u64::from(v as u32),
            KernelArg::U32(v) => u64::from(v),
            KernelArg::F32(v) => u64::from(v.to_bits()),
        }
    }
}

/// Grid, block and dynamic shared memory of one launch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaunchShape {
    /// Blocks in x, y, z.
    pub grid: [u32; 3],
    /// Threads per block in x, y, z.
    pub block: [u32; 3],
    /// Dynamic shared memory per block in bytes.
    pub shared_bytes: u32,
}

/// A stream: the legacy default stream (`null`) or one created with `CU_STREAM_NON_BLOCKING`.
#[derive(Debug)]
pub struct Stream {
    pub(crate) raw: sys::CUstream,
    owned: bool,
    ctx: Arc<Context>,
}

// SAFETY: a CUstream is a driver handle usable from any thread with its context bound, which
// every method does first.
unsafe impl Send for Stream {}
// SAFETY: as above.
unsafe impl Sync for Stream {}

impl Stream {
    /// A new non-blocking stream in `ctx` (no implicit synchronization with the legacy stream).
    pub fn new(ctx: &Arc<Context>) -> Result<Stream> {
        Stream::create(ctx, result::stream::StreamKind::NonBlocking)
    }

    /// A new blocking stream in `ctx`: the legacy default stream waits for its earlier work.
    pub fn new_blocking(ctx: &Arc<Context>) -> Result<Stream> {
        Stream::create(ctx, result::stream::StreamKind::Default)
    }

    fn create(ctx: &Arc<Context>, kind: result::stream::StreamKind) -> Result<Stream> {
        ctx.bind()?;
        let raw = result::stream::create(kind).map_err(|e| Error::driver("cuStreamCreate", e))?;
        Ok(Stream {
            raw,
            owned: true,
            ctx: Arc::clone(ctx),
        })
    }

    /// The legacy default stream of `ctx` (synchronizes with other blocking streams).
    pub fn legacy_default(ctx: &Arc<Context>) -> Stream {
        Stream {
            raw: std::ptr::null_mut(),
            owned: false,
            ctx: Arc::clone(ctx),
        }
    }

    /// The raw handle, for calls this crate does not wrap.
    pub fn raw(&self) -> sys::CUstream {
        self.raw
    }

    /// Enqueues `f` with `args`. Returns once enqueued; errors from the kernel itself surface at
    /// the next synchronizing call.
    pub fn launch(&self, f: &Function, shape: LaunchShape, args: &[KernelArg]) -> Result<()> {
        let mut slots: Vec<u64> = args.iter().map(|a| a.slot()).collect();
        let mut ptrs: Vec<*mut c_void> = slots.iter_mut().map(|s| (s as *mut u64).cast()).collect();
        self.ctx.bind()?;
        let [gx, gy, gz] = shape.grid;
        let [bx, by, bz] = shape.block;
        // SAFETY: `f` is a live kernel (it holds its module); each pointer in `ptrs` addresses a
        // u64 slot that outlives the call (the driver copies parameters at launch).
        unsafe {
            result::launch_kernel(
                f.raw,
                (gx, gy, gz),
                (bx, by, bz),
                shape.shared_bytes,
                self.raw,
                &mut ptrs,
            )
        }
        .map_err(|e| Error::driver("cuLaunchKernel", e))
    }

    /// Binds the stream's context to the calling thread.
    pub(crate) fn bind(&self) -> Result<()> {
        self.ctx.bind()
    }

    /// Enqueues `f` to run on a driver thread once all earlier work on the stream is done; later
    /// work waits for it. `f` must not call the driver (CUDA forbids it in host functions).
    pub fn launch_host_fn<F: FnOnce() + Send + 'static>(&self, f: F) -> Result<()> {
        let boxed: Box<HostFn> = Box::new(Box::new(f));
        let user = Box::into_raw(boxed);
        self.ctx.bind()?;
        // SAFETY: `trampoline` matches CUhostFn; `user` stays valid until the driver calls the
        // trampoline, which takes ownership back exactly once.
        match unsafe { result::stream::launch_host_function(self.raw, trampoline, user.cast()) } {
            Ok(()) => Ok(()),
            Err(e) => {
                // SAFETY: the driver refused the call, so it will never run the trampoline; we
                // still own `user` and free it here, once.
                drop(unsafe { Box::from_raw(user) });
                Err(Error::driver("cuLaunchHostFunc", e))
            }
        }
    }

    /// Waits for all work enqueued so far.
    pub fn synchronize(&self) -> Result<()> {
        self.ctx.bind()?;
        // SAFETY: `raw` is a live stream of this context (or the legacy default stream).
        unsafe { result::stream::synchronize(self.raw) }
            .map_err(|e| Error::driver("cuStreamSynchronize", e))
    }

    /// Makes later work on this stream wait for `event`'s recorded point.
    pub fn wait(&self, event: &Event) -> Result<()> {
        self.ctx.bind()?;
        // SAFETY: both handles are live and belong to the same context.
        unsafe {
            result::stream::wait_event(
                self.raw,
                event.raw,
                sys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT,
            )
        }
        .map_err(|e| Error::driver("cuStreamWaitEvent", e))
    }
}

type HostFn = Box<dyn FnOnce() + Send>;

/// Runs a boxed host function handed to the driver by [`Stream::launch_host_fn`].
unsafe extern "C" fn trampoline(user: *mut c_void) {
    // SAFETY: `user` came from Box::into_raw in launch_host_fn and the driver calls each host
    // function exactly once, so ownership is taken back exactly once.
    let f = unsafe { Box::from_raw(user.cast::<HostFn>()) };
    // A panic must not unwind into the driver's thread.
    if std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).is_err() {
        eprintln!("conformance: a host function panicked");
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        if !self.owned {
            return;
        }
        if let Err(e) = self.ctx.bind() {
            eprintln!("conformance: cannot bind context to destroy a stream: {e}");
            return;
        }
        // SAFETY: `raw` was created by us and is destroyed exactly once, here.
        if let Err(e) = unsafe { result::stream::destroy(self.raw) } {
            record_drop_error("cuStreamDestroy", e);
        }
    }
}

/// An event created with timing enabled.
#[derive(Debug)]
pub struct Event {
    pub(crate) raw: sys::CUevent,
    ctx: Arc<Context>,
}

// SAFETY: a CUevent is a driver handle usable from any thread with its context bound.
unsafe impl Send for Event {}
// SAFETY: as above.
unsafe impl Sync for Event {}

impl Event {
    /// A new timing event in `ctx`.
    pub fn new(ctx: &Arc<Context>) -> Result<Event> {
        ctx.bind()?;
        let raw = result::event::create(sys::CUevent_flags::CU_EVENT_DEFAULT)
            .map_err(|e| Error::driver("cuEventCreate", e))?;
        Ok(Event {
            raw,
            ctx: Arc::clone(ctx),
        })
    }

    /// Records the event at the current end of `stream`.
    pub fn record(&self, stream: &Stream) -> Result<()> {
        self.ctx.bind()?;
        // SAFETY: both handles are live and in the same context.
        unsafe { result::event::record(self.raw, stream.raw) }
            .map_err(|e| Error::driver("cuEventRecord", e))
    }

    /// `Ok(true)` when the recorded work has completed, `Ok(false)` on `CUDA_ERROR_NOT_READY`.
    pub fn is_complete(&self) -> Result<bool> {
        self.ctx.bind()?;
        // SAFETY: `raw` is a live event.
        match unsafe { result::event::query(self.raw) } {
            Ok(()) => Ok(true),
            Err(e) if e.0 == sys::CUresult::CUDA_ERROR_NOT_READY => Ok(false),
            Err(e) => Err(Error::driver("cuEventQuery", e)),
        }
    }

    /// Blocks until the recorded work completes.
    pub fn synchronize(&self) -> Result<()> {
        self.ctx.bind()?;
        // SAFETY: `raw` is a live event.
        unsafe { result::event::synchronize(self.raw) }
            .map_err(|e| Error::driver("cuEventSynchronize", e))
    }

    /// Milliseconds from `start` to `self` (`cuEventElapsedTime`).
    pub fn elapsed_ms_since(&self, start: &Event) -> Result<f32> {
        self.ctx.bind()?;
        // SAFETY: both are live timing events of the same context.
        unsafe { result::event::elapsed(start.raw, self.raw) }
            .map_err(|e| Error::driver("cuEventElapsedTime", e))
    }

    /// The raw handle.
    pub fn raw(&self) -> sys::CUevent {
        self.raw
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        if let Err(e) = self.ctx.bind() {
            eprintln!("conformance: cannot bind context to destroy an event: {e}");
            return;
        }
        // SAFETY: `raw` was created by us and is destroyed exactly once, here.
        if let Err(e) = unsafe { result::event::destroy(self.raw) } {
            record_drop_error("cuEventDestroy", e);
        }
    }
}
