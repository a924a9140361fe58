//! Decoder for `mbarrier` (`Family::Memory`): `init`, `inval`, `arrive` (with `.noComplete`, a
//! count, `arrive_drop`), `test_wait` and `try_wait` (by state or `.parity`), on `.shared` or
//! generic addresses, `.b64` objects; and `cp.async.mbarrier.arrive`. The cluster scope,
//! transaction counts (`expect_tx`, `complete_tx`, which only the bulk copies use) and
//! `pending_count` are `Error::Unsupported` with the line named.

use super::mods::Mods;
use super::{Ctx, R};
use crate::ast::{self, Operand};
use crate::ir::{ControlOp, Mbarrier, MbarrierKind, MemoryOp, Space, Src, Ty};

impl Ctx<'_> {
    /// `mbarrier.<op>{.sem}{.scope}{.shared}.b64 …`.
    pub(super) fn mbarrier(&mut self, i: &ast::Inst, m: &Mods) -> R<()> {
        if m.last_ty() != Some(Ty::B64) {
            return self.invalid("mbarrier takes .b64 (its object is 8 bytes)");
        }
        let kind = match () {
            _ if m.has("init") => MbarrierKind::Init,
            _ if m.has("inval") => MbarrierKind::Inval,
            _ if m.has("arrive") || m.has("arrive_drop") => MbarrierKind::Arrive {
                drop: m.has("arrive_drop"),
                complete: !m.has("noComplete"),
            },
            _ if m.has("test_wait") || m.has("try_wait") => MbarrierKind::Wait {
                parity: m.has("parity"),
            },
            _ => {
                return self.unsup(
                    "this mbarrier operation (ptxvm runs init, inval, arrive, arrive_drop, \
                     test_wait and try_wait)",
                );
            }
        };
        let space = m.space().unwrap_or(Space::Generic);
        if !matches!(space, Space::Generic | Space::Shared) {
            return self.invalid("mbarrier objects live in .shared memory");
        }
        let ops = &i.operands;
        // The address is the first operand of init/inval, the second of the others (after the
        // state or predicate they write); the operand after it, when given, is `a`.
        let (d, at) = match kind {
            MbarrierKind::Init | MbarrierKind::Inval => (self.sink, 0),
            _ => match ops.first() {
                Some(Operand::Name(n)) if n.as_ref() == "_" => (self.sink, 1),
                Some(o) => (self.dst(o)?, 1),
                None => return self.invalid("mbarrier takes a destination and an [address]"),
            },
        };
        let Some(addr_op) = ops.get(at) else {
            return self.invalid("mbarrier takes an [address]");
        };
        let (space, addr) = self.addr(addr_op, space)?;
        let a = match (kind, ops.get(at + 1)) {
            (MbarrierKind::Inval, None) => Src::Imm(0),
            (MbarrierKind::Arrive { complete: true, .. }, None) => Src::Imm(1),
            (MbarrierKind::Inval, Some(_)) => {
                return self.invalid("mbarrier.inval takes [address]");
            }
            (_, Some(o)) => {
                let ty = match kind {
                    MbarrierKind::Wait { parity: false } => Ty::B64,
                    _ => Ty::U32,
                };
                self.src(o, ty)?
            }
            (_, None) => {
                return self.invalid(
                    "this mbarrier operation takes an operand after its address (a count, a \
                     state or a parity)",
                );
            }
        };
        // try_wait alone may add a suspend-time hint (ptxvm never suspends: it is ignored).
        let hint = usize::from(matches!(kind, MbarrierKind::Wait { .. }) && m.has("try_wait"));
        if ops.len() > at + 2 + hint {
            return self.invalid("too many operands for mbarrier");
        }
        self.emit(
            i,
            MemoryOp::Mbarrier(Box::new(Mbarrier {
                kind,
                space,
                addr,
                d,
                a,
            })),
        )
    }

    /// `cp.async.mbarrier.arrive{.noinc}{.shared}.b64 [addr]`: an arrival once the thread's
    /// earlier `cp.async` copies are done, which in ptxvm they are when issued. Without
    /// `.noinc` the ISA first adds one to the pending count, so the two cancel: nothing to do.
    pub(super) fn cp_async_arrive(&mut self, i: &ast::Inst, m: &Mods) -> R<()> {
        if m.last_ty() != Some(Ty::B64) || i.operands.len() != 1 {
            return self.invalid("cp.async.mbarrier.arrive takes .b64 and an [address]");
        }
        let space = m.space().unwrap_or(Space::Generic);
        let (space, addr) = self.addr(&i.operands[0], space)?;
        if !m.has("noinc") {
            return self.emit(i, ControlOp::Nop);
        }
        let arrive = Mbarrier {
            kind: MbarrierKind::Arrive {
                drop: false,
                complete: true,
            },
            space,
            addr,
            d: self.sink,
            a: Src::Imm(1),
        };
        self.emit(i, MemoryOp::Mbarrier(Box::new(arrive)))
    }
}
