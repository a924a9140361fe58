//! The divergence policy: which of a warp's lane groups runs next. Always the group furthest
//! behind in program order, merging lanes as soon as they reach the same place. For the
//! structured control flow nvcc and clang emit, that reconverges at the immediate
//! post-dominator, so warp collectives after a divergent region see the whole warp.
//!
//! "Behind" is by PC while no lane is inside a call. A lane inside a call is where its call
//! site is, in the caller's code: its place is its return stack's call sites, outermost first,
//! then its PC, and places compare lexicographically. By PC alone a callee placed after the
//! caller's code looked ahead of the lanes that skipped the call, which then ran on without
//! it: a `shfl.sync` after a divergent region with a call in one arm ran once per arm, and
//! read lanes of the other arm that had not written yet (conformance's generated seed 9074,
//! against the H100's answer).
//!
//! Forward progress: this order alone never lets a group waiting ahead run while the group
//! behind it loops, so a lane spinning on a flag that a lane of its own warp sets further on
//! (a per-lane lock, a producer and a consumer in one warp) hung here, where sm_70 and later
//! (independent thread scheduling) run it. After `SPIN_YIELD` uniform back-edges taken while
//! other lanes wait, the spinning group steps aside (`yielded`) and the group next in order
//! runs until it parks, exits, or reaches a warp collective or a barrier, where it waits for
//! the spinners, since ptxvm's collectives act on the lanes that run them together; then the
//! order above resumes with every lane. A program that does not spin within a warp sees the same
//! results either way; the threshold keeps such loops from switching groups often.

// Lane loops index several per-lane arrays at once; iterator chains would obscure that.
#![allow(clippy::needless_range_loop)]

use std::cmp::Ordering;

use super::warp::Warp;

/// Uniform back-edges a group takes while other lanes of its warp wait before it lets them run.
/// High enough that an ordinary divergent loop rarely yields; low enough that a spin-wait costs
/// a few thousand instructions per step of the lanes it waits for.
pub(crate) const SPIN_YIELD: u32 = 256;

impl Warp {
    /// The order of lane `a` at `pa` and lane `b` at `pb` (each with its own return stack):
    /// `Less` when `a` is further behind and so runs first, `Equal` when they are at the same
    /// place and run as one group.
    fn order(&self, a: usize, pa: u32, b: usize, pb: u32) -> Ordering {
        let stack = |l: usize| self.stacks.get(l).map_or(&[][..], Vec::as_slice);
        let (sa, sb) = (stack(a), stack(b));
        // A return address r stands for "inside the call at r - 1": after every PC below r.
        for i in 0..sa.len().max(sb.len()) {
            match (sa.get(i), sb.get(i)) {
                (Some(ra), Some(rb)) if ra == rb => continue,
                (Some(ra), Some(rb)) => return ra.cmp(rb),
                (None, Some(&rb)) => {
                    return if pa < rb {
                        Ordering::Less
                    } else {
                        Ordering::Greater
                    };
                }
                (Some(&ra), None) => {
                    return if pb < ra {
                        Ordering::Greater
                    } else {
                        Ordering::Less
                    };
                }
                (None, None) => break,
            }
        }
        pa.cmp(&pb)
    }

    /// Continues the running group at `npc`, merging or switching groups as the policy
    /// requires. One compare on every instruction: while a lane is in a call, `min_wait` is 0,
    /// so each step takes the call-aware path.
    #[inline(always)]
    pub(crate) fn goto(&mut self, npc: u32) {
        if npc < self.min_wait {
            self.pc = npc;
        } else {
            self.goto_past(npc);
        }
    }

    /// [`Self::goto`] to a PC at or past the lowest waiting one, or with a lane in a call.
    fn goto_past(&mut self, npc: u32) {
        if self.deep != 0 && self.goes_on_in_call_order(npc) {
            self.pc = npc;
        } else {
            self.park(self.active, npc);
            self.active = 0;
            self.pick();
        }
    }

    /// Whether the running group at `npc` is still behind every waiting lane, some lane being
    /// in a call.
    fn goes_on_in_call_order(&self, npc: u32) -> bool {
        self.waiting == 0
            || self.order(
                Warp::first(self.active),
                npc,
                self.next_lane,
                self.lane_pc[self.next_lane],
            ) == Ordering::Less
    }

    /// Parks `lanes` (one group, or one lane) at `pc`.
    pub(crate) fn park(&mut self, lanes: u32, pc: u32) {
        if self.deep != 0 {
            self.park_in_call_order(lanes, pc);
        } else {
            self.min_wait = self.min_wait.min(pc);
        }
        self.place(lanes, pc);
        self.waiting |= lanes;
    }

    /// Puts `lanes` at `pc`.
    fn place(&mut self, lanes: u32, pc: u32) {
        for l in 0..32 {
            if lanes >> l & 1 != 0 {
                self.lane_pc[l] = pc;
            }
        }
    }

