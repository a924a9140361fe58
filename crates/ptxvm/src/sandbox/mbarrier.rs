//! `mbarrier` and `cp.async.mbarrier.arrive` for sandboxed guests, run as software barriers on
//! the guest's own shared words rather than as the hardware's.
//!
//! Fencing the address alone would not make the hardware barrier safe. An `mbarrier` object
//! is 8 bytes of shared memory that the guest can also overwrite with plain stores, and NVIDIA's
//! hardware does not shrug off operations on a word that holds no barrier: on the H100 (session
//! 37, scripts/probes/mbarrier-probe.cu) every arrival on a word `mbarrier.init` never made a
//! barrier, some waits on garbage, and an arrival past a phase's pending count ended the launch
//! with `CUDA_ERROR_LAUNCH_FAILED` and lost the context, every tenant's with it. So the rewrite
//! replaces each operation with plain shared loads and 32-bit atomic adds on the same 8 bytes,
//! in a layout of the sandbox's own; whatever a guest writes there, the worst it gets is a
//! wrong answer of its own.
//!
//! The word: in its low half, the arrivals still pending in the current phase (bits 0–19; bits
//! 20–31 take the borrows of arrivals racing a completion); in its high half, the arrivals
//! each phase expects (bits 32–51) and the count of completed phases (bits 52–63, whose lowest
//! bit is the current phase's parity). An arrival of `c` adds `-c` to the low half, taking `c`
//! off the pending count (the adds only add, so each half is exact in any order, borrows
//! included); then, by the pending count it took `c` from:
//! - above `c`: the phase goes on;
//! - from 1 to `c`: this arrival completes the phase. A second add puts back the expected
//!   count (and what the arrival took past the pending one: an arrival past the pending
//!   count, which faults on NVIDIA, simply completes the phase) and counts the phase;
//! - 0: another arrival is between its two adds, completing the phase, and this one counts
//!   towards the next (its borrow from the expected field is given back by that second add).
//!   Its state is the next phase's. Only an arrival not ordered after the phase's end (no
//!   correct program's, whose arrivals follow their waits) gets here; one that comes after
//!   such an arrival and before the second add reads a pending count near 2^20 and returns
//!   the state of the phase being completed: a wait on it ends a phase early, the guest's own
//!   wrong answer. The completing arrival puts the expected count back into the low half,
//!   then counts the phase in the high half;
//! - `.noComplete` never completes a phase (the ISA makes it undefined): where it would, the
//!   second add leaves one arrival pending, and the next arrival completes the phase;
//! - `arrive_drop` first takes `c` off the expected count for the phases after (below 0 it
//!   borrows from the phase count: the guest's own word, and the ISA leaves it undefined);
//! - the arrival returns the word as it was, as its state; a wait by state is over once the
//!   phase count differs from the state's, and a wait by parity once the current parity differs
//!   from the operand's (its phase completed). `test_wait` and `try_wait` both test once and
//!   never suspend (the ISA lets `try_wait` return false at any time), so a guest's spin is its
//!   own loop, and its back-edge polls the abort epoch like any other.
//!
//! Arrivals are release and waits acquire at block scope, as the instructions' defaults are:
//! the add to the pending count is `acq_rel` (the arrival that completes a phase thereby
//! acquires every earlier arrival's release), the add that counts the phase `release`, and a
//! wait's load of the high half `acquire`. No operation loops: a compare-and-swap loop, which
//! this replaced, had every lane of a warp that arrived together retry in turn (and so does
//! ptxas's build of a 64-bit shared add). `init` stores the word; `inval` only checks its
//! address (on NVIDIA it leaves the word as it is).
//!
//! The address is fenced as a shared access of 8 bytes (window.rs): aligned down to 8, checked
//! against the block's shared window, and out of it the operation is skipped and the fault word
//! noted, a wait's predicate set (so a spin on it ends) and an arrival's state zeroed. A
//! generic address is used only where `isspacep.shared` places it (converted with
//! `cvta.to.shared`, then checked the same way); one that points at global or local memory is
//! skipped and reported: on NVIDIA an `mbarrier` outside shared memory is undefined.
//!
//! `cp.async.mbarrier.arrive` arrives once the thread's earlier `cp.async` copies are done:
//! the rewrite waits for them (`cp.async.wait_all`), then, with `.noinc`, arrives; without it
//! the ISA adds one to the pending count before the asynchronous arrival, and the two cancel.
//! Transaction counts (`expect_tx`, `complete_tx`, which only the refused bulk copies use),
//! `pending_count`, the cluster scope and `.shared::cluster` are refused, naming the line.

