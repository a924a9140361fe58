//! PTX programs that use `mbarrier`, shared by ptxvm's tests (tests/all/mbarrier_sandbox.rs,
//! tests/all/redteam/mbarrier.rs) and conformance's (tests/all/mbarrier_sandboxed.rs), which run
//! them as written and through the sandbox (ptxvm's sandbox/mbarrier.rs runs `mbarrier` as
//! software barriers on the guest's own shared words): legal programs whose bytes must not change
//! rewritten, and attacks whose every access must stay in the guest's own memory.

/// The header the attack module starts with.
pub const HEAD: &str = ".version 8.0\n.target sm_90\n.address_size 64\n";

/// A CUTLASS-style ring of two stages: warp 0 produces (each lane copies one word of a tile
/// with `cp.async` into the stage's buffer and arrives on the stage's `full` barrier through
/// `cp.async.mbarrier.arrive.noinc`, after waiting for its `empty` barrier), warps 1 and 2
/// consume (wait on `full` by parity, add the word times the tile's number plus one, arrive on
/// `empty`). Warp 2 leaves after tile 1 with `arrive_drop` on both `empty` barriers (the one of
/// stage 0 only once its phase 0 is over, so that the drop counts in phase 1), and the
/// producer's later waits see only warp 1's arrivals. Each consumer thread stores its sum. (A
/// warp leaves whole: lanes of one warp waiting on each other's progress hang a SIMT stack,
/// ptxvm's, that runs one side of a branch to its end first.)
pub const RING: &str = r#"
.visible .entry ring(.param .u64 inp, .param .u64 out, .param .u32 tiles)
{
	.shared .align 8 .b64 full[2];
	.shared .align 8 .b64 empty[2];
	.shared .align 16 .b32 buf[64];
	.reg .pred %p<7>;
	.reg .b32 %r<20>;
	.reg .b64 %rd<8>;
	.reg .b64 %st;
	ld.param.u64 %rd1, [inp];
	ld.param.u64 %rd2, [out];
	ld.param.u32 %r9, [tiles];
	mov.u32 %r1, %tid.x;
	and.b32 %r2, %r1, 31;
	shr.u32 %r3, %r1, 5;
	setp.ne.u32 %p0, %r1, 0;
	@%p0 bra INITED;
	mbarrier.init.shared.b64 [full], 32;
	mbarrier.init.shared.b64 [full+8], 32;
	mbarrier.init.shared.b64 [empty], 64;
	mbarrier.init.shared.b64 [empty+8], 64;
INITED:
	bar.sync 0;
	mov.u32 %r4, 0;
	setp.ne.u32 %p1, %r3, 0;
	@%p1 bra CONSUMER;
PRODUCE:
	setp.ge.u32 %p2, %r4, %r9;
	@%p2 bra DONE;
	and.b32 %r5, %r4, 1;
	shl.b32 %r6, %r5, 3;
	mov.u32 %r7, empty;
	add.u32 %r7, %r7, %r6;
	setp.lt.u32 %p3, %r4, 2;
	@%p3 bra FILL;
	shr.u32 %r8, %r4, 1;
	sub.u32 %r8, %r8, 1;
	and.b32 %r8, %r8, 1;
WAIT_EMPTY:
	mbarrier.try_wait.parity.shared.b64 %p4, [%r7], %r8;
	@!%p4 bra WAIT_EMPTY;
FILL:
	shl.b32 %r10, %r4, 5;
	add.u32 %r10, %r10, %r2;
	mul.wide.u32 %rd3, %r10, 4;
	add.u64 %rd4, %rd1, %rd3;
	shl.b32 %r11, %r5, 5;
	add.u32 %r11, %r11, %r2;
	shl.b32 %r11, %r11, 2;
	mov.u32 %r12, buf;
	add.u32 %r12, %r12, %r11;
	cvt.u64.u32 %rd5, %r12;
	cp.async.ca.shared.global [%rd5], [%rd4], 4;
	mov.u32 %r13, full;
	add.u32 %r13, %r13, %r6;
	cp.async.mbarrier.arrive.noinc.shared.b64 [%r13];
	add.u32 %r4, %r4, 1;
	bra PRODUCE;
CONSUMER:
	mov.u32 %r14, 0;
	setp.eq.u32 %p5, %r3, 2;
CONSUME:
	setp.ge.u32 %p2, %r4, %r9;
	@%p2 bra STORE;
	and.b32 %r5, %r4, 1;
	shl.b32 %r6, %r5, 3;
	mov.u32 %r13, full;
	add.u32 %r13, %r13, %r6;
	shr.u32 %r8, %r4, 1;
	and.b32 %r8, %r8, 1;
WAIT_FULL:
	mbarrier.try_wait.parity.shared.b64 %p4, [%r13], %r8;
	@!%p4 bra WAIT_FULL;
	shl.b32 %r11, %r5, 5;
	add.u32 %r11, %r11, %r2;
	shl.b32 %r11, %r11, 2;
	mov.u32 %r12, buf;
	add.u32 %r12, %r12, %r11;
	ld.shared.u32 %r15, [%r12];
	add.u32 %r16, %r4, 1;
	mad.lo.u32 %r14, %r15, %r16, %r14;
	mov.u32 %r7, empty;
	add.u32 %r7, %r7, %r6;
	setp.eq.u32 %p3, %r4, 1;
	and.pred %p3, %p3, %p5;
	@%p3 bra QUIT;
	mbarrier.arrive.shared.b64 %st, [%r7];
	add.u32 %r4, %r4, 1;
	bra CONSUME;
QUIT:
	mbarrier.arrive_drop.shared.b64 %st, [empty+8];
WAIT_ZERO:
	mbarrier.try_wait.parity.shared.b64 %p6, [empty], 0;
	@!%p6 bra WAIT_ZERO;
	mbarrier.arrive_drop.shared.b64 %st, [empty];
STORE:
	sub.u32 %r17, %r1, 32;
	mul.wide.u32 %rd3, %r17, 4;
	add.u64 %rd4, %rd2, %rd3;
	st.global.u32 [%rd4], %r14;
DONE:
	ret;
}
"#;

