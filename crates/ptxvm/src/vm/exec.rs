//! The interpreter loop: fetch the running group's instruction, compute its lane mask once,
//! dispatch once on the decoded op, and apply it to all lanes of the group.

// Lane loops index several per-lane arrays at once; iterator chains would obscure that.
#![allow(clippy::needless_range_loop)]

use super::access::lanes;
use super::alu;
use super::cvt::{CvtMods, cvt};
use super::float::to_half;
use super::mem::{Mem, atomic};
use super::warp::{MAX_CALL_DEPTH, Warp};
use crate::api::FaultKind;
use crate::ir::{
    BoolOp, Cmp, Dyn, FOp, IOp, KPARAM_BASE, LOCAL_WINDOW, NO_REG, Op, Rnd, SHARED_WINDOW,
    ShflMode, Space, Ty, VoteMode, WINDOW_SIZE,
};
use crate::lower::Kernel;

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

#[inline(always)]
fn map1(w: &mut Warp, d: u32, a: [u64; 32], mask: u32, f: impl Fn(u64) -> u64) {
    let mut out = [0u64; 32];
    for l in 0..32 {
        out[l] = f(a[l]);
    }
    w.wr(d, &out, mask);
}

#[inline(always)]
fn map2(w: &mut Warp, d: u32, a: [u64; 32], b: [u64; 32], mask: u32, f: impl Fn(u64, u64) -> u64) {
    let mut out = [0u64; 32];
    for l in 0..32 {
        out[l] = f(a[l], b[l]);
    }
    w.wr(d, &out, mask);
}

#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn map3(
    w: &mut Warp,
    d: u32,
    a: [u64; 32],
    b: [u64; 32],
    c: [u64; 32],
    mask: u32,
    f: impl Fn(u64, u64, u64) -> u64,
) {
    let mut out = [0u64; 32];
    for l in 0..32 {
        out[l] = f(a[l], b[l], c[l]);
    }
    w.wr(d, &out, mask);
}