    /// Keeps `next_lane` the waiting lane furthest behind as `lanes` park at `pc`.
    fn park_in_call_order(&mut self, lanes: u32, pc: u32) {
        if lanes == 0 {
            return;
        }
        let first = Warp::first(lanes);
        if self.waiting == 0
            || self.order(first, pc, self.next_lane, self.lane_pc[self.next_lane]) == Ordering::Less
        {
            self.next_lane = first;
        }
    }

    /// Marks `lanes` as inside a call (their return addresses already pushed). The first call
    /// switches the warp to the call-aware order: the waiting lanes' next lane is found, and
    /// `min_wait` closed.
    pub(crate) fn entered_call(&mut self, lanes: u32) {
        let was_flat = self.deep == 0;
        self.deep |= lanes;
        if was_flat {
            self.find_next();
        }
    }

    /// Marks `lanes` as back in the kernel's body (their return stacks empty, or exited); when
    /// none is in a call any more, the order is by PC again.
    pub(crate) fn left_calls(&mut self, lanes: u32) {
        if self.deep != 0 {
            self.deep &= !lanes;
            if self.deep == 0 {
                self.min_wait = self.lowest_waiting_pc();
            }
        }
    }

    /// The lowest PC a waiting lane is parked at (`u32::MAX` if none).
    fn lowest_waiting_pc(&self) -> u32 {
        let mut min = u32::MAX;
        for l in 0..32 {
            if self.waiting >> l & 1 != 0 {
                min = min.min(self.lane_pc[l]);
            }
        }
        min
    }

    /// Makes the waiting lanes furthest behind the running group, lanes that yielded waiting
    /// again.
    pub(crate) fn pick(&mut self) {
        debug_assert_eq!(self.active, 0);
        if self.yielded != 0 {
            let lanes = self.yielded;
            self.yielded = 0;
            self.rejoin(lanes);
        }
        self.pick_waiting();
    }

    /// [`Self::pick`] among the waiting lanes alone.
    fn pick_waiting(&mut self) {
        if self.deep != 0 {
            return self.pick_in_call_order();
        }
        if self.waiting == 0 {
            self.min_wait = u32::MAX;
            return;
        }
        let min = self.lowest_waiting_pc();
        let mut group = 0u32;
        let mut next = u32::MAX;
        for l in 0..32 {
            if self.waiting >> l & 1 != 0 {
                if self.lane_pc[l] == min {
                    group |= 1 << l;
                } else {
                    next = next.min(self.lane_pc[l]);
                }
            }
        }
        self.waiting &= !group;
        self.active = group;
        self.pc = min;
        self.min_wait = next;
    }

    /// [`Self::pick`] while some lane is inside a call: `next_lane` is already the waiting lane
    /// furthest behind (every park, release and pick in this order keeps it so).
    fn pick_in_call_order(&mut self) {
        if self.waiting == 0 {
            return;
        }
        let (lead, pc) = (self.next_lane, self.lane_pc[self.next_lane]);
        let mut group = 0u32;
        for l in 0..32 {
            if self.waiting >> l & 1 != 0 && self.order(l, self.lane_pc[l], lead, pc).is_eq() {
                group |= 1 << l;
            }
        }
        self.waiting &= !group;
        self.active = group;
        self.pc = pc;
        self.find_next();
    }

    /// Sets `next_lane` to the waiting lane furthest behind, and closes `min_wait`.
    fn find_next(&mut self) {
        let mut next: Option<usize> = None;
        for l in 0..32 {
            if self.waiting >> l & 1 == 0 {
                continue;
            }
            let behind = next.is_none_or(|n| {
                self.order(l, self.lane_pc[l], n, self.lane_pc[n]) == Ordering::Less
            });
            if behind {
                next = Some(l);
            }
        }
        self.next_lane = next.unwrap_or(0);
        self.min_wait = 0;
    }

    /// Splits the running group: `taken` lanes go to `target`, the rest to `pc + 1`.
    pub(crate) fn branch(&mut self, taken: u32, target: u32) {
        let rest = self.active & !taken;
        if rest == 0 {
            if target <= self.pc && self.waiting != 0 {
                self.spins += 1;
                if self.spins >= SPIN_YIELD {
                    return self.step_aside(target);
                }
            }
            self.goto(target);
        } else if taken == 0 {
            self.goto(self.pc + 1);
        } else {
            let pc = self.pc;
            self.park(taken, target);
            self.park(rest, pc + 1);
            self.active = 0;
            self.pick();
        }
    }

    /// Sends each lane of `lanes` to its own `dest[lane]`; the rest of the group goes on.
    pub(crate) fn scatter(&mut self, lanes: u32, dest: &[u32; 32]) {
        let rest = self.active & !lanes;
        let pc = self.pc;
        for l in 0..32 {
            if lanes >> l & 1 != 0 {
                self.park(1 << l, dest[l]);
            }
        }
        if rest != 0 {
            self.park(rest, pc + 1);
        }
        self.active = 0;
        self.pick();
    }

    /// Ends the running lanes (`exit`, or `ret` from the kernel).
    pub(crate) fn exit(&mut self, lanes: u32) {
        self.exited |= lanes;
        self.left_calls(lanes);
        self.active &= !lanes;
        if self.active == 0 {
            self.pick();
        } else {
            self.goto(self.pc + 1);
        }
    }

