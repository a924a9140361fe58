//! The control family's executor (`isa::Family::Control`): branches, calls and returns,
//! exits, traps, device-runtime calls, barriers and no-ops, which move the lanes' PCs.

use super::super::access::{LaneFault, lanes};
use super::super::mem::Mem;
use super::super::warp::{MAX_CALL_DEPTH, Warp};
use super::BlockMem;
use crate::api::FaultKind;
use crate::ir::ControlOp;

/// Where the warp goes after a control op.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Flow {
    /// To the next instruction.
    Next,
    /// Somewhere the op already set (branch, call, return, exit, barrier).
    Jumped,
}

impl Warp {
    /// Executes a control op for the lanes in `mask`; a fault names the lane.
    #[inline(always)]
    pub(super) fn control(
        &mut self,
        op: &ControlOp,
        mem: &mut Mem<'_>,
        bm: &BlockMem,
        mask: u32,
    ) -> Result<Flow, LaneFault> {
        match op {
            ControlOp::Bra { target } => {
                self.branch(mask, *target);
                return Ok(Flow::Jumped);
            }
            ControlOp::Brx { idx, targets } => {
                let iv = self.rd(*idx);
                let mut dest = [0u32; 32];
                for l in lanes(mask) {
                    let t = iv[l] & 0xffff_ffff;
                    match targets.get(t as usize) {
                        Some(&pc) => dest[l] = pc,
                        None => return Err((FaultKind::BadBranchIndex { index: t }, l)),
                    }
                }
                self.scatter(mask, &dest);
                return Ok(Flow::Jumped);
            }
            ControlOp::Call { target, args } => {
                if self.stacks.is_empty() {
                    self.stacks = vec![Vec::new(); 32];
                }
                for l in lanes(mask) {
                    if self.stacks[l].len() >= MAX_CALL_DEPTH {
                        return Err((FaultKind::StackOverflow, l));
                    }
                    self.stacks[l].push(self.pc + 1);
                    for &(s, d, len) in args.iter() {
                        self.local_copy(l, s, d, len).map_err(|e| (e, l))?;
                    }
                }
                self.entered_call(mask);
                self.branch(mask, *target);
                return Ok(Flow::Jumped);
            }
            ControlOp::CallRet { rets } => {
                for l in lanes(mask) {
                    for &(s, d, len) in rets.iter() {
                        self.local_copy(l, s, d, len).map_err(|e| (e, l))?;
                    }
                }
            }
            ControlOp::Ret => {
                self.ret(mask);
                return Ok(Flow::Jumped);
            }
            ControlOp::Exit => {
                self.exit(mask);
                return Ok(Flow::Jumped);
            }
            ControlOp::AssertFail { args } => {
                if mask != 0 {
                    let l = Warp::first(mask);
                    let kind = self.assert_fail(mem, bm, l, args).map_err(|e| (e, l))?;
                    return Err((kind, l));
                }
            }
            ControlOp::Vprintf { format, args, ret } => {
                for l in lanes(mask) {
                    self.vprintf(mem, bm, l, *format, *args, *ret)
                        .map_err(|e| (e, l))?;
                }
            }
            ControlOp::Trap => {
                if mask != 0 {
                    return Err((FaultKind::Trap, Warp::first(mask)));
                }
            }
            ControlOp::Nop => {}
            ControlOp::WarpSync => {
                if self.waits_for_yielded(mask) {
                    return Ok(Flow::Jumped);
                }
            }
            ControlOp::Bar { id } => {
                if self.waits_for_yielded(mask) {
                    return Ok(Flow::Jumped);
                }
                if mask != self.active {
                    return Err((FaultKind::BarrierDivergence, Warp::first(self.active)));
                }
                let idv = self.rd(*id);
                self.arrive(&idv);
                return Ok(Flow::Jumped);
            }
        }
        Ok(Flow::Next)
    }

    /// `ret`: lanes with a return address go back to it; lanes without one (in the kernel
    /// body) exit.
    fn ret(&mut self, mask: u32) {
        let skip = self.active & !mask;
        let mut exits = 0u32;
        let mut back = Vec::new();
        let mut flat = 0u32;
        for l in lanes(mask) {
            let Some(stack) = self.stacks.get_mut(l) else {
                exits |= 1 << l;
                continue;
            };
            match stack.pop() {
                Some(pc) => back.push((l, pc)),
                None => exits |= 1 << l,
            }
            if stack.is_empty() {
                flat |= 1 << l;
            }
        }
        // A lane that exits here had an empty stack, so it is among `flat` already.
        self.left_calls(flat);
        self.exited |= exits;
        self.active = 0;
        for (l, pc) in back {
            self.park(1 << l, pc);
        }
        if skip != 0 {
            self.park(skip, self.pc + 1);
        }
        self.pick();
    }
}