/// Applies a comparison to every lane.
#[inline(always)]
fn cmp_lanes(a: &[u64; 32], b: &[u64; 32], f: impl Fn(u64, u64) -> bool) -> [bool; 32] {
    let mut out = [false; 32];
    for l in 0..32 {
        out[l] = f(a[l], b[l]);
    }
    out
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
                Op::Mov { d, a } => {
                    let v = self.rd(*a);
                    self.wr(*d, &v, mask);
                }
                Op::IBin { op, ty, d, a, b } => {
                    let (av, bv) = (self.rd(*a), self.rd(*b));
                    let (op, ty) = (*op, *ty);
                    match op {
                        IOp::Add => map2(self, *d, av, bv, mask, |x, y| x.wrapping_add(y)),
                        IOp::Sub => map2(self, *d, av, bv, mask, |x, y| x.wrapping_sub(y)),
                        IOp::MulLo => map2(self, *d, av, bv, mask, |x, y| x.wrapping_mul(y)),
                        IOp::And => map2(self, *d, av, bv, mask, |x, y| x & y),
                        IOp::Or => map2(self, *d, av, bv, mask, |x, y| x | y),
                        IOp::Xor => map2(self, *d, av, bv, mask, |x, y| x ^ y),
                        IOp::MulWide if ty == Ty::S32 => map2(self, *d, av, bv, mask, |x, y| {
                            (x as i32 as i64).wrapping_mul(y as i32 as i64) as u64
                        }),
                        IOp::MulWide if ty == Ty::U32 => map2(self, *d, av, bv, mask, |x, y| {
                            (x & 0xffff_ffff) * (y & 0xffff_ffff)
                        }),
                        _ => map2(self, *d, av, bv, mask, |x, y| alu::ibin(op, ty, x, y)),
                    }
                }
                Op::IMad {
                    kind,
                    ty,
                    d,
                    a,
                    b,
                    c,
                } => {
                    let (av, bv, cv) = (self.rd(*a), self.rd(*b), self.rd(*c));
                    let (kind, ty) = (*kind, *ty);
                    match (kind, ty) {
                        (crate::ir::MadKind::Lo, _) => {
                            map3(self, *d, av, bv, cv, mask, |x, y, z| {
                                x.wrapping_mul(y).wrapping_add(z)
                            })
                        }
                        (crate::ir::MadKind::Wide, Ty::S32) => {
                            map3(self, *d, av, bv, cv, mask, |x, y, z| {
                                ((x as i32 as i64).wrapping_mul(y as i32 as i64) as u64)
                                    .wrapping_add(z)
                            })
                        }
                        _ => map3(self, *d, av, bv, cv, mask, |x, y, z| {
                            alu::imad(kind, ty, x, y, z)
                        }),
                    }
                }
                Op::IUn { op, ty, d, a } => {
                    let (op, ty) = (*op, *ty);
                    map1(self, *d, self.rd(*a), mask, |x| alu::iun(op, ty, x));
                }
                Op::FBin { op, ty, m, d, a, b } => {
                    let (av, bv) = (self.rd(*a), self.rd(*b));
                    let (op, ty, m) = (*op, *ty, *m);
                    let plain = ty == Ty::F32 && m.rnd == Rnd::Rn && !m.ftz && !m.sat;
                    let f = |x: u64| f32::from_bits(x as u32);
                    match op {
                        FOp::Add if plain => map2(self, *d, av, bv, mask, |x, y| {
                            u64::from((f(x) + f(y)).to_bits())
                        }),
                        FOp::Mul if plain => map2(self, *d, av, bv, mask, |x, y| {
                            u64::from((f(x) * f(y)).to_bits())
                        }),
                        _ => map2(self, *d, av, bv, mask, |x, y| alu::fbin(op, ty, m, x, y)),
                    }
                }
                Op::Fma { ty, m, d, a, b, c } => {
                    let (av, bv, cv) = (self.rd(*a), self.rd(*b), self.rd(*c));
                    let (ty, m) = (*ty, *m);
                    if ty == Ty::F32 && m.rnd == Rnd::Rn && !m.ftz && !m.sat {
                        let out = alu::fma_f32_lanes(&av, &bv, &cv);
                        self.wr(*d, &out, mask);
                    } else {
                        map3(self, *d, av, bv, cv, mask, |x, y, z| {
                            alu::fma(ty, m, x, y, z)
                        });
                    }
                }
                Op::FUn { op, ty, m, d, a } => {
                    let (op, ty, m) = (*op, *ty, *m);
                    map1(self, *d, self.rd(*a), mask, |x| alu::fun(op, ty, m, x));
                }
                Op::Setp {
                    cmp,
                    ty,
                    ftz,
                    d,
                    dn,
                    a,
                    b,
                    comb,
                    c,
                    cneg,
                } => {
                    let (av, bv, cv) = (self.rd(*a), self.rd(*b), self.rd(*c));
                    let (mut t, mut f) = ([0u64; 32], [0u64; 32]);
                    let (cmp, ty, ftz) = (*cmp, *ty, *ftz);
                    let rs = match (cmp, ty) {
                        (Cmp::Lt, Ty::S32) => cmp_lanes(&av, &bv, |x, y| (x as i32) < (y as i32)),
                        (Cmp::Le, Ty::S32) => cmp_lanes(&av, &bv, |x, y| (x as i32) <= (y as i32)),
                        (Cmp::Gt, Ty::S32) => cmp_lanes(&av, &bv, |x, y| (x as i32) > (y as i32)),
                        (Cmp::Ge, Ty::S32) => cmp_lanes(&av, &bv, |x, y| (x as i32) >= (y as i32)),
                        (Cmp::Lt | Cmp::Lo, Ty::U32) => {
                            cmp_lanes(&av, &bv, |x, y| (x as u32) < (y as u32))
                        }
                        (Cmp::Ge | Cmp::Hs, Ty::U32) => {
                            cmp_lanes(&av, &bv, |x, y| (x as u32) >= (y as u32))
                        }
                        (Cmp::Eq, Ty::S32 | Ty::U32 | Ty::B32) => {
                            cmp_lanes(&av, &bv, |x, y| x as u32 == y as u32)
                        }
                        (Cmp::Ne, Ty::S32 | Ty::U32 | Ty::B32) => {
                            cmp_lanes(&av, &bv, |x, y| x as u32 != y as u32)
                        }
                        _ => cmp_lanes(&av, &bv, |x, y| alu::compare(cmp, ty, ftz, x, y)),
                    };
                    for l in 0..32 {
                        let r = rs[l];
                        let p = (cv[l] & 1 != 0) != *cneg;
                        let comb = |x: bool| match comb {
                            BoolOp::None => x,
                            BoolOp::And => x && p,
                            BoolOp::Or => x || p,
                            BoolOp::Xor => x ^ p,
                        };
                        t[l] = u64::from(comb(r));
                        f[l] = u64::from(comb(!r));
                    }
                    self.wr(*d, &t, mask);
                    if *dn != NO_REG {
                        self.wr(*dn, &f, mask);
                    }
                }
                Op::Selp { d, a, b, p } => {
                    let (av, bv, pv) = (self.rd(*a), self.rd(*b), self.rd(*p));
                    map3(
                        self,
                        *d,
                        av,
                        bv,
                        pv,
                        mask,
                        |x, y, p| if p & 1 != 0 { x } else { y },
                    );
                }
                Op::Slct { fsel, d, a, b, c } => {
                    let (av, bv, cv) = (self.rd(*a), self.rd(*b), self.rd(*c));
                    let fsel = *fsel;
                    map3(self, *d, av, bv, cv, mask, |x, y, c| {
                        let pick = if fsel {
                            f32::from_bits(c as u32) >= 0.0
                        } else {
                            c as i32 >= 0
                        };
                        if pick { x } else { y }
                    });
                }
                Op::Bfe { ty, d, a, b, c } => {
                    let (av, bv, cv) = (self.rd(*a), self.rd(*b), self.rd(*c));
                    let ty = *ty;
                    map3(self, *d, av, bv, cv, mask, |x, p, n| alu::bfe(ty, x, p, n));
                }
                Op::Bfi {
                    wide,
                    d,
                    a,
                    b,
                    c,
                    e,
                } => {
                    let (av, bv, cv, ev) = (self.rd(*a), self.rd(*b), self.rd(*c), self.rd(*e));
                    let mut out = [0u64; 32];
                    for l in 0..32 {
                        out[l] = alu::bfi(*wide, av[l], bv[l], cv[l], ev[l]);
                    }
                    self.wr(*d, &out, mask);
                }
                Op::Prmt { d, a, b, c } => {
                    let (av, bv, cv) = (self.rd(*a), self.rd(*b), self.rd(*c));
                    map3(self, *d, av, bv, cv, mask, alu::prmt);
                }
                Op::Testp { op, ty, d, a } => {
                    let (op, ty) = (*op, *ty);
                    map1(self, *d, self.rd(*a), mask, |x| {
                        u64::from(alu::testp(op, ty, x))
                    });
                }
                Op::Cvt {
                    dt,
                    st,
                    rnd,
                    int_rnd,
                    sat,
                    ftz,
                    d,
                    a,
                } => {
                    let m = CvtMods {
                        rnd: *rnd,
                        int_rnd: *int_rnd,
                        sat: *sat,
                        ftz: *ftz,
                    };
                    let (dt, st) = (*dt, *st);
                    map1(self, *d, self.rd(*a), mask, |x| cvt(dt, st, m, x));
                }
                Op::Cvta {
                    to_generic,
                    space,
                    d,
                    a,
                } => {
                    let (to, space) = (*to_generic, *space);
                    map1(self, *d, self.rd(*a), mask, |x| {
                        // Kernel parameters keep their (already unique) param-space address;
                        // a device function's parameters live in local memory.
                        let base = match space {
                            Space::Shared => SHARED_WINDOW,
                            Space::Local => LOCAL_WINDOW,
                            Space::Param if to && x < KPARAM_BASE => LOCAL_WINDOW,
                            Space::Param if !to && (LOCAL_WINDOW..KPARAM_BASE).contains(&x) => {
                                LOCAL_WINDOW
                            }
                            _ => 0,
                        };
                        if to {
                            x.wrapping_add(base)
                        } else {
                            x.wrapping_sub(base)
                        }
                    });
                }
                Op::Pack { d, parts, n, ebits } => {
                    let mut out = [0u64; 32];
                    let emask = if *ebits >= 64 {
                        u64::MAX
                    } else {
                        (1u64 << ebits) - 1
                    };
                    for k in 0..*n as usize {
                        let v = self.rd(parts[k]);
                        for l in 0..32 {
                            out[l] |= (v[l] & emask) << (k as u32 * u32::from(*ebits));
                        }
                    }
                    self.wr(*d, &out, mask);
                }
                Op::Unpack { ds, n, a, ebits } => {
                    let v = self.rd(*a);
                    for k in 0..*n as usize {
                        let sh = k as u32 * u32::from(*ebits);
                        let mut out = [0u64; 32];
                        for l in 0..32 {
                            out[l] = v[l].checked_shr(sh).unwrap_or(0);
                        }
                        self.wr(ds[k], &out, mask);
                    }
                }
                Op::Dyn { d, which } => {
                    let v = match which {
                        Dyn::Clock | Dyn::Clock64 => self.warp_instructions,
                        Dyn::GlobalTimer => std::time::SystemTime::now()
                            .duration_since(std::time::UNIX_EPOCH)
                            .map_or(0, |t| t.as_nanos() as u64),
                    };
                    self.wr(*d, &[v; 32], mask);
                }
                Op::Ld {
                    space,
                    ty,
                    n,
                    ds,
                    addr,
                } => {
                    self.load(mem, bm, (*space, *ty, *n, addr), ds, mask)
                        .map_err(|(e, l)| fault(e, l))?;
                }
                Op::St {
                    space,
                    ty,
                    n,
                    srcs,
                    addr,
                } => {
                    self.store(mem, bm, (*space, *ty, *n, addr), srcs, mask)
                        .map_err(|(e, l)| fault(e, l))?;
                }
                Op::Atom {
                    space,
                    op,
                    ty,
                    d,
                    addr,
                    b,
                    c,
                } => {
                    let (bv, cv) = (self.rd(*b), self.rd(*c));
                    let es = u64::from(ty.bytes());
                    let mut out = [0u64; 32];
                    for l in lanes(mask) {
                        let loc = self
                            .lane_loc(mem, bm, *space, addr, l, es, true)
                            .map_err(|e| fault(e, l))?;
                        out[l] = atomic(&loc, *op, *ty, bv[l], cv[l]);
                    }
                    self.wr(*d, &out, mask);
                }
                Op::Bra { target } => {
                    self.branch(mask, *target);
                    continue;
                }
                Op::Brx { idx, targets } => {
                    let iv = self.rd(*idx);
                    let mut dest = [0u32; 32];
                    for l in lanes(mask) {
                        let t = iv[l] & 0xffff_ffff;
                        match targets.get(t as usize) {
                            Some(&pc) => dest[l] = pc,
                            None => return Err(fault(FaultKind::BadBranchIndex { index: t }, l)),
                        }
                    }
                    self.scatter(mask, &dest);
                    continue;
                }
                Op::Call { target, args } => {
                    if self.stacks.is_empty() {
                        self.stacks = vec![Vec::new(); 32];
                    }
                    for l in lanes(mask) {
                        if self.stacks[l].len() >= MAX_CALL_DEPTH {
                            return Err(fault(FaultKind::StackOverflow, l));
                        }
                        self.stacks[l].push(self.pc + 1);
                        for &(s, d, len) in args.iter() {
                            self.local_copy(l, s, d, len).map_err(|e| fault(e, l))?;
                        }
                    }
                    self.branch(mask, *target);
                    continue;
                }
                Op::CallRet { rets } => {
                    for l in lanes(mask) {
                        for &(s, d, len) in rets.iter() {
                            self.local_copy(l, s, d, len).map_err(|e| fault(e, l))?;
                        }
                    }
                }
                Op::Ret => {
                    self.ret(mask);
                    continue;
                }
                Op::Exit => {
                    self.exit(mask);
                    continue;
                }
                Op::AssertFail { args } => {
                    if mask != 0 {
                        let l = Warp::first(mask);
                        let kind = self
                            .assert_fail(mem, bm, l, args)
                            .map_err(|e| fault(e, l))?;
                        return Err(fault(kind, l));
                    }
                }
                Op::Vprintf { format, args, ret } => {
                    for l in lanes(mask) {
                        self.vprintf(mem, bm, l, *format, *args, *ret)
                            .map_err(|e| fault(e, l))?;
                    }
                }
                Op::Trap => {
                    if mask != 0 {
                        return Err(fault(FaultKind::Trap, Warp::first(mask)));
                    }
                }
                Op::Nop => {}
                Op::Bar { id } => {
                    if mask != self.active {
                        return Err(fault(
                            FaultKind::BarrierDivergence,
                            Warp::first(self.active),
                        ));
                    }
                    let idv = self.rd(*id);
                    self.arrive(&idv);
                    continue;
                }
                Op::Shfl {
                    mode,
                    d,
                    dp,
                    a,
                    b,
                    c,
                } => {
                    let (av, bv, cv) = (self.rd(*a), self.rd(*b), self.rd(*c));
                    let (mut out, mut ok) = ([0u64; 32], [0u64; 32]);
                    for l in lanes(mask) {
                        let (j, p) = shfl_src(*mode, l as i32, bv[l] as u32, cv[l] as u32);
                        out[l] = av[j];
                        ok[l] = u64::from(p);
                    }
                    self.wr(*d, &out, mask);
                    if *dp != NO_REG {
                        self.wr(*dp, &ok, mask);
                    }
                }
                Op::Vote { mode, d, a, neg } => {
                    let av = self.rd(*a);
                    let mut ballot = 0u32;
                    for l in lanes(mask) {
                        if (av[l] & 1 != 0) != *neg {
                            ballot |= 1 << l;
                        }
                    }
                    let v = match mode {
                        VoteMode::All => u64::from(ballot == mask),
                        VoteMode::Any => u64::from(ballot != 0),
                        VoteMode::Uni => u64::from(ballot == 0 || ballot == mask),
                        VoteMode::Ballot => u64::from(ballot),
                    };
                    self.wr(*d, &[v; 32], mask);
                }
                Op::Activemask { d } => {
                    let v = u64::from(self.active);
                    self.wr(*d, &[v; 32], mask);
                }
                Op::Redux { op, ty, d, a } => {
                    let av = self.rd(*a);
                    let mut acc: Option<u64> = None;
                    for l in lanes(mask) {
                        let v = crate::ir::norm(*ty, av[l]);
                        acc = Some(match acc {
                            None => v,
                            Some(x) => alu::ibin(*op, *ty, x, v),
                        });
                    }
                    self.wr(*d, &[acc.unwrap_or(0); 32], mask);
                }
                Op::Shf {
                    left,
                    wrap,
                    d,
                    a,
                    b,
                    c,
                } => {
                    let (av, bv, cv) = (self.rd(*a), self.rd(*b), self.rd(*c));
                    let (left, wrap) = (*left, *wrap);
                    map3(self, *d, av, bv, cv, mask, |x, y, z| {
                        alu::shf(left, wrap, x, y, z)
                    });
                }
                Op::Bfind { ty, shiftamt, d, a } => {
                    let (ty, sa) = (*ty, *shiftamt);
                    map1(self, *d, self.rd(*a), mask, |x| alu::bfind(ty, sa, x));
                }
                Op::Dp4a { sa, sb, d, a, b, c } => {
                    let (av, bv, cv) = (self.rd(*a), self.rd(*b), self.rd(*c));
                    let (sa, sb) = (*sa, *sb);
                    map3(self, *d, av, bv, cv, mask, |x, y, z| {
                        alu::dp4a(sa, sb, x, y, z)
                    });
                }
                Op::Carry {
                    kind,
                    cin,
                    cout,
                    ty,
                    d,
                    a,
                    b,
                    c,
                    cc,
                } => {
                    let (av, bv, cv, ccv) = (
                        self.rd(*a),
                        self.rd(*b),
                        self.rd(*c),
                        self.regs[*cc as usize],
                    );
                    let (mut out, mut flag) = ([0u64; 32], [0u64; 32]);
                    for l in 0..32 {
                        let cf = if *cin { ccv[l] & 1 } else { 0 };
                        (out[l], flag[l]) = alu::carry(*kind, *ty, av[l], bv[l], cv[l], cf);
                    }
                    self.wr(*d, &out, mask);
                    if *cout {
                        self.wr(*cc, &flag, mask);
                    }
                }
                Op::Lop3 { d, a, b, c, lut } => {
                    let (av, bv, cv) = (self.rd(*a), self.rd(*b), self.rd(*c));
                    let lut = *lut;
                    map3(self, *d, av, bv, cv, mask, |x, y, z| {
                        alu::lop3(x, y, z, lut)
                    });
                }
                Op::IsSpace { space, d, a } => {
                    let space = *space;
                    map1(self, *d, self.rd(*a), mask, |x| {
                        let sh = (SHARED_WINDOW..SHARED_WINDOW + WINDOW_SIZE).contains(&x);
                        let lo = (LOCAL_WINDOW..LOCAL_WINDOW + WINDOW_SIZE).contains(&x);
                        u64::from(match space {
                            Space::Shared => sh,
                            Space::Local => lo,
                            _ => !sh && !lo,
                        })
                    });
                }
                Op::CvtPack { bf, d, a, b } => {
                    let (av, bv) = (self.rd(*a), self.rd(*b));
                    let bf = *bf;
                    map2(self, *d, av, bv, mask, |x, y| {
                        let h =
                            |v: u64| u64::from(to_half(f64::from(f32::from_bits(v as u32)), bf));
                        (h(x) << 16) | h(y)
                    });
                }
                Op::Match {
                    all,
                    wide,
                    d,
                    dp,
                    a,
                } => {
                    let av = self.rd(*a);
                    let key = |x: u64| if *wide { x } else { x & 0xffff_ffff };
                    let (mut out, mut ok) = ([0u64; 32], [0u64; 32]);
                    for l in lanes(mask) {
                        let mut same = 0u32;
                        for j in lanes(mask) {
                            if key(av[j]) == key(av[l]) {
                                same |= 1 << j;
                            }
                        }
                        if *all {
                            let eq = same == mask;
                            out[l] = if eq { u64::from(mask) } else { 0 };
                            ok[l] = u64::from(eq);
                        } else {
                            out[l] = u64::from(same);
                        }
                    }
                    self.wr(*d, &out, mask);
                    if *dp != NO_REG {
                        self.wr(*dp, &ok, mask);
                    }
                }
            }
            self.goto(self.pc + 1);
        }
        Ok(Stop::Blocked)
    }

    /// `ret`: lanes with a return address go back to it; lanes without one (in the kernel
    /// body) exit.
    fn ret(&mut self, mask: u32) {
        let skip = self.active & !mask;
        let mut exits = 0u32;
        let mut back = Vec::new();
        for l in lanes(mask) {
            match self.stacks.get_mut(l).and_then(|s| s.pop()) {
                Some(pc) => back.push((l, pc)),
                None => exits |= 1 << l,
            }
        }
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

/// Source lane and validity of `shfl.sync` for `lane` (PTX ISA pseudo-code).
fn shfl_src(mode: ShflMode, lane: i32, b: u32, c: u32) -> (usize, bool) {
    let bval = (b & 0x1f) as i32;
    let cval = (c & 0x1f) as i32;
    let seg = ((c >> 8) & 0x1f) as i32;
    let max_lane = (lane & seg) | (cval & !seg);
    let min_lane = lane & seg;
    let (j, p) = match mode {
        ShflMode::Up => {
            let j = lane - bval;
            (j, j >= max_lane)
        }
        ShflMode::Down => {
            let j = lane + bval;
            (j, j <= max_lane)
        }
        ShflMode::Bfly => {
            let j = lane ^ bval;
            (j, j <= max_lane)
        }
        ShflMode::Idx => {
            let j = min_lane | (bval & !seg);
            (j, j <= max_lane)
        }
    };
    let j = if p { j } else { lane };
    ((j & 31) as usize, p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shfl_sources_follow_ptx_pseudocode() {
        // __shfl_down_sync(full, v, 1): c = 0x1f.
        assert_eq!(shfl_src(ShflMode::Down, 3, 1, 0x1f), (4, true));
        assert_eq!(shfl_src(ShflMode::Down, 31, 1, 0x1f), (31, false));
        // Width 8 segments: c = (32-8)<<8 | 0x1f.
        let c = (24 << 8) | 0x1f;
        assert_eq!(shfl_src(ShflMode::Down, 7, 1, c), (7, false));
        assert_eq!(shfl_src(ShflMode::Idx, 13, 2, c), (10, true));
        assert_eq!(shfl_src(ShflMode::Up, 0, 1, 0), (0, false));
        assert_eq!(shfl_src(ShflMode::Bfly, 5, 16, 0x1f), (21, true));
    }
}
