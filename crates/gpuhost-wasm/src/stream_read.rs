//! `buffer.read-stream`: a device-to-guest read whose bytes go straight from page-locked staging
//! into the memory the guest hands to each read of a `stream<u8>` (wasmtime's
//! `DirectDestination`), copied by gpuhost's copy threads — no `list<u8>` result for wasmtime to
//! lower through the guest's `realloc` with one core, which is what bounds `buffer.read`.
//!
//! Why the guest waits through `reading.wait` and not on the stream: the guests' exports
//! (`wasi:cli/run`, `wasi:http/incoming-handler`) are not `async` functions, and the component
//! model forbids such a task to block before it returns: wasmtime 48 traps a synchronous
//! `stream.read` and `waitable-set.wait` from it (`Trap::CannotBlockSyncTask`,
//! futures_and_streams.rs `guest_read`, concurrent.rs `waitable_set_wait`); an asynchronous
//! read the producer leaves pending is polled again only by the event loop, which does not run
//! while the task holds the store; and a producer may not complete a read of more than one item
//! with none (wasmtime traps that too). So `reading.wait`, an ordinary blocking import, awaits
//! the device (the guest suspended, the executor thread free, no guest memory touched) and
//! says how many bytes have landed; a read then finds at least one and returns at once. A read
//! made before the bytes are there is left pending, as the stream contract says.
//!
//! Safety of the guest's memory: the host writes only into the slice wasmtime bounds-checks for
//! the read in progress, within one `poll_produce` call (gpuhost's copy threads are done when
//! `drain_into` returns). A stream or `reading` dropped midway, or a Store dropped, drops the
//! download: its queued DMAs land in staging their fences keep alive, never in guest memory.

use crate::calls::HostCall;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};

use wasmtime::StoreContextMut;
use wasmtime::component::{
    Destination, Linker, Resource, StreamProducer, StreamReader, StreamResult,
};

use crate::bindings::WitError;
use crate::bindings::gpuhost::cuda::memory::HostReading;
use crate::bindings::gpuhost::cuda::types::{self, Host as _};
use crate::ctx::{CudaCtxView, CudaView};
use crate::error::{CudaError, CudaResult, from_gpu};
use crate::limits::check_range;
use crate::memory::BufferRes;

/// The function [`add_read_stream`] defines.
const READ_STREAM: &str = "[method]buffer.read-stream";

/// Stream reads one guest may have open at once: each holds up to `chunks_in_flight + 1`
/// staging chunks of page-locked memory until it is drained or dropped.
pub const MAX_OPEN_READS: usize = 2;

/// Bytes handed to a host that reads the stream itself (not a path gpuhost:cuda takes; the
/// guest owns the stream) per read.
const HOST_READ_BYTES: usize = 64 << 10;

/// A guest's count of open stream reads (shared with the reads, which give their place back
/// when dropped, wherever that happens).
#[derive(Debug, Default)]
pub struct OpenReads(Arc<AtomicUsize>);

/// One open read's place among [`OpenReads`].
#[derive(Debug)]
struct Place(Arc<AtomicUsize>);

impl OpenReads {
    fn take(&self) -> CudaResult<Place> {
        let taken = self
            .0
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < MAX_OPEN_READS).then_some(n + 1)
            });
        match taken {
            Ok(_) => Ok(Place(self.0.clone())),
            Err(_) => Err(WitError::QuotaExceeded(format!(
                "{MAX_OPEN_READS} stream reads are open already; drain or drop one (its stream \
                 and its reading) first"
            ))
            .into()),
        }
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// What the stream's producer and the guest's `reading` share: the download while it lasts,
/// and the error that ended it, until `wait` reports it.
struct Shared {
    download: Option<gpuhost::DrainedDownload>,
    failed: Option<WitError>,
    _place: Place,
}

type Open = Arc<Mutex<Shared>>;

fn lock(open: &Open) -> MutexGuard<'_, Shared> {
    open.lock().unwrap_or_else(|p| p.into_inner())
}

impl Shared {
    /// Ends the download with `e` (staging goes back to the pool once its DMAs end).
    fn fail(&mut self, e: &gpuhost::Error) {
        self.download = None;
        self.failed = Some(from_gpu(e));
    }

    /// Drains landed bytes into `out`; ends the download when it is all drained, or failed.
    fn drain(&mut self, out: &mut [u8]) -> usize {
        let Some(d) = self.download.as_mut() else {
            return 0;
        };
        match d.drain_into(out) {
            Ok(n) => {
                if d.remaining() == 0 {
                    self.download = None;
                }
                n
            }
            Err(e) => {
                self.fail(&e);
                0
            }
        }
    }

    /// Bytes landed and not yet read; 0 once the download is over.
    fn landed(&mut self) -> u64 {
        let Some(d) = self.download.as_mut() else {
            return 0;
        };
        match d.landed() {
            Ok(n) => n as u64,
            Err(e) => {
                self.fail(&e);
                0
            }
        }
    }

    /// Ready once the next bytes have landed, or the download is over.
    fn poll_landed(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let Some(d) = self.download.as_mut() else {
            return Poll::Ready(());
        };
        match d.poll_landed(cx) {
            Poll::Ready(Err(e)) => self.fail(&e),
            Poll::Ready(Ok(())) => {}
            Poll::Pending => return Poll::Pending,
        }
        Poll::Ready(())
    }
}

