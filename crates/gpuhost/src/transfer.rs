//! Stream-ordered copies that never block the calling thread on the device: fills and
//! device-to-device copies enqueued and awaited through a fence; host↔device transfers from and
//! into a [`HostBuffer`] with one DMA and no copy; and transfers of ordinary (pageable) memory
//! staged through pooled page-locked chunks (see pinned.rs) — each chunk's DMA enqueued on the
//! stream and awaited through a fence, two chunks in flight so one transfers while the other is
//! copied on the host.
//!
//! Cancel safety: every batch a transfer's fence closes keeps the device buffer and the
//! page-locked region alive until the device is done with them, so dropping a transfer's future
//! midway never frees, or hands to another transfer, memory a DMA still reads or writes; a
//! region whose DMA's end was never observed is leaked (see pinned.rs).

use std::collections::VecDeque;
use std::mem::MaybeUninit;
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::Poll;
use std::time::Instant;

use crate::buffer::DeviceBuffer;
use crate::completion::Completion;
use crate::error::{Error, Result};
use crate::host::Host;
use crate::pinned::{HostBuffer, Pinned};
use crate::result;
use crate::stream::Stream;

mod drained;
pub use drained::DrainedDownload;

/// How a host stages pageable transfers ([`Host::set_transfer_config`](crate::Host::set_transfer_config)).
///
/// The defaults are the best of `gpuhost bench`'s staging sweep on the H200 (72 configurations,
/// two runs, bench/RESULTS.md 2026-12-01): 8 MiB chunks, 4 in flight, 12 copy threads reached
/// 0.88× raw pinned down and 0.67–0.68× up, where 4 MiB × 3 with 4 threads reached 0.53× / 0.41×.
/// Why those shapes win:
/// - A transfer is cut into at least 8 chunks, none smaller than 512 KiB nor larger than
///   `chunk_bytes`. The host copy of the first chunk and the DMA of the last overlap nothing, so
///   with k chunks about 1/k of the slower stage is exposed: 8 MiB chunks keep that near 12% for
///   a 64 MiB transfer, and fewer, larger DMAs cost fewer fences. Below 512 KiB a chunk's DMA
///   (~10 µs at 50 GB/s) is no longer long against the fixed cost of a fence and a wake-up; and
///   every chunk in flight is page-locked memory held.
/// - 4 chunks in flight: one being copied on the host, one in the DMA engine, and two queued so
///   the engine never idles while the host learns a chunk finished.
/// - Copy threads: the host copy is the bottleneck (one core copies pageable memory at a few
///   GB/s, PCIe 5 x16 moves ~55), so it takes many cores: three quarters of the machine's, at
///   most 12 (the sweep's best on 16 cores), leaving the rest to the process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TransferConfig {
    /// Largest staging chunk, in bytes (64 KiB ..= 256 MiB).
    pub chunk_bytes: usize,
    /// Chunks a transfer keeps in flight (1 ..= 16).
    pub chunks_in_flight: usize,
    /// Helper threads that copy between the caller's memory and staging, beside the calling
    /// thread (0 ..= 64; 0: the calling thread copies alone).
    pub copy_threads: usize,
    /// Host copies write with streaming (non-temporal) stores: into staging on an upload, into
    /// the caller's memory on a download (see copy.rs). Off by default: `gpuhost bench`'s sweep
    /// compares both on the machine at hand, and no H200 run has chosen between them yet.
    pub streaming_stores: bool,
    /// Bytes each copying thread copies between two yields to the executor (64 KiB ..= 256
    /// MiB; default 256 KiB, so one poll holds its thread some tens of microseconds). Each step
    /// ends when its slowest thread does, so larger steps wait less and hold a thread longer:
    /// `gpuhost bench`'s sweep measures the trade. On an H100 (bench/RESULTS.md, session 51)
    /// 1 MiB steps were no faster and one step per 8 MiB chunk was slower, up and down.
    pub copy_step_bytes: usize,
}

