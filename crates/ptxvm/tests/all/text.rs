//! Hand-written PTX in the shapes nvcc emits: nested call scopes, module globals, local arrays,
//! vector accesses, predicates and warp intrinsics.

use crate::harness::{Arg, DevMem, Rng, Shape, pack};
use ptxvm::{Launch, Module};

use crate::launch::launch;

pub const HEAD: &str = ".version 8.5\n.target sm_90\n.address_size 64\n";

/// Loads `body` after the standard header.
pub fn load(body: &str) -> Module {
    Module::load(&format!("{HEAD}{body}")).unwrap_or_else(|e| panic!("{e}"))
}

/// Runs kernel 0 of `m` with `globals` addresses.
pub fn go(
    m: &Module,
    shape: &Shape,
    args: &[Arg],
    globals: &[u64],
    mem: &dyn ptxvm::Memory,
) -> Result<ptxvm::LaunchStats, ptxvm::Fault> {
    let params = pack(&m.kernels()[0], args);
    let l = Launch {
        grid: shape.grid,
        block: shape.block,
        dynamic_shared_bytes: shape.dyn_shared,
        globals,
        workers: shape.workers,
        ..launch(0, &params)
    };
    ptxvm::launch(m, &l, mem)
}

#[test]
fn nvcc_style_call_with_nested_param_scope() {
    let m = load(
        r#"
.func  (.param .b32 func_retval0) _Z3addii(.param .b32 _Z3addii_param_0, .param .b32 _Z3addii_param_1)
{
	.reg .b32 	%r<4>;
	ld.param.u32 	%r1, [_Z3addii_param_0];
	ld.param.u32 	%r2, [_Z3addii_param_1];
	add.s32 	%r3, %r2, %r1;
	st.param.b32 	[func_retval0+0], %r3;
	ret;
}
.visible .entry k(.param .u64 k_param_0)
{
	.reg .b32 	%r<4>;
	.reg .b64 	%rd<5>;
	ld.param.u64 	%rd1, [k_param_0];
	cvta.to.global.u64 	%rd2, %rd1;
	mov.u32 	%r1, %tid.x;
	{ // callseq 0, 0
	.reg .b32 temp_param_reg;
	.param .b32 param0;
	st.param.b32 	[param0+0], %r1;
	.param .b32 param1;
	st.param.b32 	[param1+0], 100;
	.param .b32 retval0;
	call.uni (retval0),
	_Z3addii,
	(
	param0,
	param1
	);
	ld.param.b32 	%r2, [retval0+0];
	} // callseq 0
	mul.wide.u32 	%rd3, %r1, 4;
	add.s64 	%rd4, %rd2, %rd3;
	st.global.u32 	[%rd4], %r2;
	ret;
}
"#,
    );
    let mut mem = DevMem::new();
    let d = mem.alloc(64 * 4);
    go(&m, &Shape::linear(1, 64), &[Arg::Ptr(d)], &[], &mem).unwrap();
    let out: Vec<u32> = mem.download(d, 64);
    assert_eq!(out, (100..164).collect::<Vec<u32>>());
}

#[test]
fn module_globals_and_constants_are_reached_through_launch_addresses() {
    let m = load(
        r#"
.global .align 4 .b32 table[4] = {10, 20, 30, 40};
.const .align 4 .f32 scale = 0f40000000;
.visible .entry k(.param .u64 out)
{
	.reg .b32 %r<6>;
	.reg .f32 %f<3>;
	.reg .b64 %rd<6>;
	ld.param.u64 %rd1, [out];
	mov.u32 %r1, %tid.x;
	and.b32 %r2, %r1, 3;
	mul.wide.u32 %rd2, %r2, 4;
	mov.u64 %rd3, table;
	add.s64 %rd4, %rd3, %rd2;
	ld.global.u32 %r3, [%rd4];
	cvt.rn.f32.u32 %f1, %r3;
	ld.const.f32 %f2, [scale];
	mul.f32 %f1, %f1, %f2;
	mul.wide.u32 %rd2, %r1, 4;
	add.s64 %rd5, %rd1, %rd2;
	st.f32 [%rd5], %f1;
	ret;
}
"#,
    );
    let g = m.globals();
    assert_eq!(g.len(), 2);
    assert_eq!(
        (g[0].name.as_str(), g[0].size, g[0].space),
        ("table", 16, ptxvm::GlobalSpace::Global)
    );
    assert_eq!(
        g[0].init,
        [10u32, 20, 30, 40]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect::<Vec<_>>()
    );
    assert_eq!(g[1].init, 2f32.to_le_bytes().to_vec());
    let mut mem = DevMem::new();
    let gt = mem.upload(&[10u32, 20, 30, 40]);
    let gs = mem.upload(&[2f32]);
    let d = mem.alloc(8 * 4);
    go(&m, &Shape::linear(1, 8), &[Arg::Ptr(d)], &[gt, gs], &mem).unwrap();
    let out: Vec<f32> = mem.download(d, 8);
    assert_eq!(out, vec![20.0, 40.0, 60.0, 80.0, 20.0, 40.0, 60.0, 80.0]);
}

