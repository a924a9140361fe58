//! The interpreter loop: fetch the running group's instruction, compute its lane mask once,
//! dispatch on the decoded op's family, and apply it to all lanes of the group. Each family of
//! the instruction set (`isa::Family`) has its executor here: `arith`, `memory`, `control`,
//! `collective` (and `matrix`, the warp's matrix instructions), `texture`.

mod arith;
mod collective;
mod control;
mod matrix;
mod mbarrier;
mod memory;
mod texture;
mod wmma;

use control::Flow;

use super::mem::Mem;
use super::warp::Warp;
use crate::api::FaultKind;
use crate::ir::{Kernel, NO_REG, Op};

/// Why a warp stopped running.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Stop {
    /// No runnable lanes: all exited or waiting at a barrier.
    Blocked,
    /// Used up its instruction slice; more to run.
    Slice,
}

/// A fault inside a warp: what, which lane, which PTX line.
#[derive(Debug)]
pub(crate) struct WarpFault {
    pub kind: FaultKind,
    pub lane: usize,
    pub line: u32,
}

/// Block-wide memory the warp can reach.
pub(crate) struct BlockMem {
    pub shared: *mut u8,
    pub shared_len: u64,
}

impl Warp {
    /// Runs until the warp blocks or `budget` instructions have been dispatched.
    pub(crate) fn run(
        &mut self,
        k: &Kernel,
        mem: &mut Mem<'_>,
        bm: &BlockMem,
        budget: u64,
    ) -> Result<Stop, WarpFault> {
        let code = &k.code[..];
        let mut n = 0u64;
        while self.active != 0 {
            if n >= budget {
                return Ok(Stop::Slice);
            }
            n += 1;
            let Some(inst) = code.get(self.pc as usize) else {
                return Err(WarpFault {
                    kind: FaultKind::Trap,
                    lane: Warp::first(self.active),
                    line: 0,
                });
            };
            let mut mask = self.active;
            if inst.guard != NO_REG {
                let g = &self.regs[inst.guard as usize];
                let mut gm = 0u32;
                for (l, v) in g.iter().enumerate() {
                    gm |= ((*v as u32 & 1) ^ u32::from(inst.guard_neg)) << l;
                }
                mask &= gm;
            }
            self.warp_instructions += 1;
            self.lane_instructions += u64::from(mask.count_ones());
            let fault = |kind, lane| WarpFault {
                kind,
                lane,
                line: inst.line,
            };
            match &inst.op {
                Op::Arith(op) => self.arith(op, mask),
                Op::Memory(op) => {
                    self.memory(op, mem, bm, mask)
                        .map_err(|(e, l)| fault(e, l))?;
                    if self.stalled {
                        self.stalled = false;
                        self.goto(self.pc + 1);
                        return Ok(Stop::Slice);
                    }
                }
                Op::Control(op) => {
                    let flow = self
                        .control(op, mem, bm, mask)
                        .map_err(|(e, l)| fault(e, l))?;
                    if flow == Flow::Jumped {
                        continue;
                    }
                }
                Op::Collective(op) => {
                    if self.waits_for_yielded(mask) {
                        continue;
                    }
                    self.collective(op, mask)
                }
                Op::Texture(op) => self.texture(op, mem, mask).map_err(|(e, l)| fault(e, l))?,
            }
            self.goto(self.pc + 1);
        }
        Ok(Stop::Blocked)
    }
}
