//! Stream memory operations: cuStreamWriteValue32/64, cuStreamWaitValue32/64 and
//! cuStreamBatchMemOp (CUDA 13 semantics, which are the `_v2` entry points).
//!
//! A write is one atomic store into device memory, made when the stream reaches it. Kernels read
//! device memory through ptxvm's relaxed atomic loads, so the store becomes visible to a kernel
//! that is running on another stream's worker while it spins on the word: this is how a host
//! stops an endless kernel (gpuhost's sandbox abort word). A wait holds its stream's worker until
//! the word satisfies the condition, polling it with atomic loads; it gives up (and lets the
//! stream go on) only when the context is destroyed or has a sticky error, since a GPU waiting on
//! a word that never changes waits forever too.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering, fence};
use std::time::Duration;

use cudarc::driver::sys::CUresult;

use crate::abi::CuResult;
use crate::context::Context;
use crate::graph::{NodeKind, TYPE_MEM_OP};
use crate::memory::{self, Span};

/// `CU_STREAM_WAIT_VALUE_GEQ`: `(int)(*addr - value) >= 0` (a wrap-around comparison).
const WAIT_GEQ: u32 = 0x0;
/// `CU_STREAM_WAIT_VALUE_EQ`.
const WAIT_EQ: u32 = 0x1;
/// `CU_STREAM_WAIT_VALUE_AND`: `(*addr & value) != 0`.
const WAIT_AND: u32 = 0x2;
/// `CU_STREAM_WAIT_VALUE_NOR`: `~(*addr | value) != 0`.
const WAIT_NOR: u32 = 0x3;
/// `CU_STREAM_WAIT_VALUE_FLUSH`: flush remote writes after the wait; every write softcuda makes
/// is already visible, so it changes nothing.
const WAIT_FLUSH: u32 = 1 << 30;

/// `CUstreamBatchMemOpType` values.
const OP_WAIT_VALUE_32: u32 = 1;
const OP_WRITE_VALUE_32: u32 = 2;
const OP_FLUSH_REMOTE_WRITES: u32 = 3;
const OP_WAIT_VALUE_64: u32 = 4;
const OP_WRITE_VALUE_64: u32 = 5;
const OP_BARRIER: u32 = 6;

/// The most operations one cuStreamBatchMemOp takes (NVIDIA documents a limit of 256).
const MAX_BATCH: usize = 256;

/// The longest pause between two polls of a waited-on word: short enough that a released
/// stream goes on promptly, long enough that a long wait costs no CPU to speak of.
const MAX_POLL_PAUSE: Duration = Duration::from_micros(200);

/// The width of the word an operation touches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Width {
    /// 32 bits (`*32` calls, `..._VALUE_32` batch ops).
    W32,
    /// 64 bits.
    W64,
}

impl Width {
    fn bytes(self) -> u64 {
        match self {
            Width::W32 => 4,
            Width::W64 => 8,
        }
    }
}

/// One checked operation, ready to run on a stream worker.
enum Op {
    Write { word: Word, value: u64 },
    Wait { word: Word, value: u64, cond: u32 },
    Barrier,
}

/// An aligned device word, holding its allocation alive.
struct Word {
    span: Span,
    width: Width,
}

impl Word {
    /// The word at `addr`: it must lie in device-visible memory and be aligned to its width.
    fn at(addr: u64, width: Width) -> CuResult<Word> {
        if !addr.is_multiple_of(width.bytes()) {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        }
        let span = memory::span(addr, width.bytes())?;
        Ok(Word { span, width })
    }

    fn load(&self) -> u64 {
        // SAFETY: the span covers `width` live bytes aligned to `width` (checked in `at`, and
        // blocks are at least that aligned), kept alive by the span; every concurrent access to
        // device memory (ptxvm's loads and stores) is atomic.
        unsafe {
            match self.width {
                Width::W32 => {
                    u64::from(AtomicU32::from_ptr(self.span.ptr().cast()).load(Ordering::Acquire))
                }
                Width::W64 => AtomicU64::from_ptr(self.span.ptr().cast()).load(Ordering::Acquire),
            }
        }
    }