#[test]
fn local_array_through_generic_pointer_is_per_thread() {
    let m = load(
        r#"
.visible .entry k(.param .u64 out)
{
	.local .align 4 .b8 __local_depot0[64];
	.reg .b64 %SP;
	.reg .b64 %SPL;
	.reg .pred %p<2>;
	.reg .b32 %r<8>;
	.reg .b64 %rd<8>;
	mov.u64 %SPL, __local_depot0;
	cvta.local.u64 %SP, %SPL;
	mov.u32 %r1, %tid.x;
	mov.u32 %r2, 0;
$L_fill:
	mul.wide.u32 %rd1, %r2, 4;
	add.s64 %rd2, %SP, %rd1;
	add.s32 %r3, %r2, %r1;
	st.u32 [%rd2], %r3;
	add.s32 %r2, %r2, 1;
	setp.lt.u32 %p1, %r2, 16;
	@%p1 bra $L_fill;
	and.b32 %r4, %r1, 15;
	mul.wide.u32 %rd3, %r4, 4;
	add.s64 %rd4, %SPL, %rd3;
	ld.local.u32 %r5, [%rd4];
	ld.param.u64 %rd5, [out];
	mul.wide.u32 %rd6, %r1, 4;
	add.s64 %rd7, %rd5, %rd6;
	st.global.u32 [%rd7], %r5;
	ret;
}
"#,
    );
    assert_eq!(m.kernels()[0].local_bytes_per_thread, 64);
    let mut mem = DevMem::new();
    let d = mem.alloc(40 * 4);
    go(&m, &Shape::linear(1, 40), &[Arg::Ptr(d)], &[], &mem).unwrap();
    let out: Vec<u32> = mem.download(d, 40);
    for t in 0..40u32 {
        assert_eq!(out[t as usize], (t & 15) + t);
    }
}

#[test]
fn vector_loads_stores_and_register_pack_unpack() {
    let m = load(
        r#"
.visible .entry k(.param .u64 in, .param .u64 out)
{
	.reg .f32 %f<5>;
	.reg .b32 %r<4>;
	.reg .b64 %rd<8>;
	ld.param.u64 %rd1, [in];
	ld.param.u64 %rd2, [out];
	mov.u32 %r1, %tid.x;
	mul.wide.u32 %rd3, %r1, 16;
	add.s64 %rd4, %rd1, %rd3;
	add.s64 %rd5, %rd2, %rd3;
	ld.global.nc.v4.f32 {%f1, %f2, %f3, %f4}, [%rd4];
	st.global.v4.f32 [%rd5], {%f4, %f3, %f2, %f1};
	mov.b64 %rd6, {%r1, %r1};
	mov.b64 {%r2, %r3}, %rd6;
	add.s32 %r2, %r2, %r3;
	st.global.v2.u32 [%rd5+8], {%r2, %r2};
	ret;
}
"#,
    );
    let mut rng = Rng::new(20);
    let input = rng.vec_f32(32 * 4, 5.0);
    let mut mem = DevMem::new();
    let (di, d) = (mem.upload(&input), mem.alloc(32 * 16));
    go(
        &m,
        &Shape::linear(1, 32),
        &[Arg::Ptr(di), Arg::Ptr(d)],
        &[],
        &mem,
    )
    .unwrap();
    let out: Vec<u32> = mem.download(d, 32 * 4);
    for t in 0..32 {
        assert_eq!(f32::from_bits(out[t * 4]), input[t * 4 + 3]);
        assert_eq!(f32::from_bits(out[t * 4 + 1]), input[t * 4 + 2]);
        assert_eq!(out[t * 4 + 2], 2 * t as u32);
        assert_eq!(out[t * 4 + 3], 2 * t as u32);
    }
}

