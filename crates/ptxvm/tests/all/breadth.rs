//! Instruction breadth beyond the common kernel shapes: bit manipulation, carries, jump tables,
//! transcendentals, rarer atomics and warp ops, and the invalid/unsupported distinction.

use crate::harness::{Arg, DevMem, Rng, Shape};
use crate::text::{HEAD, go, load};
use ptxvm::Module;

#[test]
fn funnel_shift_bfind_dp4a_lop3_redux_and_packed_half_conversion() {
    let m = load(
        r#"
.visible .entry k(.param .u64 out)
{
	.reg .pred %p<2>;
	.reg .b32 %r<16>;
	.reg .f32 %f<3>;
	.reg .b64 %rd<4>;
	ld.param.u64 %rd1, [out];
	mov.u32 %r1, %laneid;
	shf.l.wrap.b32 %r2, %r1, %r1, 28;
	bfind.u32 %r3, %r1;
	dp4a.u32.u32 %r4, 0x01020304, 0x01010101, %r1;
	lop3.b32 %r5, %r1, 0xff, 0x0f, 0x80;
	redux.sync.add.u32 %r6, %r1, -1;
	redux.sync.max.u32 %r7, %r1, -1;
	mov.f32 %f1, 0f3F800000;
	mov.f32 %f2, 0fC0000000;
	cvt.rn.f16x2.f32 %r8, %f1, %f2;
	set.gt.u32.s32 %r12, %r1, 15;
	set.lt.f32.u32 %r13, %r1, 16;
	add.s32 %r3, %r3, %r12;
	add.s32 %r3, %r3, %r13;
	mov.b64 %rd2, %rd1;
	isspacep.global %p1, %rd2;
	selp.u32 %r9, 1, 0, %p1;
	min.NaN.f32 %f1, %f1, 0f7FC00000;
	mov.b32 %r10, %f1;
	mul.wide.u32 %rd2, %r1, 32;
	add.s64 %rd3, %rd1, %rd2;
	st.global.v4.u32 [%rd3], {%r2, %r3, %r4, %r5};
	st.global.v4.u32 [%rd3+16], {%r6, %r7, %r8, %r9};
	ret;
}
"#,
    );
    let mut mem = DevMem::new();
    let d = mem.alloc(32 * 32);
    go(&m, &Shape::linear(1, 32), &[Arg::Ptr(d)], &[], &mem).unwrap();
    let out: Vec<u32> = mem.download(d, 32 * 8);
    for l in 0..32u32 {
        let o = &out[l as usize * 8..][..8];
        assert_eq!(o[0], l.rotate_left(28), "shf lane {l}");
        // bfind, plus set.gt (all ones above lane 15) and set.lt.f32 (1.0f below 16).
        let bf = if l == 0 {
            u32::MAX
        } else {
            31 - l.leading_zeros()
        };
        let set = if l > 15 { u32::MAX } else { 1f32.to_bits() };
        assert_eq!(o[1], bf.wrapping_add(set), "bfind + set {l}");
        assert_eq!(o[2], 10 + l, "dp4a {l}");
        assert_eq!(o[3], l & 0x0f, "lop3 and-and {l}");
        assert_eq!((o[4], o[5]), (496, 31), "redux {l}");
        assert_eq!(o[6], 0x3c00_c000, "cvt f16x2 {l}");
        assert_eq!(o[7], 1, "isspacep {l}");
    }
}

#[test]
fn unknown_opcode_is_invalid_and_known_unimplemented_is_unsupported() {
    let bad = Module::load(&format!(
        "{HEAD}.visible .entry k() {{ .reg .b32 %r<2>; frobnicate.b32 %r1, %r1; ret; }}"
    ));
    assert!(
        matches!(bad, Err(ptxvm::Error::Invalid { line: 4, .. })),
        "{bad:?}"
    );
    let unimpl = Module::load(&format!(
        "{HEAD}.visible .entry k() {{ .reg .b32 %r<3>; vabsdiff.u32.u32.u32 %r1, %r1, %r2, %r1; ret; }}"
    ));
    assert!(
        matches!(unimpl, Err(ptxvm::Error::Unsupported { line: 4, .. })),
        "{unimpl:?}"
    );
}

#[test]
fn carry_chain_adds_and_multiplies_128_bit_values() {
    let m = load(
        r#"
.visible .entry k(.param .u64 out)
{
	.reg .b32 %r<12>;
	.reg .b64 %rd<2>;
	ld.param.u64 %rd1, [out];
	// {r1,r2,r3,r4} = 0x00000000_ffffffff_ffffffff_ffffffff + 1 (little-endian words)
	add.cc.u32 %r1, -1, 1;
	addc.cc.u32 %r2, -1, 0;
	addc.cc.u32 %r3, -1, 0;
	addc.u32 %r4, 0, 0;
	// 64-bit product of 0xffffffff * 0xffffffff + 0xffffffff via mad.lo.cc / madc.hi
	mov.u32 %r5, -1;
	mad.lo.cc.u32 %r6, %r5, %r5, %r5;
	madc.hi.u32 %r7, %r5, %r5, 0;
	sub.cc.u32 %r8, 0, 1;
	subc.u32 %r9, 5, 0;
	st.global.v4.u32 [%rd1], {%r1, %r2, %r3, %r4};
	st.global.v4.u32 [%rd1+16], {%r6, %r7, %r8, %r9};
	ret;
}
"#,
    );
    let mut mem = DevMem::new();
    let d = mem.alloc(32);
    go(&m, &Shape::linear(1, 1), &[Arg::Ptr(d)], &[], &mem).unwrap();
    let o: Vec<u32> = mem.download(d, 8);
    assert_eq!(&o[..4], &[0, 0, 0, 1]);
    let p = 0xffff_ffffu64 * 0xffff_ffff + 0xffff_ffff;
    assert_eq!((o[4], o[5]), (p as u32, (p >> 32) as u32));
    assert_eq!((o[6], o[7]), (u32::MAX, 4));
}

