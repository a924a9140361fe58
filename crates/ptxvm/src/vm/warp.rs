//! One warp's state: a struct-of-arrays register file, the current lane group and its PC, the
//! lanes waiting at other PCs, their return stacks and local memory. Which group runs next is
//! schedule.rs's.

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
    /// Lowest PC among waiting lanes (`u32::MAX` if none) while no lane is in a call; 0 while
    /// one is, so that `goto`'s one compare sends each step to the call-aware order.
    pub min_wait: u32,
    /// Lanes with a return address on their stack (inside a call); while any are, lanes are
    /// ordered by their call sites too (schedule.rs).
    pub deep: u32,
    /// The waiting lane that runs next while `deep` is not 0 (meaningless when nothing waits).
    pub next_lane: usize,
    pub exited: u32,
    /// Lanes parked at a barrier (their `lane_pc` is after it).
    pub at_bar: u32,
    /// Lanes of a spinning group set aside so the others can make progress (schedule.rs,
    /// "forward progress"); never set while no group runs.
    pub yielded: u32,
    /// Uniform back-edges taken while other lanes waited, since the last yield.
    pub spins: u32,
    /// Set by an `mbarrier` wait that found its phase incomplete for every lane: the warp's time
    /// slice ends there, so the warps that will complete the phase run instead of the spin.
    pub stalled: bool,
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
            deep: 0,
            next_lane: 0,
            exited: FULL,
            at_bar: 0,
            yielded: 0,
            spins: 0,
            stalled: false,
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
        self.deep = 0;
        self.exited = !live;
        self.at_bar = 0;
        self.yielded = 0;
        self.spins = 0;
        self.stalled = false;
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
