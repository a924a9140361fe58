//! Warp collectives over part of a warp: each lane's member mask names the tile it reduces
//! over, as cooperative groups' `tiled_partition` builds them (lanes 0–15 with 0x0000ffff and
//! lanes 16–31 with 0xffff0000, in the same instruction). `redux.sync`, `vote.sync` and
//! `match.any.sync` then answer for the lane's own tile only. ptxvm took every lane executing the
//! instruction as the members, so a tile's sum, ballot or match took in the other tiles' lanes
//! (session 43).

use conformance::case::shape_1d;
use conformance::context::Context;
use conformance::driver::shared_device;
use conformance::memory::DeviceBuffer;
use conformance::module::Module;
use conformance::stream::{KernelArg, Stream};

use crate::support::env_or_skip;

/// `tiles(out, w)`: lane `l` of thread `t` forms its tile's member mask (the `w` lanes from
/// `l & !(w - 1)`), and writes at `out[5t..5t+5]` the tile's `redux.sync.add` of `v = 7t + 3`,
/// its `vote.sync.ballot` and `all`/`any` of `p`, and the `match.any.sync` mask of
/// `key = 5t % 3`; `p` holds in lanes 0–15 and where `v` is a multiple of 3.
const TILES: &str = "
.version 8.0
.target sm_90
.address_size 64
.visible .entry tiles(.param .u64 out, .param .u32 w)
{
	.reg .b32 %r<16>;
	.reg .b64 %rd<4>;
	.reg .pred %p<5>;
	ld.param.u64 %rd1, [out];
	ld.param.u32 %r1, [w];
	mov.u32 %r2, %tid.x;
	and.b32 %r3, %r2, 31;
	sub.u32 %r4, %r1, 1;
	not.b32 %r5, %r4;
	and.b32 %r5, %r3, %r5;
	mov.u32 %r6, 2;
	shl.b32 %r6, %r6, %r4;
	sub.u32 %r6, %r6, 1;
	shl.b32 %r6, %r6, %r5;
	mad.lo.u32 %r7, %r2, 7, 3;
	rem.u32 %r8, %r7, 3;
	setp.eq.u32 %p1, %r8, 0;
	and.b32 %r8, %r2, 16;
	setp.eq.or.u32 %p1, %r8, 0, %p1;
	mul.lo.u32 %r9, %r2, 5;
	rem.u32 %r9, %r9, 3;
	redux.sync.add.u32 %r10, %r7, %r6;
	vote.sync.ballot.b32 %r11, %p1, %r6;
	vote.sync.all.pred %p2, %p1, %r6;
	vote.sync.any.pred %p3, %p1, %r6;
	selp.u32 %r12, 1, 0, %p2;
	selp.u32 %r13, 1, 0, %p3;
	match.any.sync.b32 %r14, %r9, %r6;
	mul.lo.u32 %r15, %r2, 20;
	cvt.u64.u32 %rd2, %r15;
	add.u64 %rd3, %rd1, %rd2;
	st.global.u32 [%rd3], %r10;
	st.global.u32 [%rd3+4], %r11;
	st.global.u32 [%rd3+8], %r12;
	st.global.u32 [%rd3+12], %r13;
	st.global.u32 [%rd3+16], %r14;
	ret;
}
";

/// Threads of the launch: two warps.
const THREADS: u32 = 64;

/// What thread `t` writes for tiles of `w` lanes.
fn expected(t: u32, w: u32) -> [u32; 5] {
    let v = |u: u32| 7 * u + 3;
    let p = |u: u32| u & 16 == 0 || v(u) % 3 == 0;
    let key = |u: u32| 5 * u % 3;
    let first = t & !(w - 1);
    let tile = first..first + w;
    let bits = |f: &dyn Fn(u32) -> bool| {
        tile.clone()
            .filter(|&u| f(u))
            .fold(0u32, |m, u| m | 1 << (u % 32))
    };
    [
        tile.clone().map(v).fold(0u32, u32::wrapping_add),
        bits(&p),
        u32::from(tile.clone().all(p)),
        u32::from(tile.clone().any(p)),
        bits(&|u| key(u) == key(t)),
    ]
}

#[test]
fn collectives_with_a_tiles_member_mask_answer_for_that_tile_alone() {
    let _shared = shared_device();
    let Some(env) = env_or_skip() else { return };
    let ctx = Context::primary(env).expect("retain the primary context");
    let stream = Stream::new(&ctx).expect("a stream");
    let module = Module::load_ptx(&ctx, TILES).expect("the kernel loads");
    let f = module.function("tiles").expect("the kernel's function");
    let names = ["redux.add", "ballot", "all", "any", "match.any"];
    let mut wrong = Vec::new();
    for w in [8u32, 16, 32] {
        let out = DeviceBuffer::alloc(&ctx, THREADS as usize * 20).expect("an output buffer");
        stream
            .launch(
                &f,
                shape_1d(1, THREADS),
                &[KernelArg::Ptr(out.ptr()), KernelArg::U32(w)],
            )
            .and_then(|()| stream.synchronize())
            .expect("the kernel runs");
        let got = out.to_vec().expect("the output");
        for (t, row) in got.chunks_exact(20).enumerate() {
            let want = expected(t as u32, w);
            for (k, c) in row.chunks_exact(4).enumerate() {
                let g = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
                if g != want[k] {
                    wrong.push(format!(
                        "tiles of {w}, thread {t}: {} {g:#x}, want {:#x}",
                        names[k], want[k]
                    ));
                }
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "{} values wrong:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}
