//! One warp's state: a struct-of-arrays register file, the current lane group and its PC, the
//! lanes waiting at other PCs, and the divergence policy: always run the group with the lowest
//! PC, merging lanes as soon as they reach the same PC. For the structured control flow nvcc and
//! clang emit, that reconverges at the immediate post-dominator.

// Lane loops index several per-lane arrays at once; iterator chains would obscure that.
#![allow(clippy::needless_range_loop)]

use crate::ir::{Kernel, Preload, Reg, Src, Ty, norm};

/// All 32 lanes.
pub(crate) const FULL: u32 = u32::MAX;

/// Deepest call nesting per thread.
pub(crate) const MAX_CALL_DEPTH: usize = 1024;

/// Where a thread of this warp sits in its block and grid.
#[derive(Debug, Clone, Copy)]
pub(crate) struct WarpPlace {
    pub block: [u32; 3],
    pub ctaid: [u32; 3],
    pub grid: [u32; 3],
    pub warp_index: u32,
    pub shared_static: u32,
    pub shared_dynamic: u32,
}

/// A warp.
pub(crate) struct Warp {
    pub regs: Vec<[u64; 32]>,
    /// PC of the running group.
    pub pc: u32,
    /// Lanes of the running group.
    pub active: u32,
    /// Lanes parked at `lane_pc`, runnable later.
    pub waiting: u32,
    pub lane_pc: [u32; 32],
    /// Lowest PC among waiting lanes (`u32::MAX` if none).
    pub min_wait: u32,
    pub exited: u32,
    /// Lanes parked at a barrier (their `lane_pc` is after it).
    pub at_bar: u32,
    pub bar_id: [u32; 32],
    /// Per-lane return stacks, allocated on the first call.
    pub stacks: Vec<Vec<u32>>,
    /// Local memory, `local_stride` bytes per lane (u64 words keep it 8-aligned).
    pub local: Vec<u64>,
    pub local_stride: u64,
    /// Thread index of each lane.
    pub tid: [[u32; 3]; 32],
    pub lane_instructions: u64,
    pub warp_instructions: u64,
}

impl Warp {
    /// A warp with no lanes; `reset` makes it one of a block's warps.
    pub(crate) fn empty() -> Warp {
        Warp {
            regs: Vec::new(),
            pc: 0,
            active: 0,
            waiting: 0,
            lane_pc: [0; 32],
            min_wait: u32::MAX,
            exited: FULL,
            at_bar: 0,
            bar_id: [0; 32],
            stacks: Vec::new(),
            local: Vec::new(),
            local_stride: 0,
            tid: [[0; 3]; 32],
            lane_instructions: 0,
            warp_instructions: 0,
        }
    }

    /// Makes this warp number `place.warp_index` of a new block, reusing its allocations:
    /// hidden registers preloaded, counters cleared. Other registers and local memory keep
    /// whatever the previous block left (as on a GPU, they are undefined until written); they
    /// are zeroed when first allocated.
    pub(crate) fn reset(&mut self, k: &Kernel, place: &WarpPlace, globals: &[u64], params: &[u8]) {
        let [bx, by, bz] = place.block;
        let nthreads = bx * by * bz;
        let base = place.warp_index * 32;
        let mut live = 0u32;
        // Thread coordinates by counting instead of dividing per lane.
        let (mut x, mut y, mut z) = (base % bx, (base / bx) % by, base / (bx * by));
        for (l, t) in self.tid.iter_mut().enumerate() {
            if base + (l as u32) < nthreads {
                live |= 1 << l;
                *t = [x, y, z];
            } else {
                *t = [0; 3];
            }
            x += 1;
            if x == bx {
                x = 0;
                y += 1;
                if y == by {
                    y = 0;
                    z += 1;
                }
            }
        }
        if self.regs.len() != k.nregs as usize {
            self.regs.clear();
            self.regs.resize(k.nregs as usize, [0u64; 32]);
        }
        for &(r, p) in &k.preloads {
            let v = &mut self.regs[r as usize];
            let uniform = |v: &mut [u64; 32], x: u64| *v = [x; 32];
            match p {
                Preload::Tid(a) => {
                    for l in 0..32 {
                        v[l] = u64::from(self.tid[l][a as usize]);
                    }
                }
                Preload::LaneId => {
                    for l in 0..32 {
                        v[l] = l as u64;
                    }
                }
                Preload::LaneMaskEq
                | Preload::LaneMaskLt
                | Preload::LaneMaskLe
                | Preload::LaneMaskGt
                | Preload::LaneMaskGe => {
                    for l in 0..32 {
                        let lb = 1u64 << l;
                        let le = (lb << 1).wrapping_sub(1);
                        v[l] = 0xffff_ffff
                            & match p {
                                Preload::LaneMaskEq => lb,
                                Preload::LaneMaskLt => lb - 1,
                                Preload::LaneMaskLe => le,
                                Preload::LaneMaskGt => !le,
                                _ => !(lb - 1),
                            };
                    }
                }
                Preload::Ntid(a) => uniform(v, u64::from(place.block[a as usize])),
                Preload::Ctaid(a) => uniform(v, u64::from(place.ctaid[a as usize])),
                Preload::Nctaid(a) => uniform(v, u64::from(place.grid[a as usize])),
                Preload::WarpId => uniform(v, u64::from(place.warp_index)),
                Preload::NWarpId => uniform(v, 64),
                Preload::Zero => uniform(v, 0),
                // The launcher checked that every global has an address.
                Preload::GlobalAddr(g) => uniform(v, globals.get(g as usize).copied().unwrap_or(0)),
                Preload::DynSmemBase => uniform(v, u64::from(dyn_base(place.shared_static))),
                Preload::DynSmemSize => uniform(v, u64::from(place.shared_dynamic)),
                Preload::TotalSmemSize => uniform(
                    v,
                    u64::from(dyn_base(place.shared_static) + place.shared_dynamic),
                ),
                Preload::Param { off, ty } => uniform(v, param_value(params, off, ty)),
            }
        }
        let stride = u64::from(k.local_bytes).div_ceil(16) * 16;
        if self.local_stride != stride || self.local.len() as u64 != stride * 4 {
            self.local_stride = stride;
            self.local.clear();
            self.local.resize((stride * 4) as usize, 0);
        }
        for s in &mut self.stacks {
            s.clear();
        }
        self.pc = 0;
        self.active = live;
        self.waiting = 0;
        self.min_wait = u32::MAX;
        self.exited = !live;
        self.at_bar = 0;
        self.lane_instructions = 0;
        self.warp_instructions = 0;
    }