#[test]
fn transcendental_approximations_are_close_to_the_host_library() {
    let m = load(
        r#"
.visible .entry k(.param .u64 in, .param .u64 out)
{
	.reg .f32 %f<12>;
	.reg .b32 %r<2>;
	.reg .b64 %rd<6>;
	ld.param.u64 %rd1, [in];
	ld.param.u64 %rd2, [out];
	mov.u32 %r1, %tid.x;
	mul.wide.u32 %rd3, %r1, 4;
	add.s64 %rd4, %rd1, %rd3;
	ld.global.f32 %f1, [%rd4];
	ex2.approx.ftz.f32 %f2, %f1;
	abs.f32 %f10, %f1;
	lg2.approx.f32 %f3, %f10;
	sin.approx.f32 %f4, %f1;
	cos.approx.f32 %f5, %f1;
	tanh.approx.f32 %f6, %f1;
	rcp.approx.f32 %f7, %f1;
	rsqrt.approx.f32 %f8, %f10;
	copysign.f32 %f9, %f1, 0f40400000;
	mul.wide.u32 %rd3, %r1, 32;
	add.s64 %rd5, %rd2, %rd3;
	st.global.v4.f32 [%rd5], {%f2, %f3, %f4, %f5};
	st.global.v4.f32 [%rd5+16], {%f6, %f7, %f8, %f9};
	ret;
}
"#,
    );
    let mut rng = Rng::new(40);
    let x: Vec<f32> = (0..64).map(|_| rng.f32() * 8.0 + 0.01).collect();
    let mut mem = DevMem::new();
    let (dx, d) = (mem.upload(&x), mem.alloc(64 * 32));
    go(
        &m,
        &Shape::linear(1, 64),
        &[Arg::Ptr(dx), Arg::Ptr(d)],
        &[],
        &mem,
    )
    .unwrap();
    let o: Vec<f32> = mem.download(d, 64 * 8);
    let close = |got: f32, want: f32| (got - want).abs() <= 1e-5 * want.abs().max(1.0);
    for (t, &v) in x.iter().enumerate() {
        let want = [
            v.exp2(),
            v.abs().log2(),
            v.sin(),
            v.cos(),
            v.tanh(),
            1.0 / v,
            1.0 / v.abs().sqrt(),
            3f32.copysign(v),
        ];
        for (k, w) in want.iter().enumerate() {
            assert!(
                close(o[t * 8 + k], *w),
                "x={v} op {k}: {} vs {w}",
                o[t * 8 + k]
            );
        }
    }
}

#[test]
fn atomic_inc_dec_match_all_shfl_up_and_f16x2_fma() {
    let m = load(
        r#"
.visible .entry k(.param .u64 out)
{
	.reg .pred %p<3>;
	.reg .b32 %r<16>;
	.reg .b64 %rd<4>;
	ld.param.u64 %rd1, [out];
	mov.u32 %r1, %laneid;
	atom.global.inc.u32 %r2, [%rd1], 9;
	atom.global.dec.u32 %r3, [%rd1+4], 100;
	shr.u32 %r4, %r1, 4;
	match.all.sync.b32 %r5|%p1, %r4, -1;
	selp.u32 %r6, 1, 0, %p1;
	match.all.sync.b32 %r7|%p2, 7, -1;
	selp.u32 %r8, 1, 0, %p2;
	shfl.sync.up.b32 %r9, %r1, 3, 0, -1;
	mov.b32 %r10, 0x40003c00;
	fma.rn.f16x2 %r11, %r10, %r10, %r10;
	vote.sync.uni.pred %p1, %p2, -1;
	selp.u32 %r12, 1, 0, %p1;
	mul.wide.u32 %rd2, %r1, 32;
	add.s64 %rd3, %rd1, %rd2;
	st.global.v4.u32 [%rd3+32], {%r6, %r7, %r8, %r9};
	st.global.v2.u32 [%rd3+48], {%r11, %r12};
	ret;
}
"#,
    );
    let mut mem = DevMem::new();
    let d = mem.alloc(32 + 32 * 32);
    go(&m, &Shape::linear(1, 32), &[Arg::Ptr(d)], &[], &mem).unwrap();
    let o: Vec<u32> = mem.download(d, 8 + 32 * 8);
    // 32 increments wrapping at 9: 32 mod 10 = 2. 32 decrements from 0 with limit 100: wraps to
    // 100 first, then counts down 31 times to 69.
    assert_eq!((o[0], o[1]), (2, 69));
    for l in 0..32usize {
        let r = &o[8 + l * 8..][..6];
        assert_eq!((r[0], r[1], r[2]), (0, u32::MAX, 1), "match.all lane {l}");
        assert_eq!(
            r[3],
            if l >= 3 { l as u32 - 3 } else { l as u32 },
            "shfl.up lane {l}"
        );
        // {1.0, 2.0} * {1.0, 2.0} + {1.0, 2.0} = {2.0, 6.0} as halves.
        assert_eq!(r[4], 0x4600_4000, "f16x2 fma lane {l}");
        assert_eq!(r[5], 1, "vote.uni lane {l}");
    }
}