/// What [`RING`] stores: consumer c's sum over its tiles t of `inp[32 t + c % 32] * (t + 1)`.
pub fn ring_sums(inp: &[u32], tiles: u32) -> Vec<u32> {
    (0..64u32)
        .map(|c| {
            let (l, last) = (c % 32, if c >= 32 { tiles.min(2) } else { tiles });
            (0..last)
                .map(|t| inp[(32 * t + l) as usize].wrapping_mul(t + 1))
                .fold(0u32, u32::wrapping_add)
        })
        .collect()
}

/// 64 threads use one barrier through generic addresses (`cvta.shared`), waiting by state:
/// thread 0 initialises it under a guard, and each stores a value, arrives, waits, and sums
/// every value.
pub const GENERIC: &str = r#"
.visible .entry gen(.param .u64 out)
{
	.shared .align 8 .b64 bar;
	.shared .align 4 .u32 vals[64];
	.reg .pred %p<3>;
	.reg .b32 %r<8>;
	.reg .b64 %rd<6>;
	.reg .b64 %st;
	ld.param.u64 %rd1, [out];
	mov.u32 %r1, %tid.x;
	cvta.shared.u64 %rd2, bar;
	setp.eq.u32 %p0, %r1, 0;
	@%p0 mbarrier.init.b64 [%rd2], 64;
	bar.sync 0;
	mul.lo.u32 %r2, %r1, 5;
	add.u32 %r2, %r2, 1;
	shl.b32 %r3, %r1, 2;
	mov.u32 %r4, vals;
	add.u32 %r4, %r4, %r3;
	st.shared.u32 [%r4], %r2;
	mbarrier.arrive.b64 %st, [%rd2];
WAIT:
	mbarrier.test_wait.b64 %p1, [%rd2], %st;
	@!%p1 bra WAIT;
	mov.u32 %r5, 0;
	mov.u32 %r6, 0;
SUM:
	shl.b32 %r3, %r6, 2;
	mov.u32 %r4, vals;
	add.u32 %r4, %r4, %r3;
	ld.shared.u32 %r7, [%r4];
	add.u32 %r5, %r5, %r7;
	add.u32 %r6, %r6, 1;
	setp.lt.u32 %p2, %r6, 64;
	@%p2 bra SUM;
	mul.wide.u32 %rd3, %r1, 4;
	add.u64 %rd4, %rd1, %rd3;
	st.global.u32 [%rd4], %r5;
	mbarrier.inval.b64 [%rd2];
	ret;
}
"#;