    /// Whether the warp has lanes that can run now.
    pub(crate) fn runnable(&self) -> bool {
        self.active != 0 || self.waiting != 0
    }

    #[inline(always)]
    pub(crate) fn rd(&self, s: Src) -> [u64; 32] {
        match s {
            Src::Reg(r) => self.regs[r as usize],
            Src::Imm(v) => [v; 32],
        }
    }

    #[inline(always)]
    pub(crate) fn wr(&mut self, d: Reg, v: &[u64; 32], mask: u32) {
        let r = &mut self.regs[d as usize];
        if mask == FULL {
            *r = *v;
        } else {
            for l in 0..32 {
                if mask >> l & 1 != 0 {
                    r[l] = v[l];
                }
            }
        }
    }

    /// Continues the running group at `npc`, merging or switching groups as the lowest-PC rule
    /// requires.
    #[inline(always)]
    pub(crate) fn goto(&mut self, npc: u32) {
        if npc < self.min_wait {
            self.pc = npc;
        } else {
            self.park(self.active, npc);
            self.active = 0;
            self.pick();
        }
    }

    /// Parks `lanes` at `pc`.
    pub(crate) fn park(&mut self, lanes: u32, pc: u32) {
        for l in 0..32 {
            if lanes >> l & 1 != 0 {
                self.lane_pc[l] = pc;
            }
        }
        self.waiting |= lanes;
        self.min_wait = self.min_wait.min(pc);
    }

    /// Makes the lowest-PC waiting lanes the running group.
    pub(crate) fn pick(&mut self) {
        debug_assert_eq!(self.active, 0);
        if self.waiting == 0 {
            self.min_wait = u32::MAX;
            return;
        }
        let mut min = u32::MAX;
        for l in 0..32 {
            if self.waiting >> l & 1 != 0 {
                min = min.min(self.lane_pc[l]);
            }
        }
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

    /// Splits the running group: `taken` lanes go to `target`, the rest to `pc + 1`.
    pub(crate) fn branch(&mut self, taken: u32, target: u32) {
        let rest = self.active & !taken;
        if rest == 0 {
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
        for l in 0..32 {
            if lanes >> l & 1 != 0 {
                self.min_wait = self.min_wait.min(self.lane_pc[l]);
            }
        }
        self.waiting |= lanes;
        if self.active == 0 {
            self.pick();
        }
    }

    /// Lowest lane in `mask`.
    pub(crate) fn first(mask: u32) -> usize {
        mask.trailing_zeros() as usize & 31
    }
}

/// A kernel parameter's value as a register holds it (the launcher checked the buffer's size).
fn param_value(params: &[u8], off: u32, ty: Ty) -> u64 {
    let n = ty.bytes() as usize;
    let mut b = [0u8; 8];
    if let Some(src) = params.get(off as usize..off as usize + n) {
        b[..n].copy_from_slice(src);
    }
    norm(ty, u64::from_le_bytes(b))
}

/// Shared-space offset of dynamic shared memory: after the static part, 16-byte aligned.
pub(crate) fn dyn_base(static_bytes: u32) -> u32 {
    static_bytes.div_ceil(16) * 16
}