#[test]
fn setp_combinations_selp_and_predicated_stores() {
    let m = load(
        r#"
.visible .entry k(.param .u64 out)
{
	.reg .pred %p<6>;
	.reg .b32 %r<8>;
	.reg .b64 %rd<4>;
	ld.param.u64 %rd1, [out];
	mov.u32 %r1, %tid.x;
	setp.lt.u32 %p1, %r1, 16;
	setp.eq.and.u32 %p2|%p3, %r1, 3, %p1;
	setp.gt.or.s32 %p4, %r1, 28, !%p1;
	selp.b32 %r2, 1, 0, %p2;
	selp.b32 %r3, 2, 0, %p3;
	selp.b32 %r4, 4, 0, %p4;
	add.s32 %r5, %r2, %r3;
	add.s32 %r5, %r5, %r4;
	mul.wide.u32 %rd2, %r1, 4;
	add.s64 %rd3, %rd1, %rd2;
	st.global.u32 [%rd3], %r5;
	@!%p1 bra $done;
	st.global.u32 [%rd3], 100;
$done:
	ret;
}
"#,
    );
    let mut mem = DevMem::new();
    let d = mem.alloc(32 * 4);
    go(&m, &Shape::linear(1, 32), &[Arg::Ptr(d)], &[], &mem).unwrap();
    let out: Vec<u32> = mem.download(d, 32);
    for t in 0..32u32 {
        let want = if t < 16 { 100 } else { 4 };
        assert_eq!(out[t as usize], want, "thread {t}");
    }
}

#[test]
fn warp_intrinsics_vote_match_shfl_segments_and_activemask() {
    let m = load(
        r#"
.visible .entry k(.param .u64 out)
{
	.reg .pred %p<4>;
	.reg .b32 %r<12>;
	.reg .b64 %rd<4>;
	ld.param.u64 %rd1, [out];
	mov.u32 %r1, %laneid;
	and.b32 %r2, %r1, 3;
	match.any.sync.b32 %r3, %r2, -1;
	shfl.sync.idx.b32 %r4|%p1, %r1, 0, 6175, -1;
	setp.lt.u32 %p2, %r1, 8;
	vote.sync.any.pred %p3, %p2, -1;
	selp.b32 %r5, 1, 0, %p3;
	vote.sync.all.pred %p3, %p2, -1;
	selp.b32 %r6, 2, 0, %p3;
	add.s32 %r5, %r5, %r6;
	mov.u32 %r7, 0;
	@%p2 activemask.b32 %r7;
	mul.wide.u32 %rd2, %r1, 16;
	add.s64 %rd3, %rd1, %rd2;
	st.global.v4.u32 [%rd3], {%r3, %r4, %r5, %r7};
	ret;
}
"#,
    );
    let mut mem = DevMem::new();
    let d = mem.alloc(32 * 16);
    go(&m, &Shape::linear(1, 32), &[Arg::Ptr(d)], &[], &mem).unwrap();
    let out: Vec<u32> = mem.download(d, 32 * 4);
    for l in 0..32u32 {
        let o = &out[l as usize * 4..][..4];
        assert_eq!(o[0], 0x1111_1111u32 << (l & 3), "match lane {l}");
        // c = 0x181f: segments of 8 lanes; idx 0 → first lane of the segment.
        assert_eq!(o[1], l & !7, "shfl lane {l}");
        assert_eq!(o[2], 1, "vote lane {l}");
        // Guarded lanes see the whole converged warp; the others keep their 0.
        let want = if l < 8 { u32::MAX } else { 0 };
        assert_eq!(o[3], want, "activemask lane {l}");
    }
}