    fn store(&self, value: u64) {
        // SAFETY: as in `load`.
        unsafe {
            match self.width {
                Width::W32 => AtomicU32::from_ptr(self.span.ptr().cast())
                    .store(value as u32, Ordering::Release),
                Width::W64 => {
                    AtomicU64::from_ptr(self.span.ptr().cast()).store(value, Ordering::Release)
                }
            }
        }
    }

    /// Whether the word's current value satisfies `cond` against `value`.
    fn satisfies(&self, cond: u32, value: u64) -> bool {
        let now = self.load();
        match (cond, self.width) {
            (WAIT_GEQ, Width::W32) => (now as u32).wrapping_sub(value as u32) as i32 >= 0,
            (WAIT_GEQ, Width::W64) => now.wrapping_sub(value) as i64 >= 0,
            (WAIT_EQ, _) => now == value,
            (WAIT_AND, _) => now & value != 0,
            (WAIT_NOR, Width::W32) => !(now as u32 | value as u32) != 0,
            (WAIT_NOR, Width::W64) => !(now | value) != 0,
            // `wait` checks the condition before an Op is built.
            _ => true,
        }
    }
}

/// Every write orders the stream's earlier writes before it: the v2 entry points take no write
/// flag (`CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER` is `CUDA_ERROR_INVALID_VALUE` on the H200, as
/// CUDA documents for the v2 API).
fn write_op(addr: u64, value: u64, width: Width, flags: u32) -> CuResult<Op> {
    if flags != 0 {
        return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
    }
    let word = Word::at(addr, width)?;
    Ok(Op::Write { word, value })
}

fn wait_op(addr: u64, value: u64, width: Width, flags: u32) -> CuResult<Op> {
    let cond = flags & !WAIT_FLUSH;
    if cond > WAIT_NOR {
        return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
    }
    let word = Word::at(addr, width)?;
    Ok(Op::Wait { word, value, cond })
}

impl Op {
    /// Runs the operation on the stream worker; a wait gives up when `ctx` can no longer run work.
    fn run(&self, ctx: &Context) {
        match self {
            Op::Write { word, value } => {
                // The write orders every earlier write of the stream before it.
                fence(Ordering::SeqCst);
                word.store(*value);
            }
            Op::Wait { word, value, cond } => {
                let mut pause = Duration::from_micros(1);
                while !word.satisfies(*cond, *value) {
                    if ctx.check_usable().is_err() {
                        return;
                    }
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(MAX_POLL_PAUSE);
                }
                fence(Ordering::SeqCst);
            }
            Op::Barrier => fence(Ordering::SeqCst),
        }
    }
}

/// Queues `ops` on the stream (or records them as one node of a capture), to run in order.
fn submit(
    stream: u64,
    ops: Vec<Op>,
    replay: impl Fn(u64) -> CuResult<()> + Send + Sync + 'static,
) -> CuResult<()> {
    let (ctx, s) = crate::stream::resolve(stream)?;
    if let Some(capture) = crate::capture::active(stream) {
        return capture.add(stream, NodeKind::Call(Arc::new(replay), TYPE_MEM_OP));
    }
    let guard_ctx = Arc::clone(&ctx);
    ctx.submit(
        &s,
        Box::new(move || {
            // After a kernel fault nothing more runs in the context, as on a GPU.
            if guard_ctx.sticky().is_none() {
                for op in &ops {
                    op.run(&guard_ctx);
                }
            }
        }),
    );
    Ok(())
}

/// cuStreamWriteValue32/64: stores `value` at `addr` when the stream reaches this point.
pub(crate) fn write(stream: u64, addr: u64, value: u64, width: Width, flags: u32) -> CuResult<()> {
    crate::context::live()?;
    let op = write_op(addr, value, width, flags)?;
    submit(stream, vec![op], move |s| {
        write(s, addr, value, width, flags)
    })
}

/// cuStreamWaitValue32/64: later work on the stream waits until the word at `addr` satisfies the
/// condition in `flags`.
pub(crate) fn wait(stream: u64, addr: u64, value: u64, width: Width, flags: u32) -> CuResult<()> {
    crate::context::live()?;
    let op = wait_op(addr, value, width, flags)?;
    submit(stream, vec![op], move |s| {
        wait(s, addr, value, width, flags)
    })
}

