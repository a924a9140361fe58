//! A staged download its caller drains piece by piece into memory it hands over only for the
//! length of each call: [`Stream::download`] needs its destination borrowed across awaits, which
//! memory the caller cannot pin down between polls (a WebAssembly guest's, handed over again on
//! every read of a stream) cannot give. Same pipeline as `download_uninit`: chunks of pooled
//! page-locked staging, `chunks_in_flight` DMAs queued ahead, each chunk's next one queued
//! before it is copied out with the copy threads.
//!
//! Waiting and copying are apart: [`DrainedDownload::poll_landed`] awaits the device and touches
//! no caller memory; [`DrainedDownload::drain_into`] never waits and copies only what has landed.
//! Cancel safety is `transfer.rs`'s: dropping a drained download midway leaves its queued DMAs
//! running into staging that their fences keep alive, and the staging goes back to the pool
//! when they end.

use std::collections::VecDeque;
use std::ops::Range;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use super::Dir;
use crate::buffer::DeviceBuffer;
use crate::completion::Completion;
use crate::error::Result;
use crate::pinned::Pinned;
use crate::stream::Stream;

/// One chunk queued or landed: its DMA's fence (`None` once it has ended), its staging, the
/// range of the download it holds and how much of it was copied out.
struct Chunk {
    done: Option<Completion>,
    staging: Staged,
    range: Range<usize>,
    copied: usize,
}

/// Where a chunk lands: pooled page-locked staging (a DMA), or, for a download starved of it
/// where none may be page-locked, plain heap memory the driver's pageable path filled.
enum Staged {
    Pinned(Arc<Pinned>),
    Heap(Box<[u8]>),
}

impl Staged {
    fn bytes(&self, len: usize) -> &[u8] {
        match self {
            Staged::Pinned(p) => p.bytes(len),
            Staged::Heap(b) => &b[..len],
        }
    }
}

impl Chunk {
    /// Whether its DMA has landed, without waiting; the DMA's error if it failed.
    fn settle(&mut self) -> Result<bool> {
        let Some(done) = self.done.as_mut() else {
            return Ok(true);
        };
        if !done.is_done() {
            return Ok(false);
        }
        // Done: this poll only collects its result.
        if let Poll::Ready(r) = Pin::new(done).poll(&mut Context::from_waker(Waker::noop())) {
            r?;
        }
        self.done = None;
        Ok(true)
    }
}

/// A download of a device range started by [`Stream::start_download`]; see the module header.
pub struct DrainedDownload {
    stream: Arc<Stream>,
    buf: DeviceBuffer,
    offset: usize,
    chunk: usize,
    /// DMAs kept on the way (`TransferConfig::chunks_in_flight`).
    in_flight: usize,
    copy_threads: usize,
    stores: crate::copy::Stores,
    /// Chunks not yet queued, in order.
    planned: VecDeque<Range<usize>>,
    /// Chunks queued, in order; the front one is drained first.
    queued: VecDeque<Chunk>,
    /// Since when this download has held no staging and found none free (see [`STAGING_WAIT`]).
    starved_since: Option<Instant>,
}

/// How long a download that holds no staging waits for a pooled region, where staging may not
/// grow, before it takes the driver's pageable path for a chunk: regions still held by dropped
/// transfers' DMAs come back within a DMA's time, while one held by a transfer left open (a
/// guest's undrained read) may never come back, and a download must not wait on another's
/// reader. Not page-locking: on NVIDIA that waits for the whole device, e.g. for a kernel that
/// waits for this guest's next write.
const STAGING_WAIT: Duration = Duration::from_millis(20);

impl std::fmt::Debug for DrainedDownload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DrainedDownload")
            .field("offset", &self.offset)
            .field("remaining", &self.remaining())
            .finish()
    }
}

impl Stream {
    /// Starts copying `len` bytes of `buf` from `offset` to the host, after the work queued on
    /// this stream before it: the first chunks' DMAs are queued now, and the bytes are taken
    /// out with [`DrainedDownload::drain_into`] as they land. The calling thread never waits
    /// for the device. Staging comes from the pool; where the host may not page-lock more
    /// ([`Host::set_staging_growth`](crate::Host::set_staging_growth)), a chunk waits for a
    /// free region instead, unless the download holds none and has waited 20 ms: then that
    /// chunk is copied through the driver's pageable path into heap memory, as
    /// [`Stream::download`] does with no staging free.
    pub fn start_download(
        self: &Arc<Self>,
        buf: &DeviceBuffer,
        offset: usize,
        len: usize,
    ) -> Result<DrainedDownload> {
        buf.range(offset, len)?;
        let cfg = self.host().transfer_config();
        let (chunk, plan) = cfg.plan(len);
        let mut d = DrainedDownload {
            stream: self.clone(),
            buf: buf.clone(),
            offset,
            chunk,
            in_flight: cfg.chunks_in_flight,
            copy_threads: cfg.copy_threads,
            stores: cfg.stores(),
            planned: plan.into(),
            queued: VecDeque::with_capacity(cfg.chunks_in_flight + 1),
            starved_since: None,
        };
        d.fill()?;
        Ok(d)
    }
}