#[test]
fn shared_atomics_and_global_float_reduction() {
    let m = load(
        r#"
.visible .entry k(.param .u64 out, .param .u64 fsum)
{
	.shared .align 4 .b32 cnt[2];
	.reg .pred %p<2>;
	.reg .b32 %r<10>;
	.reg .f32 %f<2>;
	.reg .b64 %rd<4>;
	mov.u32 %r1, %tid.x;
	setp.ne.u32 %p1, %r1, 0;
	@%p1 bra $go;
	st.shared.u32 [cnt], 0;
	st.shared.u32 [cnt+4], 1000;
$go:
	bar.sync 0;
	atom.shared.add.u32 %r2, [cnt], 1;
	atom.shared.min.u32 %r3, [cnt+4], %r1;
	cvt.rn.f32.u32 %f1, %r1;
	ld.param.u64 %rd2, [fsum];
	red.global.add.f32 [%rd2], %f1;
	bar.sync 0;
	@%p1 bra $end;
	ld.shared.u32 %r4, [cnt];
	ld.shared.u32 %r5, [cnt+4];
	ld.param.u64 %rd1, [out];
	atom.global.add.u32 %r6, [%rd1], %r4;
	atom.global.max.s32 %r7, [%rd1+4], %r5;
	atom.global.cas.b32 %r8, [%rd1+8], 0, 7;
	atom.global.exch.b32 %r9, [%rd1+12], 9;
$end:
	ret;
}
"#,
    );
    let mut mem = DevMem::new();
    let d = mem.upload(&[0u32, 0, 0, 0]);
    let f = mem.upload(&[0f32]);
    let shape = Shape {
        grid: [3, 1, 1],
        block: [100, 1, 1],
        dyn_shared: 0,
        workers: 3,
    };
    go(&m, &shape, &[Arg::Ptr(d), Arg::Ptr(f)], &[], &mem).unwrap();
    let out: Vec<u32> = mem.download(d, 4);
    assert_eq!(out, vec![300, 0, 7, 9]);
    let s: Vec<f32> = mem.download(f, 1);
    assert_eq!(s[0], 3.0 * (0..100).sum::<u32>() as f32);
}

#[test]
fn cvt_saturation_bitfields_and_f64_math() {
    let m = load(
        r#"
.visible .entry k(.param .u64 out, .param .f64 x)
{
	.reg .pred %p<2>;
	.reg .b32 %r<10>;
	.reg .f64 %fd<6>;
	.reg .f32 %f<4>;
	.reg .b64 %rd<4>;
	ld.param.u64 %rd1, [out];
	ld.param.f64 %fd1, [x];
	cvt.rzi.s32.f64 %r1, %fd1;
	cvt.sat.u8.s32 %r2, %r1;
	cvt.rni.s32.f64 %r3, %fd1;
	bfe.u32 %r4, 0xabcd1234, 8, 8;
	prmt.b32 %r5, 0x44332211, 0x88776655, 0x5410;
	sqrt.rn.f64 %fd2, %fd1;
	mul.rn.f64 %fd3, %fd2, %fd2;
	sub.f64 %fd4, %fd3, %fd1;
	abs.f64 %fd4, %fd4;
	setp.lt.f64 %p1, %fd4, 0d3E45798EE2308C3A;
	selp.u32 %r6, 1, 0, %p1;
	add.rz.f32 %f1, 0f3F800000, 0f33800001;
	mov.b32 %r7, %f1;
	add.rp.f32 %f2, 0f3F800000, 0f33800001;
	mov.b32 %r8, %f2;
	st.global.v4.u32 [%rd1], {%r1, %r2, %r3, %r4};
	st.global.v4.u32 [%rd1+16], {%r5, %r6, %r7, %r8};
	ret;
}
"#,
    );
    let mut mem = DevMem::new();
    let d = mem.alloc(32);
    let k = &m.kernels()[0];
    let mut params = pack(k, &[Arg::Ptr(d), Arg::Ptr(0)]);
    params[8..16].copy_from_slice(&300.5f64.to_le_bytes());
    let l = launch(0, &params);
    ptxvm::launch(&m, &l, &mem).unwrap();
    let o: Vec<u32> = mem.download(d, 8);
    assert_eq!(&o[..4], &[300, 255, 300, 0x12]);
    assert_eq!(o[4], 0x6655_2211);
    assert_eq!(o[5], 1);
    assert_eq!(o[6], 1f32.to_bits());
    assert_eq!(o[7], 1f32.next_up().to_bits());
}