    /// Parks the running group at a barrier.
    pub(crate) fn arrive(&mut self, id: &[u64; 32]) {
        let next = self.pc + 1;
        for l in 0..32 {
            if self.active >> l & 1 != 0 {
                self.lane_pc[l] = next;
                self.bar_id[l] = id[l] as u32;
            }
        }
        self.at_bar |= self.active;
        self.active = 0;
        self.pick();
    }

    /// Releases the lanes held at a barrier.
    pub(crate) fn release(&mut self) {
        let lanes = self.at_bar;
        self.at_bar = 0;
        self.rejoin(lanes);
        if self.active == 0 {
            self.pick();
        }
    }

    /// Makes `lanes`, each already at its `lane_pc`, waiting lanes again.
    fn rejoin(&mut self, lanes: u32) {
        self.waiting |= lanes;
        if self.deep != 0 {
            self.find_next();
        } else {
            for l in 0..32 {
                if lanes >> l & 1 != 0 {
                    self.min_wait = self.min_wait.min(self.lane_pc[l]);
                }
            }
        }
    }

    /// Sets the running group, about to loop back to `target`, aside so that the waiting lanes
    /// furthest behind run (the module's "forward progress"). The caller saw lanes waiting.
    fn step_aside(&mut self, target: u32) {
        self.spins = 0;
        self.place(self.active, target);
        self.yielded |= self.active;
        self.active = 0;
        self.pick_waiting();
    }

    /// Whether the running group must wait for lanes that stepped aside before an instruction
    /// that acts on the lanes running it together (a collective, a barrier); if so it parks at
    /// its PC and the next group runs.
    ///
    /// The instruction's dispatch was counted already; it runs, and counts, when the lanes meet.
    pub(crate) fn waits_for_yielded(&mut self, mask: u32) -> bool {
        if self.yielded == 0 {
            return false;
        }
        self.warp_instructions -= 1;
        self.lane_instructions -= u64::from(mask.count_ones());
        self.park(self.active, self.pc);
        self.active = 0;
        self.pick();
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A warp whose lane `l` has the return stack `stacks[l]`.
    fn with_stacks(stacks: &[&[u32]]) -> Warp {
        let mut w = Warp::empty();
        w.stacks = vec![Vec::new(); 32];
        for (l, s) in stacks.iter().enumerate() {
            w.stacks[l] = s.to_vec();
        }
        w
    }

    /// Checks `order(a, pa, b, pb)` for each `(a, pa, b, pb, want, why)`.
    fn orders(w: &Warp, cases: &[(usize, u32, usize, u32, Ordering, &str)]) {
        for &(a, pa, b, pb, want, why) in cases {
            assert_eq!(
                w.order(a, pa, b, pb),
                want,
                "lane {a} at {pa}, lane {b} at {pb}: {why}"
            );
        }
    }

    #[test]
    fn a_lane_inside_a_call_is_where_its_call_site_is() {
        use Ordering::{Greater, Less};
        // Lane 1 called from PC 9 (returns to 10) and runs at 500, in the callee.
        let w = with_stacks(&[&[], &[10]]);
        orders(
            &w,
            &[
                (0, 9, 1, 500, Less, "at the call: not yet called"),
                (0, 10, 1, 500, Greater, "past the call: it waits"),
                (0, 40, 1, 500, Greater, "further past"),
                (1, 500, 0, 40, Less, "the same, swapped"),
            ],
        );
    }

    #[test]
    fn lanes_in_calls_order_by_call_site_then_by_pc() {
        use Ordering::{Equal, Greater, Less};
        let w = with_stacks(&[&[10, 70], &[10, 80], &[20], &[10, 70]]);
        orders(
            &w,
            &[
                (0, 900, 1, 100, Less, "inner call sites differ"),
                (1, 100, 2, 100, Less, "outer call sites differ"),
                (0, 900, 3, 900, Equal, "same place: one group"),
                (0, 900, 3, 901, Less, "same call sites: by PC"),
                (2, 75, 0, 5, Greater, "outer call sites decide"),
            ],
        );
    }

    #[test]
    fn a_call_from_diverged_lanes_runs_before_the_lanes_past_its_site() {
        let mut w = with_stacks(&[]);
        w.active = 0b11;
        w.exited = !0b11;
        w.pc = 9;
        w.stacks[0].push(10);
        w.entered_call(0b01);
        // Lane 0 calls the function at 500; lane 1 skips the call.
        w.branch(0b01, 500);
        assert_eq!((w.active, w.pc), (0b01, 500), "the callee runs first");
        w.goto(501);
        assert_eq!(
            (w.active, w.pc),
            (0b01, 501),
            "and goes on while lane 1 waits at 10"
        );
        w.stacks[0].pop();
        w.left_calls(0b01);
        w.park(0b01, 10);
        w.active = 0;
        w.pick();
        assert_eq!((w.active, w.pc), (0b11, 10), "both meet after the call");
    }
}