/// Fewest chunks a transfer is cut into (see [`TransferConfig`]).
pub(crate) const MIN_CHUNKS: usize = 8;
/// Smallest chunk a transfer is cut into, unless it is smaller itself.
pub(crate) const MIN_CHUNK: usize = 512 << 10;
/// [`TransferConfig::copy_step_bytes`]'s default.
const STEP_PER_THREAD: usize = 256 << 10;
/// Largest copy that [`copy_in_steps`] does without yielding to the executor.
const UNYIELDED_COPY: usize = 64 << 10;

impl Default for TransferConfig {
    fn default() -> Self {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        Self {
            chunk_bytes: 8 << 20,
            chunks_in_flight: 4,
            copy_threads: (cores * 3 / 4).min(12),
            streaming_stores: false,
            copy_step_bytes: STEP_PER_THREAD,
        }
    }
}

impl TransferConfig {
    fn check(&self) -> Result<()> {
        let bad = |reason: String| Err(Error::TransferConfig { reason });
        // Both sizes share one range: a staging chunk, and a thread's copy between yields.
        for (name, bytes) in [
            ("chunk_bytes", self.chunk_bytes),
            ("copy_step_bytes", self.copy_step_bytes),
        ] {
            if !(64 << 10..=256 << 20).contains(&bytes) {
                return bad(format!("{name} = {bytes} is outside 64 KiB ..= 256 MiB"));
            }
        }
        if !(1..=16).contains(&self.chunks_in_flight) {
            return bad(format!(
                "chunks_in_flight = {} is outside 1 ..= 16",
                self.chunks_in_flight
            ));
        }
        if self.copy_threads > crate::copy::MAX_HELPERS {
            return bad(format!(
                "copy_threads = {} is over {}",
                self.copy_threads,
                crate::copy::MAX_HELPERS
            ));
        }
        Ok(())
    }

    /// How this configuration's host copies store.
    pub(crate) fn stores(&self) -> crate::copy::Stores {
        if self.streaming_stores {
            crate::copy::Stores::Streaming
        } else {
            crate::copy::Stores::Cached
        }
    }

    /// How a transfer of `len` bytes is cut: the staging chunk size, and the ranges (in order,
    /// covering `0..len`). The first and the last chunk's worth go in quarters (none under
    /// MIN_CHUNK): the first chunk's host copy (upload) or DMA (download) overlaps nothing, nor
    /// does the other stage of the last one, so smaller ends shrink what is exposed.
    fn plan(&self, len: usize) -> (usize, Vec<Range<usize>>) {
        let chunk = (len / MIN_CHUNKS)
            .clamp(MIN_CHUNK.min(self.chunk_bytes), self.chunk_bytes)
            .min(len)
            .max(1);
        let edge = (chunk / 4).max(MIN_CHUNK).min(chunk);
        let mut parts = Vec::with_capacity(len / chunk + 8);
        let mut at = 0;
        while at < len {
            let size = if at < chunk || len - at <= chunk {
                edge
            } else {
                chunk
            };
            let end = at + size.min(len - at);
            parts.push(at..end);
            at = end;
        }
        (chunk, parts)
    }
}

impl crate::host::Host {
    /// Sets how this host stages pageable transfers (`Stream::upload`, `download`) from now on,
    /// and re-makes its staging reserve ([`Host::reserve_staging`](crate::Host::reserve_staging))
    /// for it, if it has one.
    pub fn set_transfer_config(self: &Arc<Self>, cfg: TransferConfig) -> Result<()> {
        cfg.check()?;
        *self.transfer.lock().unwrap_or_else(|p| p.into_inner()) = cfg;
        self.re_reserve_staging()
    }