#[test]
fn nvcc_12_vector_add_with_header_comments_and_debug_lines_runs() {
    let src = r#"//
// Generated by NVIDIA NVVM Compiler
//
// Compiler Build ID: CL-34097967
// Cuda compilation tools, release 12.4, V12.4.131
// Based on NVVM 7.0.1
//

.version 8.4
.target sm_90
.address_size 64

	// .globl	_Z6vecAddPKfS0_Pfi

.visible .entry _Z6vecAddPKfS0_Pfi(
	.param .u64 _Z6vecAddPKfS0_Pfi_param_0,
	.param .u64 _Z6vecAddPKfS0_Pfi_param_1,
	.param .u64 _Z6vecAddPKfS0_Pfi_param_2,
	.param .u32 _Z6vecAddPKfS0_Pfi_param_3
)
.maxntid 256, 1, 1
.minnctapersm 2
{
	.reg .pred 	%p<2>;
	.reg .b32 	%r<6>;
	.reg .f32 	%f<4>;
	.reg .b64 	%rd<11>;

	.loc	1 3 0, function_name $L__info_string0, inlined_at 1 9 5
	ld.param.u64 	%rd1, [_Z6vecAddPKfS0_Pfi_param_0];
	ld.param.u64 	%rd2, [_Z6vecAddPKfS0_Pfi_param_1];
	ld.param.u64 	%rd3, [_Z6vecAddPKfS0_Pfi_param_2];
	ld.param.u32 	%r2, [_Z6vecAddPKfS0_Pfi_param_3];
	mov.u32 	%r3, %ctaid.x;
	mov.u32 	%r4, %ntid.x;
	mov.u32 	%r5, %tid.x;
	mad.lo.s32 	%r1, %r3, %r4, %r5;
	setp.ge.s32 	%p1, %r1, %r2;
	@%p1 bra 	$L__BB0_2;

	cvta.to.global.u64 	%rd4, %rd1;
	mul.wide.s32 	%rd5, %r1, 4;
	add.s64 	%rd6, %rd4, %rd5;
	cvta.to.global.u64 	%rd7, %rd2;
	add.s64 	%rd8, %rd7, %rd5;
	ld.global.nc.f32 	%f1, [%rd8];
	ld.global.nc.f32 	%f2, [%rd6];
	add.f32 	%f3, %f2, %f1;
	cvta.to.global.u64 	%rd9, %rd3;
	add.s64 	%rd10, %rd9, %rd5;
	st.global.f32 	[%rd10], %f3;

$L__BB0_2:
	ret;

}
	.file	1 "/tmp/vec.cu"
	.section	.debug_str
	{
$L__info_string0:
.b8 95,90,0
	}
"#;
    let m = Module::load(src).unwrap();
    assert_eq!(m.kernels()[0].max_threads_per_block, Some(256));
    let mut rng = Rng::new(30);
    let (a, b) = (rng.vec_f32(300, 9.0), rng.vec_f32(300, 9.0));
    let mut mem = DevMem::new();
    let (da, db, dc) = (mem.upload(&a), mem.upload(&b), mem.alloc(300 * 4));
    let args = [Arg::Ptr(da), Arg::Ptr(db), Arg::Ptr(dc), Arg::I32(300)];
    go(&m, &Shape::linear(2, 256), &args, &[], &mem).unwrap();
    let c: Vec<f32> = mem.download(dc, 300);
    assert!((0..300).all(|i| c[i] == a[i] + b[i]));
    let too_big = go(&m, &Shape::linear(1, 512), &args, &[], &mem).unwrap_err();
    assert!(matches!(too_big.kind, ptxvm::FaultKind::InvalidLaunch(_)));
}