impl DrainedDownload {
    /// Bytes not yet drained.
    pub fn remaining(&self) -> usize {
        let queued: usize = self.queued.iter().map(|c| c.range.len() - c.copied).sum();
        queued + self.planned.iter().map(|r| r.len()).sum::<usize>()
    }

    /// Queues DMAs of planned chunks until `in_flight` are on the way or no staging is free.
    fn fill(&mut self) -> Result<()> {
        while self.queued.iter().filter(|c| c.done.is_some()).count() < self.in_flight
            && self.queue_next()?
        {}
        Ok(())
    }

    /// Queues the DMA of the next planned chunk; false when none is left or no staging is free.
    fn queue_next(&mut self) -> Result<bool> {
        let Some(range) = self.planned.front().cloned() else {
            return Ok(false);
        };
        let s = &self.stream;
        let generation = s.enter_with(&self.buf)?;
        let starved = |since: Option<Instant>| since.is_some_and(|t| t.elapsed() >= STAGING_WAIT);
        let Some(staging) = s.staging(generation, self.chunk)? else {
            if !self.queued.is_empty() {
                return Ok(false);
            }
            let since = *self.starved_since.get_or_insert_with(Instant::now);
            if !starved(Some(since)) {
                return Ok(false);
            }
            // Starved: this chunk through the pageable path, landed when the copy returns.
            let mut heap = vec![0u8; range.len()].into_boxed_slice();
            let at = self.offset + range.start;
            // SAFETY: download_pageable writes every byte of its destination.
            let out = unsafe { crate::copy::as_uninit(&mut heap) };
            s.download_pageable(&self.buf, at, out, generation)?;
            self.starved_since = None;
            self.planned.pop_front();
            self.queued.push_back(Chunk {
                done: None,
                staging: Staged::Heap(heap),
                range,
                copied: 0,
            });
            return Ok(true);
        };
        self.starved_since = None;
        let staging = Arc::new(staging);
        let at = self.offset + range.start;
        let done = s.dma(
            Dir::Down,
            &self.buf,
            at,
            &staging,
            0..range.len(),
            generation,
        )?;
        self.planned.pop_front();
        self.queued.push_back(Chunk {
            done: Some(done),
            staging: Staged::Pinned(staging),
            range,
            copied: 0,
        });
        Ok(true)
    }

    /// Ready once the next chunk has landed (or nothing is left); touches no caller memory, so
    /// it may be awaited with no destination at hand. An error is the device's: the download is
    /// then over.
    pub fn poll_landed(&mut self, cx: &mut Context<'_>) -> Poll<Result<()>> {
        self.fill()?;
        let Some(front) = self.queued.front_mut() else {
            if self.planned.is_empty() {
                return Poll::Ready(Ok(()));
            }
            // No staging is free: other transfers hold it all. Look again next poll, until
            // STAGING_WAIT has passed and `fill` takes the pageable path.
            cx.waker().wake_by_ref();
            return Poll::Pending;
        };
        let Some(done) = front.done.as_mut() else {
            return Poll::Ready(Ok(()));
        };
        std::task::ready!(Pin::new(done).poll(cx))?;
        front.done = None;
        // The next chunk's DMA is queued before this one is copied out.
        self.fill()?;
        Poll::Ready(Ok(()))
    }

    /// Bytes landed and not drained yet, in order from the next one: what
    /// [`drain_into`](Self::drain_into) can copy now. Never waits for the device.
    pub fn landed(&mut self) -> Result<usize> {
        let mut n = 0;
        for c in &mut self.queued {
            if !c.settle()? {
                break;
            }
            n += c.range.len() - c.copied;
        }
        Ok(n)
    }

    /// Copies into `out` as many landed bytes as fit, in order, and returns how many; 0 when
    /// the next chunk has not landed yet (await [`poll_landed`](Self::poll_landed)) or nothing
    /// is left. Never waits for the device; `out` is written only within this call.
    pub fn drain_into(&mut self, out: &mut [u8]) -> Result<usize> {
        let mut written = 0;
        while written < out.len() {
            let Some(front) = self.queued.front_mut() else {
                break;
            };
            let settled = front.done.is_none();
            if !front.settle()? {
                break;
            }
            if !settled {
                // The next chunk's DMA is queued before this one is copied out.
                self.fill()?;
            }
            let Some(front) = self.queued.front_mut() else {
                break;
            };
            let from = front.copied;
            let n = (front.range.len() - from).min(out.len() - written);
            let landed = &front.staging.bytes(front.range.len())[from..from + n];
            // SAFETY: parallel_uninit writes every byte of its destination, copied from `landed`.
            let dst = unsafe { crate::copy::as_uninit(&mut out[written..written + n]) };
            crate::copy::parallel_uninit(dst, landed, self.copy_threads, self.stores);
            front.copied += n;
            written += n;
            if front.copied == front.range.len() {
                // Its staging goes back to the pool: room for the next chunk's DMA.
                self.queued.pop_front();
                self.fill()?;
            }
        }
        Ok(written)
    }
}