    /// How this host stages pageable transfers.
    pub fn transfer_config(&self) -> TransferConfig {
        *self.transfer.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Which way a DMA goes.
#[derive(Clone, Copy)]
pub(crate) enum Dir {
    /// Device to host.
    Down,
    /// Host to device.
    Up,
}

impl Stream {
    /// Checks that `buf` can be used on this stream now, and binds the context.
    pub(crate) fn enter_with(&self, buf: &DeviceBuffer) -> Result<u64> {
        self.check_buffer("buffer", buf)?;
        self.host().enter_for(self.generation())
    }

    /// Checks that host memory of `what` (a host buffer, locked memory) belongs to this stream's
    /// host: its DMAs run in this host's context only.
    pub(crate) fn check_host(&self, what: &'static str, host: &Arc<Host>) -> Result<()> {
        if !Arc::ptr_eq(host, self.host()) {
            return Err(Error::DeviceMismatch {
                what,
                expected: self.host().ordinal(),
                found: host.ordinal(),
            });
        }
        Ok(())
    }

    /// Enqueues one DMA between `buf` at `offset` and `mem[at]`, and a fence keeping `buf` and
    /// `mem` alive until it is done. A failed enqueue leaves `mem` unknown: the driver may or
    /// may not have queued the copy.
    fn dma(
        &self,
        dir: Dir,
        buf: &DeviceBuffer,
        offset: usize,
        mem: &Arc<Pinned>,
        at: Range<usize>,
        generation: u64,
    ) -> Result<Completion> {
        debug_assert!(at.end <= mem.cap() && offset + at.len() <= buf.len());
        let (dev, len) = (buf.inner.raw + offset as u64, at.len());
        // SAFETY: `at + len` lies inside the region (callers check ranges against it) and the
        // device range inside `buf`'s allocation (checked by the caller); both stay alive until
        // the fence's batch completes, which holds them. The region is registered in
        // `generation`, the bound context's.
        let r = unsafe {
            let host = mem.ptr().add(at.start);
            match dir {
                Dir::Down => result::mem::copy_dtoh_async(host.cast(), dev, len, self.raw()),
                Dir::Up => result::mem::copy_htod_async(dev, host.cast(), len, self.raw()),
            }
        };
        if let Err(e) = self.host().check_at(r, generation) {
            mem.mark_unknown();
            return Err(e);
        }
        self.fence_keeping(&[buf], Some(mem.clone()))
    }

    /// Checks a transfer between `dev` at `offset` and `host` over `range` and binds the
    /// context; `None` when there is nothing to copy.
    fn enter_direct(
        &self,
        dev: &DeviceBuffer,
        offset: usize,
        host: &HostBuffer,
        range: &Range<usize>,
    ) -> Result<Option<u64>> {
        host.check_range(range)?;
        dev.range(offset, range.len())?;
        self.check_host("host buffer", host.host())?;
        let generation = self.enter_with(dev)?;
        if range.is_empty() {
            return Ok(None);
        }
        Ok(Some(generation))
    }

    /// Copies `src[range]` into `dst` at `offset` with one DMA from the page-locked buffer (no
    /// staging copy), after the work queued on this stream before it; done when the future
    /// resolves. The calling thread never waits for the device.
    ///
    /// Dropping the future midway lets the copy run on: `dst`'s bytes there are then
    /// unspecified, and `src` stays alive for it.
    pub async fn upload_from(
        &self,
        dst: &DeviceBuffer,
        offset: usize,
        src: &HostBuffer,
        range: Range<usize>,
    ) -> Result<()> {
        let Some(generation) = self.enter_direct(dst, offset, src, &range)? else {
            return Ok(());
        };
        let Some(region) = src.region() else {
            return Ok(()); // no region means an empty buffer: the range was empty
        };
        self.direct(Dir::Up, dst, offset, region, range, generation)
            .await
    }

    /// One DMA between `buf` at `offset` and a host buffer's `region[range]`, registered with
    /// the context first if it is not yet, awaited.
    async fn direct(
        &self,
        dir: Dir,
        buf: &DeviceBuffer,
        offset: usize,
        region: &Arc<Pinned>,
        range: Range<usize>,
        generation: u64,
    ) -> Result<()> {
        self.enqueue_direct(dir, buf, offset, region, range, generation)?
            .await
    }

    /// [`Stream::direct`]'s DMA, enqueued and not awaited: its fence (locked.rs enqueues
    /// several before awaiting any).
    pub(crate) fn enqueue_direct(
        &self,
        dir: Dir,
        buf: &DeviceBuffer,
        offset: usize,
        region: &Arc<Pinned>,
        range: Range<usize>,
        generation: u64,
    ) -> Result<Completion> {
        region.register_for(generation)?;
        self.dma(dir, buf, offset, region, range, generation)
    }

    /// Copies `range.len()` bytes of `src` from `offset` into `dst[range]` with one DMA into the
    /// page-locked buffer (no staging copy), after the work queued on this stream before it. The
    /// calling thread never waits for the device.
    ///
    /// If the future is dropped midway, or the download fails, `dst` moves to fresh zeroed
    /// memory (its old bytes are gone): the old region stays with a DMA that may still write it.
    /// If the future is leaked (`mem::forget`), `dst` is left empty.
    pub async fn download_into(
        &self,
        src: &DeviceBuffer,
        offset: usize,
        dst: &mut HostBuffer,
        range: Range<usize>,
    ) -> Result<()> {
        let Some(generation) = self.enter_direct(src, offset, dst, &range)? else {
            return Ok(());
        };
        let Some(region) = dst.lend() else {
            return Ok(()); // no region means an empty buffer: the range was empty
        };
        // From here the region is out of `dst` until `Lent` gives it back: a borrow of `dst`
        // never sees memory this DMA may write, even if this future is leaked.
        let lent = Lent {
            dst,
            region: Some(region),
        };
        let r = match lent.region.as_ref() {
            Some(region) => {
                self.direct(Dir::Down, src, offset, region, range, generation)
                    .await
            }
            None => Ok(()),
        };
        drop(lent);
        r
    }

    /// Copies `out.len()` bytes of `buf` from `offset` into `out`, after the work queued on
    /// this stream before it. The calling thread never waits for the device.
    pub async fn download(&self, buf: &DeviceBuffer, offset: usize, out: &mut [u8]) -> Result<()> {
        // SAFETY: download_uninit writes only bytes copied out of staging through it.
        let out = unsafe { crate::copy::as_uninit(out) };
        self.download_uninit(buf, offset, out).await
    }

    /// Copies `len` bytes of `buf` from `offset` into a new `Vec`, after the work queued on this
    /// stream before it: [`Stream::download`] without zero-filling the result first (the
    /// staging copies write its memory for the first time). The calling thread never waits
    /// for the device.
    pub async fn download_to_vec(
        &self,
        buf: &DeviceBuffer,
        offset: usize,
        len: usize,
    ) -> Result<Vec<u8>> {
        buf.range(offset, len)?;
        let mut out = Vec::new();
        out.try_reserve_exact(len).map_err(|e| Error::HostMemory {
            bytes: len,
            reason: e.to_string(),
        })?;
        self.download_uninit(buf, offset, &mut out.spare_capacity_mut()[..len])
            .await?;
        // SAFETY: the download initialised all `len` bytes of the spare capacity (it returns
        // Ok only once every chunk is copied out), and `len <= capacity`.
        unsafe { out.set_len(len) };
        Ok(out)
    }

    /// [`Stream::download`] into memory that may not be initialised yet; every byte of `out`
    /// is initialised when it returns Ok.
    async fn download_uninit(
        &self,
        buf: &DeviceBuffer,
        offset: usize,
        out: &mut [MaybeUninit<u8>],
    ) -> Result<()> {
        buf.range(offset, out.len())?;
        let cfg = self.host().transfer_config();
        let (chunk, plan) = cfg.plan(out.len());
        let mut rest = out;
        let mut parts = plan.into_iter().map(|r| {
            let (part, tail) = std::mem::take(&mut rest).split_at_mut(r.len());
            rest = tail;
            (r.start, part)
        });
        // A chunk's DMA into staging, or, with no staging free where none may be page-locked
        // (see Host::set_staging_growth), a copy through the driver's pageable path into
        // `part`, done on return (None).
        let enqueue = |at: usize, part: &mut [MaybeUninit<u8>]| {
            let generation = self.enter_with(buf)?;
            let Some(staging) = self.staging(generation, chunk)? else {
                self.download_pageable(buf, offset + at, part, generation)?;
                return Ok::<_, Error>(None);
            };
            let staging = Arc::new(staging);
            let done = self.dma(
                Dir::Down,
                buf,
                offset + at,
                &staging,
                0..part.len(),
                generation,
            )?;
            Ok(Some((done, staging)))
        };
        let mut in_flight = VecDeque::with_capacity(cfg.chunks_in_flight);
        let mut clock = StageClock::new(self.host());
        loop {
            // `chunks_in_flight` DMAs on the way; the next one is queued before a landed chunk
            // is copied out.
            while in_flight.len() < cfg.chunks_in_flight {
                let Some((i, part)) = parts.next() else { break };
                if let Some((done, staging)) = enqueue(i, &mut *part)? {
                    in_flight.push_back((done, staging, part));
                }
            }
            let Some((done, staging, part)) = in_flight.pop_front() else {
                break;
            };
            clock.wait(done).await?;
            if let Some((i, next)) = parts.next()
                && let Some((done, staging)) = enqueue(i, &mut *next)?
            {
                in_flight.push_back((done, staging, next));
            }
            let landed = staging.bytes(part.len());
            let copy_ns = copy_in_steps(part, landed, &cfg).await;
            clock.copied(landed.len(), copy_ns);
        }
        Ok(())
    }

    /// Copies `data` into `buf` at `offset`, after the work queued on this stream before it;
    /// done when the future resolves. The calling thread never waits for the device.
    pub async fn upload(&self, buf: &DeviceBuffer, offset: usize, data: &[u8]) -> Result<()> {
        buf.range(offset, data.len())?;
        let cfg = self.host().transfer_config();
        let (chunk, plan) = cfg.plan(data.len());
        let mut in_flight = VecDeque::with_capacity(cfg.chunks_in_flight);
        let mut clock = StageClock::new(self.host());
        for r in plan {
            let (at, part) = (offset + r.start, &data[r]);
            if in_flight.len() >= cfg.chunks_in_flight
                && let Some(done) = in_flight.pop_front()
            {
                clock.wait(done).await?;
            }
            let generation = self.enter_with(buf)?;
            let Some(mut staging) = self.staging(generation, chunk)? else {
                in_flight.push_back(self.upload_pageable(buf, at, part, generation)?);
                continue;
            };
            // SAFETY: copy_in_steps writes only bytes copied from `part` through it.
            let dst = unsafe { crate::copy::as_uninit(staging.bytes_mut(part.len())) };
            let copy_ns = copy_in_steps(dst, part, &cfg).await;
            clock.copied(part.len(), copy_ns);
            // The copy yielded: this task may run on another thread now, and the context may
            // have been lost meanwhile.
            let generation = self.enter_with(buf)?;
            let staging = Arc::new(staging);
            in_flight.push_back(self.dma(Dir::Up, buf, at, &staging, 0..part.len(), generation)?);
        }
        for done in in_flight {
            clock.wait(done).await?;
        }
        Ok(())
    }

    /// One upload chunk through the driver's pageable path (no staging free, and none may be
    /// page-locked: [`Host::set_staging_growth`]). The driver waits for this stream's earlier
    /// work, copies `part` into its own staging and returns; `part` is not read afterwards.
    fn upload_pageable(
        &self,
        buf: &DeviceBuffer,
        at: usize,
        part: &[u8],
        generation: u64,
    ) -> Result<Completion> {
        // SAFETY: `at + part.len()` lies inside `buf`'s allocation (the caller checked the whole
        // range), kept alive by the fence's batch; `part` is readable for its length, and a
        // pageable source is consumed before the call returns.
        let r = unsafe {
            result::mem::copy_htod_async(
                buf.inner.raw + at as u64,
                part.as_ptr().cast(),
                part.len(),
                self.raw(),
            )
        };
        self.host().check_at(r, generation)?;
        self.fence_keeping(&[buf], None)
    }

    /// A staging region of `len` bytes for one chunk: pooled, or newly page-locked where the
    /// host allows it; None when none is free and none may be page-locked
    /// ([`Host::set_staging_growth`] says why a host may forbid it).
    pub(crate) fn staging(&self, generation: u64, len: usize) -> Result<Option<Pinned>> {
        if self.host().staging_growth.load(Ordering::Relaxed) {
            return Pinned::take(self.host(), generation, len).map(Some);
        }
        Ok(Pinned::try_take(self.host(), generation, len))
    }

    /// One download chunk through the driver's pageable path (no staging free, and none may be
    /// page-locked: [`Host::set_staging_growth`]): after this stream's earlier work, the driver
    /// copies into `out` through its own staging; every byte of `out` is written when this
    /// returns Ok (the stream is synchronized, which NVIDIA's pageable copy already did).
    pub(crate) fn download_pageable(
        &self,
        buf: &DeviceBuffer,
        at: usize,
        out: &mut [MaybeUninit<u8>],
        generation: u64,
    ) -> Result<()> {
        // SAFETY: `at + out.len()` lies inside `buf`'s allocation (the caller checked the whole
        // range) and `buf` outlives the synchronize below; `out` is writable for its length and
        // nothing else touches it until this returns, after the stream has done the copy.
        let r = unsafe {
            result::mem::copy_dtoh_async(
                out.as_mut_ptr().cast(),
                buf.inner.raw + at as u64,
                out.len(),
                self.raw(),
            )
        };
        self.host().check_at(r, generation)?;
        // SAFETY: a live stream of the bound, current-generation context.
        let r = unsafe { result::stream::synchronize(self.raw()) };
        self.host().check_at(r, generation)
    }

    /// Sets `len` bytes of `buf` from `offset` to `value`, after the work queued before it.
    pub fn fill(
        &self,
        buf: &DeviceBuffer,
        offset: usize,
        len: usize,
        value: u8,
    ) -> Result<Completion> {
        buf.range(offset, len)?;
        let generation = self.enter_with(buf)?;
        if len > 0 {
            // SAFETY: the range lies inside the allocation, kept alive by the fence's batch.
            let r = unsafe {
                result::mem::set_d8_async(buf.inner.raw + offset as u64, value, len, self.raw())
            };
            self.host().check_at(r, generation)?;
        }
        self.fence_keeping(&[buf], None)
    }

    /// Copies `len` bytes from `src` at `src_offset` into `dst` at `dst_offset`, after the work
    /// queued before it.
    pub fn copy(
        &self,
        dst: &DeviceBuffer,
        dst_offset: usize,
        src: &DeviceBuffer,
        src_offset: usize,
        len: usize,
    ) -> Result<Completion> {
        dst.range(dst_offset, len)?;
        src.range(src_offset, len)?;
        self.enter_with(src)?;
        let generation = self.enter_with(dst)?;
        if len > 0 {
            // SAFETY: both ranges lie inside live allocations of this context, both kept alive
            // by the fence's batch until the copy is done.
            let r = unsafe {
                result::mem::copy_dtod_async(
                    dst.inner.raw + dst_offset as u64,
                    src.inner.raw + src_offset as u64,
                    len,
                    self.raw(),
                )
            };
            self.host().check_at(r, generation)?;
        }
        self.fence_keeping(&[dst, src], None)
    }
}

/// A download's hold on its host buffer's region: gives it back when the download ends or is
/// dropped (see `HostBuffer::give_back`).
struct Lent<'a> {
    dst: &'a mut HostBuffer,
    region: Option<Arc<Pinned>>,
}

impl Drop for Lent<'_> {
    fn drop(&mut self) {
        if let Some(region) = self.region.take() {
            self.dst.give_back(region);
        }
    }
}