/// The guest's handle on a stream read in flight: `reading.wait`.
pub struct ReadingRes {
    open: Open,
}

/// The producer of the stream the guest reads.
struct Producer {
    open: Open,
}

impl<D: 'static> StreamProducer<D> for Producer {
    type Item = u8;
    type Buffer = Option<u8>;

    fn poll_produce<'a>(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        store: StoreContextMut<'a, D>,
        destination: Destination<'a, u8, Self::Buffer>,
        finish: bool,
    ) -> Poll<wasmtime::Result<StreamResult>> {
        let mut shared = lock(&self.open);
        let Some(left) = shared.download.as_ref().map(|d| d.remaining()) else {
            return Poll::Ready(Ok(StreamResult::Dropped));
        };
        let mut direct = destination.as_direct(store, HOST_READ_BYTES.min(left));
        let mut n = shared.drain(direct.remaining());
        if n == 0 && !direct.remaining().is_empty() && shared.download.is_some() {
            // Read before `reading.wait` said bytes were there: nothing to give yet.
            if finish {
                return Poll::Ready(Ok(StreamResult::Cancelled));
            }
            if shared.poll_landed(cx).is_pending() {
                return Poll::Pending;
            }
            n = shared.drain(direct.remaining());
        }
        direct.mark_written(n);
        Poll::Ready(Ok(match shared.download {
            Some(_) => StreamResult::Completed,
            None => StreamResult::Dropped,
        }))
    }
}

impl CudaCtxView<'_> {
    /// Checks a stream read of `len` bytes at `offset` of `buffer` and starts its download.
    fn start_read_stream(
        &mut self,
        buffer: &Resource<BufferRes>,
        offset: u64,
        len: u64,
    ) -> CudaResult<(Resource<ReadingRes>, Open)> {
        let max = self.ctx.limits.max_transfer_bytes;
        if len > max {
            return Err(WitError::QuotaExceeded(format!(
                "read of {len} bytes is over the guest's transfer limit of {max} bytes; read in \
                 smaller pieces"
            ))
            .into());
        }
        let b = self.table.get(buffer)?.buf.clone();
        let (offset, len) = check_range("read", offset, len, b.len())?;
        let place = self.ctx.reads.take()?;
        let download = self.transfer_stream()?.start_download(&b, offset, len)?;
        let open = Arc::new(Mutex::new(Shared {
            download: Some(download),
            failed: None,
            _place: place,
        }));
        let reading = self.table.push(ReadingRes { open: open.clone() })?;
        Ok((reading, open))
    }
}

/// Defines `buffer.read-stream` in `linker` (the generated bindings' has no store to make a
/// stream in).
pub(crate) fn add_read_stream<T: CudaView + 'static>(
    linker: &mut Linker<T>,
) -> wasmtime::Result<()> {
    crate::memory::replace_import(
        linker,
        READ_STREAM,
        |store: StoreContextMut<'_, T>, (buffer, offset, len): (Resource<BufferRes>, u64, u64)| {
            Box::new(read_stream(store, buffer, offset, len))
        },
    )
}

type ReadStreamResult = Result<(Resource<ReadingRes>, StreamReader<u8>), types::Error>;

/// `buffer.read-stream`: starts the download and hands the guest its `reading` and the stream.
async fn read_stream<T: CudaView + 'static>(
    mut store: StoreContextMut<'_, T>,
    buffer: Resource<BufferRes>,
    offset: u64,
    len: u64,
) -> wasmtime::Result<(ReadStreamResult,)> {
    let _timer = store.data_mut().cuda().ctx.time(HostCall::BufferReadStream);
    let started = store
        .data_mut()
        .cuda()
        .start_read_stream(&buffer, offset, len);
    let r = match started {
        Ok((reading, open)) => {
            let stream = StreamReader::new(&mut store, Producer { open })?;
            Ok((reading, stream))
        }
        // As the generated bindings do for every import: a guest error is returned, a host bug
        // traps.
        Err(e) => Err(store.data_mut().cuda().convert_error(e)?),
    };
    Ok((r,))
}

impl HostReading for CudaCtxView<'_> {
    async fn wait(&mut self, reading: Resource<ReadingRes>) -> CudaResult<u64> {
        let _timer = self.ctx.time(HostCall::ReadingWait);
        let open = self.table.get(&reading)?.open.clone();
        std::future::poll_fn(|cx| lock(&open).poll_landed(cx)).await;
        let mut shared = lock(&open);
        let landed = shared.landed();
        match shared.failed.take() {
            Some(e) => Err(e.into()),
            None => Ok(landed),
        }
    }

    fn drop(&mut self, reading: Resource<ReadingRes>) -> wasmtime::Result<()> {
        let _timer = self.ctx.time(HostCall::ReadingDrop);
        self.table.delete(reading)?;
        Ok(())
    }
}

/// The generated `buffer.read-stream`, which [`add_read_stream`] replaces: without the store it
/// cannot make a stream.
pub(crate) fn generated_read_stream() -> CudaResult<(Resource<ReadingRes>, StreamReader<u8>)> {
    Err(CudaError::Trap(wasmtime::format_err!(
        "buffer.read-stream is defined by gpuhost_wasm::add_to_linker; this embedding linked \
         the generated bindings alone"
    )))
}
