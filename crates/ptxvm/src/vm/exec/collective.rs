//! The warp collectives' executor (`isa::Family::Collective`): shuffles, votes, matches and
//! reductions, where lanes of the mask exchange values.

use super::super::access::lanes;
use super::super::alu;
use super::super::warp::Warp;
use crate::ir::{CollectiveOp, NO_REG, ShflMode, Src, VoteMode};

impl Warp {
    /// Executes a warp collective for the lanes in `mask`.
    #[inline(always)]
    pub(super) fn collective(&mut self, op: &CollectiveOp, mask: u32) {
        match op {
            CollectiveOp::Shfl {
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
            CollectiveOp::Vote { mode, d, a, neg, m } => {
                let av = self.rd(*a);
                let mut ballot = 0u32;
                for l in lanes(mask) {
                    if (av[l] & 1 != 0) != *neg {
                        ballot |= 1 << l;
                    }
                }
                let vote = |set: u32| {
                    let b = ballot & set;
                    match mode {
                        VoteMode::All => u64::from(b == set),
                        VoteMode::Any => u64::from(b != 0),
                        VoteMode::Uni => u64::from(b == 0 || b == set),
                        VoteMode::Ballot => u64::from(b),
                    }
                };
                let out = self.per_member_set(*m, mask, vote);
                self.wr(*d, &out, mask);
            }
            CollectiveOp::Activemask { d } => {
                let v = u64::from(self.active);
                self.wr(*d, &[v; 32], mask);
            }
            CollectiveOp::Redux { op, ty, d, a, m } => {
                let av = self.rd(*a);
                let reduce = |set: u32| {
                    let mut acc: Option<u64> = None;
                    for l in lanes(set) {
                        let v = crate::ir::norm(*ty, av[l]);
                        acc = Some(match acc {
                            None => v,
                            Some(x) => alu::ibin(*op, *ty, x, v),
                        });
                    }
                    acc.unwrap_or(0)
                };
                let out = self.per_member_set(*m, mask, reduce);
                self.wr(*d, &out, mask);
            }
            CollectiveOp::Match {
                all,
                wide,
                d,
                dp,
                a,
                m,
            } => {
                let av = self.rd(*a);
                let mv = self.rd(*m);
                let key = |x: u64| if *wide { x } else { x & 0xffff_ffff };
                let (mut out, mut ok) = ([0u64; 32], [0u64; 32]);
                for l in lanes(mask) {
                    let set = mv[l] as u32 & mask;
                    let mut same = 0u32;
                    for j in lanes(set) {
                        if key(av[j]) == key(av[l]) {
                            same |= 1 << j;
                        }
                    }
                    if *all {
                        let eq = same == set;
                        out[l] = if eq { u64::from(set) } else { 0 };
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
            CollectiveOp::Elect { d, p, m } => {
                // Each lane's leader: the lowest lane of its own member set.
                let leaders = self.per_member_set(*m, mask, |set| u64::from(set.trailing_zeros()));
                let mut lead = [0u64; 32];
                for l in lanes(mask) {
                    lead[l] = u64::from(leaders[l] == l as u64);
                }
                self.wr(*d, &leaders, mask);
                self.wr(*p, &lead, mask);
            }
            CollectiveOp::Mma(op) => self.mma(op, mask),
            CollectiveOp::Movmatrix { d, a } => self.movmatrix(*d, *a, mask),
        }
    }

    /// `f` of each executing lane's member set (the lanes of its member mask `m` that execute
    /// here, `mask`), per lane. Lanes take part only with the lanes their own mask names: a warp
    /// split into tiles (`tiled_partition`) runs one instruction with a mask per tile. Computed
    /// once per run of neighbouring lanes with the same set: most instructions have one run,
    /// the whole warp's, and a tiled warp one per tile.
    fn per_member_set(&self, m: Src, mask: u32, f: impl Fn(u32) -> u64) -> [u64; 32] {
        let mv = self.rd(m);
        let mut out = [0u64; 32];
        let mut last: Option<(u32, u64)> = None;
        for l in lanes(mask) {
            let set = mv[l] as u32 & mask;
            let v = match last {
                Some((s, v)) if s == set => v,
                _ => f(set),
            };
            last = Some((set, v));
            out[l] = v;
        }
        out
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