use super::fence::{Src, refused};
use super::print::O;
use super::put::put;
use super::rewrite::{Fx, R};
use crate::ast::{Inst, Operand, Stmt, Str};

/// Each count's bits in the word.
const COUNT_MASK: i64 = (1 << 20) - 1;
/// Where the expected count starts: the word's high half, apart from the pending count's, since
/// the adds work on one half at a time.
const EXPECTED_SHIFT: i64 = 32;
/// Where the phase count starts (its lowest bit is the parity).
const PHASE_SHIFT: i64 = 52;
/// One completed phase, in the word.
const PHASE_ONE: i64 = 1 << PHASE_SHIFT;
/// One completed phase, in the high half.
const PHASE_ONE_HIGH: i64 = 1 << (PHASE_SHIFT - 32);

/// What the forms the sandbox allows end with, for its refusals.
const ALLOWED: &str = "the sandbox allows mbarrier.init, inval, arrive (.noComplete, a count), \
                       arrive_drop, test_wait and try_wait (by state or .parity) on .b64 objects \
                       in the block's .shared memory (or generic addresses there), and \
                       cp.async.mbarrier.arrive{.noinc}";

/// One `mbarrier` operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Init,
    Inval,
    Arrive { drop: bool, complete: bool },
    Wait { parity: bool },
}

/// A count, state or parity operand: a register, or an immediate.
#[derive(Clone, Copy)]
enum Val<'m> {
    Reg(&'m str),
    Imm(i64),
}

/// The operation and whether the address is `.shared` (else generic), from the modifiers;
/// forms the sandbox does not run are refused with what to do instead.
fn kind_of(i: &Inst) -> R<(Kind, bool)> {
    let (mut kind, mut shared, mut b64) = (None, false, false);
    let (mut no_complete, mut parity) = (false, false);
    for m in i.mods.iter() {
        let k = match m.as_ref() {
            "init" => Kind::Init,
            "inval" => Kind::Inval,
            "arrive" | "arrive_drop" => Kind::Arrive {
                drop: m == "arrive_drop",
                complete: true,
            },
            "test_wait" | "try_wait" => Kind::Wait { parity: false },
            "noComplete" => {
                no_complete = true;
                continue;
            }
            "parity" => {
                parity = true;
                continue;
            }
            "shared" | "shared::cta" => {
                shared = true;
                continue;
            }
            "b64" => {
                b64 = true;
                continue;
            }
            "release" | "acquire" | "relaxed" | "cta" => continue,
            "expect_tx" | "complete_tx" => {
                return refused(
                    i.line,
                    format!(
                        "mbarrier .{m}: transaction counts belong to the bulk asynchronous copies \
                         (cp.async.bulk), which the sandbox refuses; copy with cp.async and \
                         arrive with cp.async.mbarrier.arrive instead"
                    ),
                );
            }
            "pending_count" => {
                return refused(
                    i.line,
                    "mbarrier.pending_count: the sandbox keeps barriers in a layout of its own, \
                     whose state does not hold NVIDIA's count; count arrivals in a .shared \
                     variable instead",
                );
            }
            "cluster" | "shared::cluster" => {
                return refused(
                    i.line,
                    format!(
                        "mbarrier .{m}: barriers across a cluster; the sandbox allows mbarrier \
                         only on the block's own .shared memory (.cta scope)"
                    ),
                );
            }
            other => {
                return refused(i.line, format!("mbarrier with .{other}; {ALLOWED}"));
            }
        };
        if kind.replace(k).is_some() {
            return refused(i.line, format!("mbarrier names two operations; {ALLOWED}"));
        }
    }
    let kind = match kind {
        Some(Kind::Arrive { drop, .. }) if !parity => Kind::Arrive {
            drop,
            complete: !no_complete,
        },
        Some(Kind::Wait { .. }) if !no_complete => Kind::Wait { parity },
        Some(k @ (Kind::Init | Kind::Inval)) if !(no_complete || parity) => k,
        _ => return refused(i.line, format!("this mbarrier form; {ALLOWED}")),
    };
    if !b64 {
        return refused(i.line, "mbarrier takes .b64 (its object is 8 bytes)");
    }
    Ok((kind, shared))
}