/// Copies `src` into `dst` with `helpers` helper threads, a step at a time, yielding to the
/// executor after each step: a chunk's copy is hundreds of microseconds of CPU work, and when
/// the device finishes each chunk before it is awaited, every await is ready at once — without
/// the yields, the transfer would hold its thread throughout.
/// A copy of at most [`UNYIELDED_COPY`] bytes (a small transfer's only chunk) does not yield:
/// it holds its thread for a few microseconds, less than the round trip through the executor
/// a yield costs (a guest's 4-byte `buffer.read` suspended and resumed its guest once more).
/// `dst` may be memory not initialised yet (a download's destination); all of it is when the
/// copy returns. Returns the nanoseconds spent copying, the yields left out.
async fn copy_in_steps(dst: &mut [MaybeUninit<u8>], src: &[u8], cfg: &TransferConfig) -> u64 {
    let (helpers, stores) = (cfg.copy_threads, cfg.stores());
    if dst.len() <= UNYIELDED_COPY {
        let start = Instant::now();
        crate::copy::parallel_uninit(dst, src, helpers, stores);
        return nanos_since(start);
    }
    let step = cfg.copy_step_bytes.saturating_mul(helpers + 1);
    let mut copying = 0;
    for (d, s) in dst.chunks_mut(step).zip(src.chunks(step)) {
        let start = Instant::now();
        crate::copy::parallel_uninit(d, s, helpers, stores);
        copying += nanos_since(start);
        yield_now().await;
    }
    copying
}