/// What [`GENERIC`] stores for every thread.
pub fn generic_sum() -> u32 {
    (0..64u32).map(|t| 5 * t + 1).sum()
}

/// Every operation the sandbox allows, on the barrier at `[{a}]` (`{sp}` its space: `.shared`
/// or generic), and the last wait's result stored at `out`.
fn every_operation(sp: &str, a: &str) -> String {
    format!(
        "mbarrier.init{sp}.b64 [{a}], 1;\n\
         mbarrier.arrive{sp}.b64 %st, [{a}];\n\
         mbarrier.arrive.noComplete{sp}.b64 %st, [{a}], 2;\n\
         mbarrier.arrive_drop{sp}.b64 %st, [{a}];\n\
         cp.async.mbarrier.arrive.noinc{sp}.b64 [{a}];\n\
         cp.async.mbarrier.arrive{sp}.b64 [{a}];\n\
         mbarrier.test_wait{sp}.b64 %p1, [{a}], %st;\n\
         mbarrier.try_wait.parity{sp}.b64 %p1, [{a}], 0;\n\
         mbarrier.inval{sp}.b64 [{a}];\n\
         selp.u32 %r3, 1, 0, %p1;\n\
         st.global.u32 [%rd1], %r3;\n"
    )
}

/// The red-team module, whole (PTX 8.0 for sm_90): `mb_offset(out, off)` runs every operation
/// on the barrier at `bar + off` (a 32-bit register); `mb_scalar(out, addr)` on a `.shared`
/// barrier at a `u64` scalar; `mb_generic(out, addr)` on a generic one at a `u64` scalar, in a
/// kernel with no shared memory of its own; `mb_garbage(out, word)` arrives and waits on a word
/// the guest filled, and past its count. Each stores its last wait's result at `out`.
pub fn attacks() -> String {
    let head = ".reg .pred %p<2>;\n.reg .b32 %r<4>;\n.reg .b64 %rd<3>;\n.reg .b64 %st;\n\
                ld.param.u64 %rd1, [out];\n";
    format!(
        "{HEAD}.visible .entry mb_offset(.param .u64 out, .param .u32 off)\n{{\n\
         .shared .align 8 .b64 bar;\n.shared .align 8 .b64 pad[4];\n{head}\
         ld.param.u32 %r1, [off];\nmov.u32 %r2, bar;\nadd.u32 %r2, %r2, %r1;\n{}ret;\n}}\n\
         .visible .entry mb_scalar(.param .u64 out, .param .u64 addr)\n{{\n\
         .shared .align 8 .b64 bar[2];\n{head}ld.param.u64 %rd2, [addr];\n{}ret;\n}}\n\
         .visible .entry mb_generic(.param .u64 out, .param .u64 addr)\n{{\n{head}\
         ld.param.u64 %rd2, [addr];\n{}ret;\n}}\n\
         .visible .entry mb_garbage(.param .u64 out, .param .u64 word)\n{{\n\
         .shared .align 8 .b64 bar;\n{head}ld.param.u64 %rd2, [word];\n\
         st.shared.u64 [bar], %rd2;\n\
         mbarrier.arrive.shared.b64 %st, [bar], 3;\n\
         mbarrier.arrive_drop.shared.b64 %st, [bar];\n\
         mbarrier.test_wait.shared.b64 %p1, [bar], %st;\n\
         mbarrier.try_wait.parity.shared.b64 %p1, [bar], 1;\n\
         mbarrier.init.shared.b64 [bar], 1;\n\
         mbarrier.arrive.shared.b64 %st, [bar], 3;\n\
         mbarrier.arrive.shared.b64 %st, [bar];\n\
         selp.u32 %r3, 1, 0, %p1;\nst.global.u32 [%rd1], %r3;\nret;\n}}\n",
        every_operation(".shared", "%r2"),
        every_operation(".shared", "%rd2"),
        every_operation("", "%rd2"),
    )
}