#[test]
fn device_assert_stops_the_kernel_with_its_message_and_printf_of_null_runs() {
    let decl = ".extern .func __assertfail(.param .b64 a, .param .b64 b, .param .b32 c, .param .b64 d, .param .b64 e);";
    let m = load(&format!(
        "{decl}\n.visible .entry k() {{ .reg .pred %p<2>; .reg .b32 %r<2>; mov.u32 %r1, %tid.x; setp.eq.u32 %p1, %r1, 3;\n\
         @!%p1 bra $ok; {{ .param .b64 a; .param .b64 b; .param .b32 c; .param .b64 d; .param .b64 e;\n\
         st.param.b64 [a], 0; st.param.b64 [b], 0; st.param.b32 [c], 77; st.param.b64 [d], 0;\n\
         call.uni __assertfail, (a, b, c, d, e); }}\n$ok: ret; }}"
    ));
    let mut mem = DevMem::new();
    let f = go(&m, &Shape::linear(1, 32), &[], &[], &mem).unwrap_err();
    // Unreadable strings (NULL here) print as "?", never fault a second time.
    let want = ptxvm::FaultKind::AssertFailed(Box::new(ptxvm::AssertFailure {
        expression: "?".into(),
        file: "?".into(),
        line: 77,
        function: "?".into(),
    }));
    assert_eq!((f.kind.clone(), f.thread), (want, [3, 0, 0]));
    assert_eq!(
        f.assert_message().as_deref(),
        Some("?:77: ?: block: [0,0,0], thread: [3,0,0] Assertion `?` failed.")
    );
    // A NULL format prints nothing and returns -1, as CUDA documents.
    let printf = load(&format!(
        "{HEAD}.extern .func (.param .b32 r) vprintf(.param .b64 f, .param .b64 a);\n\
         .visible .entry k(.param .u64 out) {{ .reg .b32 %r<2>; .reg .b64 %rd<2>; {{ .param .b64 f; .param .b64 a; .param .b32 r;\n\
         st.param.b64 [f], 0; st.param.b64 [a], 0;\n\
         call.uni (r), vprintf, (f, a); ld.param.b32 %r1, [r]; }}\n\
         ld.param.u64 %rd1, [out]; st.global.u32 [%rd1], %r1; ret; }}"
    ));
    let out = mem.alloc(4);
    go(&printf, &Shape::linear(1, 1), &[Arg::Ptr(out)], &[], &mem).unwrap();
    assert_eq!(mem.download::<u32>(out, 1), vec![u32::MAX]);
}

#[test]
fn byval_struct_parameter_through_param_and_generic_addresses() {
    let m = load(
        r#"
.visible .entry k(.param .align 8 .b8 k_param_0[16], .param .u64 out)
{
	.reg .b32 %r<6>;
	.reg .b64 %rd<8>;
	mov.u32 %r1, %tid.x;
	and.b32 %r2, %r1, 3;
	mul.wide.u32 %rd1, %r2, 4;
	mov.b64 %rd2, k_param_0;
	add.s64 %rd3, %rd2, %rd1;
	ld.param.u32 %r3, [%rd3];
	cvta.param.u64 %rd4, %rd2;
	add.s64 %rd5, %rd4, %rd1;
	ld.u32 %r4, [%rd5];
	ld.param.v2.u32 {%r5, %r5}, [k_param_0+8];
	add.s32 %r3, %r3, %r4;
	add.s32 %r3, %r3, %r5;
	ld.param.u64 %rd6, [out];
	mul.wide.u32 %rd7, %r1, 4;
	add.s64 %rd6, %rd6, %rd7;
	st.global.u32 [%rd6], %r3;
	ret;
}
"#,
    );
    let mut mem = DevMem::new();
    let d = mem.alloc(8 * 4);
    let k = &m.kernels()[0];
    assert_eq!((k.params[0].size, k.params[1].offset), (16, 16));
    let mut params = vec![0u8; 24];
    for (i, v) in [10u32, 20, 30, 40].iter().enumerate() {
        params[i * 4..][..4].copy_from_slice(&v.to_le_bytes());
    }
    params[16..24].copy_from_slice(&d.to_le_bytes());
    let l = Launch {
        block: [8, 1, 1],
        ..launch(0, &params)
    };
    ptxvm::launch(&m, &l, &mem).unwrap();
    let out: Vec<u32> = mem.download(d, 8);
    let want: Vec<u32> = (0..8).map(|t| 2 * [10, 20, 30, 40][t & 3] + 40).collect();
    assert_eq!(out, want);
}

#[test]
fn target_directive_gives_the_virtual_architecture() {
    assert_eq!(load(".visible .entry k() { ret; }").target_arch(), Some(90));
    let m = Module::load(
        ".version 7.0\n.target sm_80a\n.address_size 64\n.visible .entry k() { ret; }",
    )
    .unwrap();
    assert_eq!(m.target_arch(), Some(80));
}