impl<'m> Fx<'_, 'm> {
    /// Rewrites one `mbarrier` instruction (the module docs say into what).
    pub(crate) fn mbarrier(&mut self, i: &'m Inst<'m>, out: &mut Vec<O<'m>>) -> R<()> {
        let (kind, shared) = kind_of(i)?;
        let ops = &i.operands;
        let try_wait = i.mods.iter().any(|m| m == "try_wait");
        // The address is the first operand of init/inval, the second of the others (after the
        // state or predicate they write); the operand after it, when given, is their value.
        let (at, most) = match kind {
            Kind::Init => (0, 2),
            Kind::Inval => (0, 1),
            Kind::Arrive { .. } => (1, 3),
            Kind::Wait { .. } => (1, 3 + usize::from(try_wait)),
        };
        let least = match kind {
            Kind::Arrive { complete: true, .. } => 2,
            Kind::Inval => 1,
            _ => 3.min(most),
        };
        if !(least..=most).contains(&ops.len()) {
            return refused(
                i.line,
                format!("mbarrier with {} operands; {ALLOWED}", ops.len()),
            );
        }
        let dst = match kind {
            Kind::Init | Kind::Inval => None,
            Kind::Arrive { .. } => match &ops[0] {
                Operand::Sink => None,
                Operand::Name(n) if n == "_" => None,
                Operand::Name(n) if self.is_reg(n, &["b64", "u64", "s64"]) => Some(n.as_ref()),
                _ => return refused(i.line, "mbarrier.arrive's state must be a 64-bit register"),
            },
            Kind::Wait { .. } => match &ops[0] {
                Operand::Name(n) if self.is_reg(n, &["pred"]) => Some(n.as_ref()),
                _ => {
                    return refused(
                        i.line,
                        "mbarrier's wait result must be a predicate register",
                    );
                }
            },
        };
        let val = match (kind, ops.get(at + 1)) {
            (Kind::Inval, _) | (Kind::Arrive { .. }, None) => Val::Imm(1),
            (Kind::Wait { parity: false }, Some(o)) => self.val(o, &["b64", "u64", "s64"], i)?,
            (_, Some(o)) => self.val(o, &["u32", "b32", "s32"], i)?,
            (_, None) => return refused(i.line, "mbarrier without its count"),
        };
        let end = self.label();
        if let Some((g, neg)) = &i.guard {
            self.bra(out, Some((g.clone(), !neg)), &end);
        }
        // Out of the window, the operation is skipped: to `skip`, which sets what it writes.
        let skip = if dst.is_some() {
            self.label()
        } else {
            end.clone()
        };
        self.barrier_address(i, at, shared, &skip, out)?;
        self.operation(kind, dst, val, out);
        if let Some(d) = dst {
            self.bra(out, None, &end);
            out.push(O::new(Stmt::Label(skip.into(), i.line)));
            Self::text(out, None, |t| match kind {
                Kind::Wait { .. } => {
                    put(t, "mov.u32 %__sbx_o, 0;\n\tsetp.eq.u32 ");
                    put(t, d);
                    put(t, ", %__sbx_o, 0;\n");
                }
                _ => {
                    put(t, "mov.b64 ");
                    put(t, d);
                    put(t, ", 0;\n");
                }
            });
        }
        out.push(O::new(Stmt::Label(end.into(), i.line)));
        Ok(())
    }

    /// `cp.async.mbarrier.arrive{.noinc}{.shared}.b64 [addr]`: waits for the thread's copies,
    /// then arrives with `.noinc` (without it the ISA's added pending arrival and the copies'
    /// arrival cancel, so only the address is checked).
    pub(crate) fn cp_async_arrive(&mut self, i: &'m Inst<'m>, out: &mut Vec<O<'m>>) -> R<()> {
        let (mut shared, mut noinc, mut b64) = (false, false, false);
        for m in i.mods.iter() {
            match m.as_ref() {
                "async" | "mbarrier" | "arrive" => {}
                "noinc" => noinc = true,
                "b64" => b64 = true,
                "shared" | "shared::cta" => shared = true,
                other => {
                    return refused(
                        i.line,
                        format!("cp.async.mbarrier.arrive with .{other}; {ALLOWED}"),
                    );
                }
            }
        }
        if !b64 || i.operands.len() != 1 {
            return refused(
                i.line,
                "cp.async.mbarrier.arrive takes .b64 and one [address]",
            );
        }
        let end = self.label();
        if let Some((g, neg)) = &i.guard {
            self.bra(out, Some((g.clone(), !neg)), &end);
        }
        Self::text(out, None, |t| put(t, "cp.async.wait_all;\n"));
        self.barrier_address(i, 0, shared, &end, out)?;
        if noinc {
            let arrive = Kind::Arrive {
                drop: false,
                complete: true,
            };
            self.operation(arrive, None, Val::Imm(1), out);
        }
        out.push(O::new(Stmt::Label(end.into(), i.line)));
        Ok(())
    }

    /// Whether `n` is a register of one of the types `tys`.
    fn is_reg(&self, n: &str, tys: &[&str]) -> bool {
        self.reg_ty(n).is_some_and(|t| tys.contains(&t))
    }

    /// A count, state or parity operand: an immediate, or a register of one of `tys`.
    fn val(&self, o: &'m Operand<'m>, tys: &[&str], i: &Inst) -> R<Val<'m>> {
        match o {
            Operand::Int(v) => Ok(Val::Imm(*v)),
            Operand::Name(n) if self.is_reg(n, tys) => Ok(Val::Reg(n.as_ref())),
            _ => refused(
                i.line,
                format!(
                    "mbarrier's operand after the address must be an integer or a register of \
                     type .{}",
                    tys[0]
                ),
            ),
        }
    }

    /// `@guard bra label;`, through the rewriter's one way of emitting an instruction.
    fn bra(&self, out: &mut Vec<O<'m>>, guard: Option<(Str<'m>, bool)>, label: &str) {
        self.emit(
            out,
            guard,
            "bra",
            &[],
            &[Operand::Name(Str::borrowed(label))],
        );
    }

    /// `%__sbx_a` := the barrier's address, fenced as an 8-byte shared access: in the block's
    /// shared window and aligned to 8, else (noted as a fenced access) a branch to `skip`. A
    /// generic address must be a shared one (`isspacep.shared`); a named variable must be a
    /// `.shared` one, whatever the space written.
    fn barrier_address(
        &mut self,
        i: &'m Inst<'m>,
        at: usize,
        shared: bool,
        skip: &str,
        out: &mut Vec<O<'m>>,
    ) -> R<()> {
        let Some(Operand::Addr(base, off)) = i.operands.get(at) else {
            return refused(
                i.line,
                "mbarrier's address must be [register+offset] or [variable+offset]",
            );
        };
        let src = self.src_of(base, *off);
        let generic = match src {
            Src::Sym(n, _) if self.shared_size(n).is_none() => {
                return refused(
                    i.line,
                    format!(
                        "mbarrier on {n}: mbarrier objects live in .shared memory; declare it .shared"
                    ),
                );
            }
            Src::Sym(..) => false,
            _ => !shared,
        };
        self.load(out, &src, i.line)?;
        if generic {
            Self::text(out, None, |t| {
                put(t, "isspacep.shared %__sbx_p, %__sbx_a;\n")
            });
            self.fault(out, Some(("%__sbx_p".into(), true)));
            self.bra(out, Some(("%__sbx_p".into(), true)), skip);
            Self::text(out, None, |t| {
                put(t, "cvta.to.shared.u64 %__sbx_a, %__sbx_a;\n")
            });
        }
        let q = self.window_check(out, 8, None, "slo", "shi");
        if let Some((q, _)) = q {
            self.bra(out, Some((q, true)), skip);
        }
        Ok(())
    }

    /// The operation on the fenced word at `[%__sbx_a]`, writing `dst` (the module docs give
    /// the layout).
    fn operation(&mut self, kind: Kind, dst: Option<&str>, val: Val<'_>, out: &mut Vec<O<'m>>) {
        // `%__sbx_<r>` := the operand, masked to a count (`mask`) or as 64 bits (a state).
        let load_val = |t: &mut String, r: &str, mask: Option<i64>| match val {
            Val::Reg(v) => {
                put(
                    t,
                    if mask.is_some() {
                        "cvt.u64.u32 %__sbx_"
                    } else {
                        "mov.b64 %__sbx_"
                    },
                );
                put(t, r);
                put(t, ", ");
                put(t, v);
                put(t, ";\n\t");
                if let Some(m) = mask {
                    put(t, "and.b64 %__sbx_");
                    put(t, r);
                    put(t, ", %__sbx_");
                    put(t, r);
                    put(t, ", ");
                    super::print::int(t, m);
                    put(t, ";\n\t");
                }
            }
            Val::Imm(k) => {
                put(t, "mov.u64 %__sbx_");
                put(t, r);
                put(t, ", ");
                super::print::int(t, mask.map_or(k, |m| k & m));
                put(t, ";\n\t");
            }
        };
        match kind {
            Kind::Inval => {}
            Kind::Init => Self::text(out, None, |t| {
                load_val(t, "b", Some(COUNT_MASK));
                put(t, "shl.b64 %__sbx_c, %__sbx_b, ");
                super::print::int(t, EXPECTED_SHIFT);
                put(t, ";\n\tor.b64 %__sbx_b, %__sbx_b, %__sbx_c;\n");
                put(t, "\tst.shared.u64 [%__sbx_a], %__sbx_b;\n");
            }),
            Kind::Arrive { drop, complete } => self.arrive(
                drop,
                complete,
                dst,
                |t| load_val(t, "c", Some(COUNT_MASK)),
                out,
            ),
            Kind::Wait { parity } => Self::text(out, None, |t| {
                // The high half, which holds the phase count: the half the completing add
                // releases.
                put(
                    t,
                    "ld.acquire.cta.shared.u32 %__sbx_o, [%__sbx_a+4];\n\t\
                     cvt.u64.u32 %__sbx_x, %__sbx_o;\n\tshl.b64 %__sbx_x, %__sbx_x, 32;\n\t",
                );
                let d = dst.unwrap_or("%__sbx_p");
                if parity {
                    // Over once the current parity differs from the operand's.
                    put(t, "shr.u64 %__sbx_x, %__sbx_x, ");
                    super::print::int(t, PHASE_SHIFT);
                    put(
                        t,
                        ";\n\tcvt.u32.u64 %__sbx_o, %__sbx_x;\n\txor.b32 %__sbx_o, %__sbx_o, ",
                    );
                    match val {
                        Val::Reg(v) => put(t, v),
                        Val::Imm(k) => super::print::int(t, k & 1),
                    }
                    put(t, ";\n\tand.b32 %__sbx_o, %__sbx_o, 1;\n\tsetp.ne.u32 ");
                    put(t, d);
                    put(t, ", %__sbx_o, 0;\n");
                } else {
                    // Over once the phase count differs from the state's.
                    load_val(t, "b", None);
                    put(
                        t,
                        "xor.b64 %__sbx_x, %__sbx_x, %__sbx_b;\n\tshr.u64 %__sbx_x, %__sbx_x, ",
                    );
                    super::print::int(t, PHASE_SHIFT);
                    put(t, ";\n\tsetp.ne.u64 ");
                    put(t, d);
                    put(t, ", %__sbx_x, 0;\n");
                }
            }),
        }
    }

    /// An arrival of the count `count` puts in `%__sbx_c`, `dst` := the word before it (the
    /// module docs give the rules). A 32-bit atomic add takes the count off the pending field
    /// in the word's low half; the arrival that takes it to 0 or past it then puts the expected
    /// count back with a second and counts the phase in the high half with a third. A 64-bit
    /// compare-and-swap loop did it in one step, but every lane of a warp arriving together
    /// retried it in turn: on the H200, mbarrier_pipeline ran 77x slower sandboxed than native
    /// with it, and still 17x with 64-bit adds, which ptxas builds from the same loop
    /// (`ATOMS.CAST.SPIN.64`; session 42). 32-bit shared adds are single instructions.
    ///
    /// The adds are exact in their half whatever their order, since they only add: an arrival
    /// between the completing arrival's adds (one not ordered after the phase's end, which a
    /// correct program's waits rule out) borrows into the low half's upper bits, and the
    /// completing add gives it back, so it counts towards the next phase, as the hardware may
    /// count it.
    fn arrive(
        &mut self,
        drop: bool,
        complete: bool,
        dst: Option<&str>,
        count: impl FnOnce(&mut String),
        out: &mut Vec<O<'m>>,
    ) {
        let done = self.label();
        Self::text(out, None, |t| {
            count(t);
            // %__sbx_d := the high half as the arrival finds it: the phase it arrives in (no
            // other arrival can complete that phase before this one counts, in a correct
            // program) and the expected count.
            put(
                t,
                "ld.relaxed.cta.shared.u32 %__sbx_o, [%__sbx_a+4];\n\t\
                 cvt.u64.u32 %__sbx_d, %__sbx_o;\n\tcvt.u32.u64 %__sbx_o, %__sbx_c;\n\t\
                 neg.s32 %__sbx_o, %__sbx_o;\n\t",
            );
            if drop {
                // Off the expected count for the phases after.
                put(
                    t,
                    "red.relaxed.cta.shared.add.u32 [%__sbx_a+4], %__sbx_o;\n\t",
                );
            }
            put(
                t,
                "atom.acq_rel.cta.shared.add.u32 %__sbx_o, [%__sbx_a], %__sbx_o;\n\t\
                 cvt.u64.u32 %__sbx_x, %__sbx_o;\n\tshl.b64 %__sbx_b, %__sbx_d, 32;\n\t\
                 or.b64 %__sbx_x, %__sbx_x, %__sbx_b;\n\t",
            );
            // The phase goes on while the count is below the pending one.
            put(t, "and.b64 %__sbx_b, %__sbx_x, ");
            super::print::int(t, COUNT_MASK);
            put(t, ";\n\tsetp.lt.u64 %__sbx_p, %__sbx_c, %__sbx_b;\n");
        });
        self.bra(out, Some(("%__sbx_p".into(), false)), &done);
        Self::text(out, None, |t| {
            // No pending arrival left: another arrival is completing the phase, and this one
            // counts towards the next, whose state it returns.
            put(
                t,
                "setp.eq.u64 %__sbx_p, %__sbx_b, 0;\n\t@%__sbx_p add.u64 %__sbx_x, %__sbx_x, ",
            );
            super::print::int(t, PHASE_ONE);
            put(t, ";\n");
        });
        self.bra(out, Some(("%__sbx_p".into(), false)), &done);
        Self::text(out, None, |t| {
            // What goes back into the pending count beside the count taken past it
            // (`%__sbx_c - %__sbx_b`): the expected count, or, for `.noComplete`, one pending
            // arrival, for the next arrival to complete.
            put(t, "sub.u64 %__sbx_b, %__sbx_c, %__sbx_b;\n\t");
            if complete {
                // The expected count as of now: the first add acquired every arrival of the
                // phase, drops (which come first) included.
                put(
                    t,
                    "ld.relaxed.cta.shared.u32 %__sbx_o, [%__sbx_a+4];\n\t\
                     cvt.u64.u32 %__sbx_d, %__sbx_o;\n\tand.b64 %__sbx_d, %__sbx_d, ",
                );
                super::print::int(t, COUNT_MASK);
                put(t, ";\n\t");
                put(
                    t,
                    "add.u64 %__sbx_d, %__sbx_d, %__sbx_b;\n\tcvt.u32.u64 %__sbx_o, %__sbx_d;\n\t\
                     red.relaxed.cta.shared.add.u32 [%__sbx_a], %__sbx_o;\n\t\
                     mov.u32 %__sbx_o, ",
                );
                super::print::int(t, PHASE_ONE_HIGH);
                // Release: a wait that sees the phase counted sees the pending count back,
                // and every arrival's writes, which the first add acquired.
                put(
                    t,
                    ";\n\tred.release.cta.shared.add.u32 [%__sbx_a+4], %__sbx_o;\n",
                );
            } else {
                put(
                    t,
                    "add.u64 %__sbx_b, %__sbx_b, 1;\n\tcvt.u32.u64 %__sbx_o, %__sbx_b;\n\t\
                     red.release.cta.shared.add.u32 [%__sbx_a], %__sbx_o;\n",
                );
            }
        });
        out.push(O::new(Stmt::Label(done.into(), self.line)));
        if let Some(d) = dst {
            Self::text(out, None, |t| {
                put(t, "mov.b64 ");
                put(t, d);
                put(t, ", %__sbx_x;\n");
            });
        }
    }
}