fn nanos_since(start: Instant) -> u64 {
    u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// Where one pageable transfer's time went, added to its host's counters when the transfer
/// ends or is dropped midway (`HostStats::staging_copy_ns` and beside it): `gpuhost bench`
/// reads them to tell a pipeline bound by the host copy from one bound by the DMA engine.
struct StageClock<'h> {
    host: &'h Host,
    bytes: u64,
    copy_ns: u64,
    wait_ns: u64,
}

impl<'h> StageClock<'h> {
    fn new(host: &'h Host) -> Self {
        Self {
            host,
            bytes: 0,
            copy_ns: 0,
            wait_ns: 0,
        }
    }

    /// One chunk of `bytes` copied in `ns`.
    fn copied(&mut self, bytes: usize, ns: u64) {
        self.bytes += bytes as u64;
        self.copy_ns += ns;
    }

    /// Awaits a chunk's DMA, timed.
    async fn wait(&mut self, done: Completion) -> Result<()> {
        let start = Instant::now();
        let r = done.await;
        self.wait_ns += nanos_since(start);
        r
    }
}

impl Drop for StageClock<'_> {
    fn drop(&mut self) {
        let c = &self.host.counters;
        c.staged_bytes.fetch_add(self.bytes, Ordering::Relaxed);
        c.staging_copy_ns.fetch_add(self.copy_ns, Ordering::Relaxed);
        c.staging_wait_ns.fetch_add(self.wait_ns, Ordering::Relaxed);
    }
}