#[test]
fn switch_through_brx_idx_jump_table() {
    let m = load(
        r#"
.visible .entry k(.param .u64 out)
{
	.reg .b32 %r<4>;
	.reg .b64 %rd<4>;
	ld.param.u64 %rd1, [out];
	mov.u32 %r1, %tid.x;
	rem.u32 %r2, %r1, 3;
	$L_brx_0: .branchtargets $L_a, $L_b, $L_c;
	brx.idx %r2, $L_brx_0;
$L_a:
	mov.u32 %r3, 100;
	bra.uni $L_done;
$L_b:
	mov.u32 %r3, 200;
	bra.uni $L_done;
$L_c:
	mov.u32 %r3, 300;
$L_done:
	add.s32 %r3, %r3, %r1;
	mul.wide.u32 %rd2, %r1, 4;
	add.s64 %rd3, %rd1, %rd2;
	st.global.u32 [%rd3], %r3;
	ret;
}
"#,
    );
    let mut mem = DevMem::new();
    let d = mem.alloc(40 * 4);
    go(&m, &Shape::linear(1, 40), &[Arg::Ptr(d)], &[], &mem).unwrap();
    let out: Vec<u32> = mem.download(d, 40);
    for t in 0..40u32 {
        assert_eq!(out[t as usize], 100 * (t % 3 + 1) + t);
    }
    let bad = load(
        ".visible .entry k() { .reg .b32 %r<2>; mov.u32 %r1, 5; $t: .branchtargets $a; brx.idx %r1, $t; $a: ret; }",
    );
    let f = go(&bad, &Shape::linear(1, 1), &[], &[], &DevMem::new()).unwrap_err();
    assert_eq!(f.kind, ptxvm::FaultKind::BadBranchIndex { index: 5 });
}

#[test]
fn elect_bmsk_szext_and_fns_give_the_ptx_isas_answers() {
    let m = load(
        r#"
.visible .entry k(.param .u64 out)
{
	.reg .pred %p<3>;
	.reg .b32 %r<16>;
	.reg .b64 %rd<4>;
	ld.param.u64 %rd1, [out];
	mov.u32 %r1, %laneid;
	setp.lt.u32 %p1, %r1, 5;
	@%p1 bra DONE;
	elect.sync %r2|%p2, 0xfffffff0;
	selp.u32 %r3, 1, 0, %p2;
	bmsk.wrap.b32 %r4, 1, 2;
	bmsk.clamp.b32 %r5, %r1, 40;
	szext.wrap.s32 %r6, 0x80, 8;
	szext.wrap.u32 %r7, 0xffffffff, 0;
	fns.b32 %r8, 0xaaaaaaaa, 2, -1;
	fns.b32 %r9, 0xaaaaaaaa, %r1, 1;
	mul.wide.u32 %rd2, %r1, 32;
	add.s64 %rd3, %rd1, %rd2;
	st.global.v4.u32 [%rd3], {%r2, %r3, %r4, %r5};
	st.global.v4.u32 [%rd3+16], {%r6, %r7, %r8, %r9};
DONE:
	ret;
}
"#,
    );
    let mut mem = DevMem::new();
    let d = mem.alloc(32 * 32);
    go(&m, &Shape::linear(1, 32), &[Arg::Ptr(d)], &[], &mem).unwrap();
    let o: Vec<u32> = mem.download(d, 32 * 8);
    for l in 5..32usize {
        let r = &o[l * 8..][..8];
        // Lanes 0-4 left: of the mask's lanes 4-31, 5 is the lowest still running.
        assert_eq!((r[0], r[1]), (5, u32::from(l == 5)), "elect lane {l}");
        assert_eq!(r[2], 0x6, "bmsk.wrap 1, 2");
        assert_eq!(r[3], !0u32 << l, "bmsk.clamp lane {l}, 40 bits");
        assert_eq!((r[4], r[5]), (0xffff_ff80, 0), "szext");
        assert_eq!(r[6], 1, "fns 2, -1");
        let odd = if l % 2 == 1 { l } else { l + 1 };
        assert_eq!(
            r[7],
            if odd < 32 { odd as u32 } else { u32::MAX },
            "fns lane {l}"
        );
    }
}