/// One `CUstreamBatchMemOpParams` (a 48-byte union) as its raw 64-bit words: the operation type
/// in the low half of word 0, then (for waits and writes) the address, the value, and the flags
/// in the low half of word 3; flush and barrier ops keep their flags in the high half of word 0.
pub(crate) type RawBatchOp = [u64; 6];

/// cuStreamBatchMemOp: the operations run in order as one unit of stream work. Batch `flags` must
/// be 0; an unknown operation or a bad address fails the whole call before anything is queued.
pub(crate) fn batch(stream: u64, raw: Vec<RawBatchOp>, flags: u32) -> CuResult<()> {
    crate::context::live()?;
    if flags != 0 || raw.is_empty() || raw.len() > MAX_BATCH {
        return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
    }
    let mut ops = Vec::with_capacity(raw.len());
    for words in &raw {
        let (kind, addr, value, op_flags) = (words[0] as u32, words[1], words[2], words[3] as u32);
        ops.push(match kind {
            OP_WAIT_VALUE_32 => wait_op(addr, u64::from(value as u32), Width::W32, op_flags)?,
            OP_WAIT_VALUE_64 => wait_op(addr, value, Width::W64, op_flags)?,
            OP_WRITE_VALUE_32 => write_op(addr, u64::from(value as u32), Width::W32, op_flags)?,
            OP_WRITE_VALUE_64 => write_op(addr, value, Width::W64, op_flags)?,
            OP_FLUSH_REMOTE_WRITES | OP_BARRIER => Op::Barrier,
            _ => return Err(CUresult::CUDA_ERROR_INVALID_VALUE),
        });
    }
    submit(stream, ops, move |s| batch(s, raw.clone(), flags))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::{Kind, alloc, free};

    fn word(width: Width, value: u64) -> (u64, Word) {
        let addr = alloc(u64::MAX - 7, 16, Kind::Device).unwrap();
        let w = Word::at(addr, width).unwrap();
        w.store(value);
        (addr, w)
    }

    #[test]
    fn wait_conditions_follow_cuda_h() {
        let (addr, w) = word(Width::W32, 5);
        assert!(w.satisfies(WAIT_GEQ, 5) && w.satisfies(WAIT_GEQ, 4) && !w.satisfies(WAIT_GEQ, 6));
        // GEQ compares with wrap-around: 5 is "after" 0xffff_fff0.
        assert!(w.satisfies(WAIT_GEQ, 0xffff_fff0));
        assert!(w.satisfies(WAIT_EQ, 5) && !w.satisfies(WAIT_EQ, 4));
        assert!(w.satisfies(WAIT_AND, 4) && !w.satisfies(WAIT_AND, 2));
        // NOR: some bit is clear in both the word and the value.
        assert!(w.satisfies(WAIT_NOR, 0) && !w.satisfies(WAIT_NOR, !5u32 as u64));
        free(addr, &[Kind::Device]).unwrap();
        let (addr, w) = word(Width::W64, 1 << 40);
        assert!(w.satisfies(WAIT_EQ, 1 << 40) && !w.satisfies(WAIT_EQ, 0));
        assert!(!w.satisfies(WAIT_NOR, !(1u64 << 40)));
        free(addr, &[Kind::Device]).unwrap();
    }

    #[test]
    fn misaligned_words_and_unknown_flags_are_invalid_value() {
        let addr = alloc(u64::MAX - 7, 16, Kind::Device).unwrap();
        let invalid = Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        assert_eq!(Word::at(addr + 2, Width::W32).map(|_| ()), invalid);
        assert_eq!(Word::at(addr + 4, Width::W64).map(|_| ()), invalid);
        assert_eq!(write_op(addr, 1, Width::W32, 1).map(|_| ()), invalid);
        assert_eq!(write_op(addr, 1, Width::W32, 2).map(|_| ()), invalid);
        assert_eq!(wait_op(addr, 1, Width::W32, 4).map(|_| ()), invalid);
        assert!(wait_op(addr, 1, Width::W32, WAIT_NOR | WAIT_FLUSH).is_ok());
        free(addr, &[Kind::Device]).unwrap();
    }
}