/// Lets the executor run other tasks (see [`copy_in_steps`]).
async fn yield_now() {
    let mut yielded = false;
    std::future::poll_fn(|cx| {
        if yielded {
            return Poll::Ready(());
        }
        yielded = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(chunk_bytes: usize) -> TransferConfig {
        TransferConfig {
            chunk_bytes,
            chunks_in_flight: 3,
            copy_threads: 0,
            streaming_stores: false,
            copy_step_bytes: STEP_PER_THREAD,
        }
    }

    #[test]
    fn a_plan_covers_the_transfer_in_order_with_chunks_no_larger_than_its_staging() {
        for chunk_bytes in [64 << 10, 1 << 20, 4 << 20, 256 << 20] {
            for len in [1, 4095, MIN_CHUNK - 1, MIN_CHUNK * 8 + 3, 9 << 20, 64 << 20] {
                let (chunk, parts) = cfg(chunk_bytes).plan(len);
                assert!(chunk >= 1 && chunk <= chunk_bytes.max(1));
                let mut at = 0;
                for p in &parts {
                    assert_eq!(p.start, at, "contiguous");
                    assert!(!p.is_empty() && p.len() <= chunk, "{p:?} in {chunk}");
                    at = p.end;
                }
                assert_eq!(at, len, "covers the whole transfer");
            }
        }
    }

    #[test]
    fn a_large_transfer_starts_and_ends_in_quarter_chunks() {
        let (chunk, parts) = cfg(4 << 20).plan(64 << 20);
        assert_eq!(chunk, 4 << 20);
        let sizes: Vec<usize> = parts.iter().map(|p| p.len()).collect();
        assert_eq!(
            &sizes[..4],
            &[1 << 20; 4],
            "the first chunk's worth in quarters"
        );
        assert_eq!(&sizes[sizes.len() - 4..], &[1 << 20; 4], "and the last");
        assert!(sizes[4..sizes.len() - 4].iter().all(|&s| s == chunk));
        // Small chunks are not cut below MIN_CHUNK.
        let (chunk, parts) = cfg(1 << 20).plan(3 << 20);
        assert_eq!(chunk, MIN_CHUNK);
        assert!(parts.iter().all(|p| p.len() == MIN_CHUNK));
    }
}
