//! The arithmetic family's executor (`isa::Family::Arith`): register arithmetic, logic,
//! comparison, conversion and moves, each applied to all lanes of the mask at once.

// Lane loops index several per-lane arrays at once; iterator chains would obscure that.
#![allow(clippy::needless_range_loop)]

use super::super::alu;
use super::super::cvt::{CvtMods, cvt};
use super::super::float::to_half;
use super::super::warp::Warp;
use crate::ir::{
    ArithOp, BitFn, BoolOp, Cmp, Dyn, FOp, IOp, KPARAM_BASE, LOCAL_WINDOW, NO_REG, Rnd,
    SHARED_WINDOW, Space, Ty, WINDOW_SIZE,
};

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
    /// Executes an arithmetic op for the lanes in `mask`.
    #[inline(always)]
    pub(super) fn arith(&mut self, op: &ArithOp, mask: u32) {
        match op {
            ArithOp::Mov { d, a } => {
                let v = self.rd(*a);
                self.wr(*d, &v, mask);
            }
            ArithOp::IBin { op, ty, d, a, b } => {
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
            ArithOp::IMad {
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
                    (crate::ir::MadKind::Lo, _) => map3(self, *d, av, bv, cv, mask, |x, y, z| {
                        x.wrapping_mul(y).wrapping_add(z)
                    }),
                    (crate::ir::MadKind::Wide, Ty::S32) => {
                        map3(self, *d, av, bv, cv, mask, |x, y, z| {
                            ((x as i32 as i64).wrapping_mul(y as i32 as i64) as u64).wrapping_add(z)
                        })
                    }
                    _ => map3(self, *d, av, bv, cv, mask, |x, y, z| {
                        alu::imad(kind, ty, x, y, z)
                    }),
                }
            }
            ArithOp::IUn { op, ty, d, a } => {
                let (op, ty) = (*op, *ty);
                map1(self, *d, self.rd(*a), mask, |x| alu::iun(op, ty, x));
            }
            ArithOp::FBin { op, ty, m, d, a, b } => {
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
            ArithOp::Fma { ty, m, d, a, b, c } => {
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
            ArithOp::FUn { op, ty, m, d, a } => {
                let (op, ty, m) = (*op, *ty, *m);
                map1(self, *d, self.rd(*a), mask, |x| alu::fun(op, ty, m, x));
            }
            ArithOp::Setp {
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
            ArithOp::Selp { d, a, b, p } => {
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
            ArithOp::Slct { fsel, d, a, b, c } => {
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
            ArithOp::Bfe { ty, d, a, b, c } => {
                let (av, bv, cv) = (self.rd(*a), self.rd(*b), self.rd(*c));
                let ty = *ty;
                map3(self, *d, av, bv, cv, mask, |x, p, n| alu::bfe(ty, x, p, n));
            }
            ArithOp::Bfi {
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
            ArithOp::Prmt { d, a, b, c } => {
                let (av, bv, cv) = (self.rd(*a), self.rd(*b), self.rd(*c));
                map3(self, *d, av, bv, cv, mask, alu::prmt);
            }
            ArithOp::Bits { f, d, a, b, c } => {
                let (av, bv, cv) = (self.rd(*a), self.rd(*b), self.rd(*c));
                let f = *f;
                map3(self, *d, av, bv, cv, mask, |x, y, z| match f {
                    BitFn::Bmsk { clamp } => alu::bmsk(clamp, x, y),
                    BitFn::Szext { clamp, signed } => alu::szext(clamp, signed, x, y),
                    BitFn::Fns => alu::fns(x, y, z),
                });
            }
            ArithOp::Testp { op, ty, d, a } => {
                let (op, ty) = (*op, *ty);
                map1(self, *d, self.rd(*a), mask, |x| {
                    u64::from(alu::testp(op, ty, x))
                });
            }
            ArithOp::Cvt {
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
            ArithOp::Cvta {
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
            ArithOp::Pack { d, parts, n, ebits } => {
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
            ArithOp::Unpack { ds, n, a, ebits } => {
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
            ArithOp::Dyn { d, which } => {
                let v = match which {
                    Dyn::Clock | Dyn::Clock64 => self.warp_instructions,
                    Dyn::GlobalTimer => std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map_or(0, |t| t.as_nanos() as u64),
                };
                self.wr(*d, &[v; 32], mask);
            }
            ArithOp::Shf {
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
            ArithOp::Bfind { ty, shiftamt, d, a } => {
                let (ty, sa) = (*ty, *shiftamt);
                map1(self, *d, self.rd(*a), mask, |x| alu::bfind(ty, sa, x));
            }
            ArithOp::Dp4a { sa, sb, d, a, b, c } => {
                let (av, bv, cv) = (self.rd(*a), self.rd(*b), self.rd(*c));
                let (sa, sb) = (*sa, *sb);
                map3(self, *d, av, bv, cv, mask, |x, y, z| {
                    alu::dp4a(sa, sb, x, y, z)
                });
            }
            ArithOp::Carry {
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
            ArithOp::Lop3 { d, a, b, c, lut } => {
                let (av, bv, cv) = (self.rd(*a), self.rd(*b), self.rd(*c));
                let lut = *lut;
                map3(self, *d, av, bv, cv, mask, |x, y, z| {
                    alu::lop3(x, y, z, lut)
                });
            }
            ArithOp::IsSpace { space, d, a } => {
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
            ArithOp::CvtPack { bf, d, a, b } => {
                let (av, bv) = (self.rd(*a), self.rd(*b));
                let bf = *bf;
                map2(self, *d, av, bv, mask, |x, y| {
                    let h = |v: u64| u64::from(to_half(f64::from(f32::from_bits(v as u32)), bf));
                    (h(x) << 16) | h(y)
                });
            }
        }
    }
}
