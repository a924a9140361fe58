//! Warp-level matrix instructions: `mma.sync.aligned` in every shape and type ptxvm runs, and
//! `movmatrix`, against CPU references. Each kernel loads its fragments the way CUDA code does,
//! with address arithmetic written from the PTX ISA's fragment tables (not from ptxvm's own
//! layout code), so a layout mistake on either side fails here. The same kernels run through
//! the sandbox, which passes the instructions through (they touch registers only).

use crate::harness::{Arg, DevMem, Rng, Shape};
use crate::sandbox::load_sandboxed;
use crate::text::{HEAD, go, load};

/// One `mma` form and where its kernel finds each lane's fragments: lane `l` (groupID
/// `g = l / 4`, thread in group `t = l % 4`) reads A and B at `g * ab.0 + t * ab.1` plus each
/// register's offset, and C/D at `g * cd.0 + t * cd.1` plus each chunk's offset.
struct Form {
    mma: &'static str,
    a_ty: Ty,
    b_ty: Ty,
    c_ty: Ty,
    d_ty: Ty,
    ab: (u32, u32),
    a: &'static [u32],
    b: &'static [u32],
    cd: (u32, u32),
    /// Offsets of C's (and D's) chunks, each `cw` registers wide.
    c: &'static [u32],
    cw: usize,
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum Ty {
    F16,
    Bf16,
    Tf32,
    F32,
    F64,
    S8,
    U8,
    S32,
}

impl Ty {
    fn bytes(self) -> usize {
        match self {
            Ty::S8 | Ty::U8 => 1,
            Ty::F16 | Ty::Bf16 => 2,
            Ty::Tf32 | Ty::F32 | Ty::S32 => 4,
            Ty::F64 => 8,
        }
    }
    /// The register width its fragments come in.
    fn reg(self) -> &'static str {
        if self == Ty::F64 { "b64" } else { "b32" }
    }
    /// `x` (exactly representable) in this type's bytes.
    fn encode(self, x: f64, out: &mut Vec<u8>) {
        match self {
            Ty::F16 => out.extend(half(x).to_le_bytes()),
            Ty::Bf16 => out.extend((((x as f32).to_bits() >> 16) as u16).to_le_bytes()),
            // Low mantissa bits that a tf32 multiply drops, to prove it drops them.
            Ty::Tf32 => out.extend(((x as f32).to_bits() | 0x0fff).to_le_bytes()),
            Ty::F32 => out.extend((x as f32).to_le_bytes()),
            Ty::F64 => out.extend(x.to_le_bytes()),
            Ty::S8 => out.push(x as i8 as u8),
            Ty::U8 => out.push(x as u8),
            Ty::S32 => out.extend((x as i64 as i32).to_le_bytes()),
        }
    }
    /// A random input value the type holds exactly, small enough that sums stay exact.
    fn sample(self, rng: &mut Rng) -> f64 {
        let r = rng.next_u32();
        match self {
            Ty::S8 => f64::from(r as u8 as i8),
            Ty::U8 => f64::from(r as u8),
            Ty::S32 => f64::from((r % 20001) as i32 - 10000),
            _ => f64::from((r % 9) as i32 - 4) * if r & 0x100 != 0 { 0.5 } else { 1.0 },
        }
    }
}

/// f16 bits of `x`, which must be exactly representable as a normal f16 or zero.
pub(crate) fn half(x: f64) -> u16 {
    if x == 0.0 {
        return 0;
    }
    let sign = if x < 0.0 { 0x8000 } else { 0 };
    let e = x.abs().log2().floor() as i32;
    let m = x.abs() / 2f64.powi(e) - 1.0;
    let frac = m * 1024.0;
    assert_eq!(frac.fract(), 0.0, "{x} is not an f16");
    sign | (((e + 15) as u16) << 10) | frac as u16
}

/// The kernel of `f`: load A, B and C fragments, `mma`, store D.
fn kernel(f: &Form) -> String {
    let list = |p: &str, n: usize| {
        (0..n)
            .map(|i| format!("%{p}{i}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut s = format!(
        ".visible .entry mma(.param .u64 pa, .param .u64 pb, .param .u64 pc, .param .u64 pd)\n{{\n\
         \t.reg .{ab} %a<4>;\n\t.reg .{ab} %b<4>;\n\t.reg .{cr} %c<4>;\n\t.reg .{dr} %d<4>;\n\
         \t.reg .b32 %r<12>;\n\t.reg .b64 %rd<12>;\n\
         \tld.param.u64 %rd1, [pa];\n\tld.param.u64 %rd2, [pb];\n\
         \tld.param.u64 %rd3, [pc];\n\tld.param.u64 %rd4, [pd];\n\
         \tmov.u32 %r1, %laneid;\n\tshr.u32 %r2, %r1, 2;\n\tand.b32 %r3, %r1, 3;\n\
         \tmul.lo.u32 %r4, %r2, {ag};\n\tmad.lo.u32 %r5, %r3, {at}, %r4;\n\tcvt.u64.u32 %rd5, %r5;\n\
         \tadd.s64 %rd6, %rd1, %rd5;\n\tadd.s64 %rd7, %rd2, %rd5;\n\
         \tmul.lo.u32 %r6, %r2, {cg};\n\tmad.lo.u32 %r7, %r3, {ct}, %r6;\n\tcvt.u64.u32 %rd8, %r7;\n\
         \tadd.s64 %rd9, %rd3, %rd8;\n\tadd.s64 %rd10, %rd4, %rd8;\n",
        ab = f.a_ty.reg(),
        cr = f.c_ty.reg(),
        dr = f.d_ty.reg(),
        ag = f.ab.0,
        at = f.ab.1,
        cg = f.cd.0,
        ct = f.cd.1,
    );
    for (i, off) in f.a.iter().enumerate() {
        s += &format!("\tld.global.{} %a{i}, [%rd6+{off}];\n", f.a_ty.reg());
    }
    for (i, off) in f.b.iter().enumerate() {
        s += &format!("\tld.global.{} %b{i}, [%rd7+{off}];\n", f.b_ty.reg());
    }
    let chunk = |p: &str, j: usize| {
        if f.cw == 1 {
            format!("%{p}{j}")
        } else {
            format!("{{%{p}{}, %{p}{}}}", 2 * j, 2 * j + 1)
        }
    };
    let v = if f.cw == 2 { ".v2" } else { "" };
    for (j, off) in f.c.iter().enumerate() {
        s += &format!(
            "\tld.global{v}.{} {}, [%rd9+{off}];\n",
            f.c_ty.reg(),
            chunk("c", j)
        );
    }
    let nc = f.c.len() * f.cw;
    s += &format!(
        "\tmma.sync.aligned.{} {{{}}}, {{{}}}, {{{}}}, {{{}}};\n",
        f.mma,
        list("d", nc),
        list("a", f.a.len()),
        list("b", f.b.len()),
        list("c", nc)
    );
    for (j, off) in f.c.iter().enumerate() {
        s += &format!(
            "\tst.global{v}.{} [%rd10+{off}], {};\n",
            f.d_ty.reg(),
            chunk("d", j)
        );
    }
    s + "\tret;\n}\n"
}

/// `(M, N, K)` of the form's shape modifier.
fn mnk(mma: &str) -> (usize, usize, usize) {
    let shape = mma.split('.').next().unwrap();
    let num = |a: char, b: char| {
        let s = &shape[shape.find(a).unwrap() + 1..];
        s[..s.find(b).unwrap_or(s.len())].parse::<usize>().unwrap()
    };
    (num('m', 'n'), num('n', 'k'), num('k', '.'))
}

/// Runs `f` on random inputs (plain and sandboxed) and checks D = A·B + C bit for bit.
fn check(f: &Form, seed: u64, c_override: Option<f64>) {
    let (m, n, k) = mnk(f.mma);
    assert_eq!(k * f.a_ty.bytes(), f.ab.0 as usize, "{}: A's rows", f.mma);
    let mut rng = Rng::new(seed);
    let a: Vec<f64> = (0..m * k).map(|_| f.a_ty.sample(&mut rng)).collect();
    // B held transposed (column-major, each column's K elements contiguous), as `.col` says.
    let bt: Vec<f64> = (0..n * k).map(|_| f.b_ty.sample(&mut rng)).collect();
    let c: Vec<f64> = (0..m * n)
        .map(|_| c_override.unwrap_or_else(|| f.c_ty.sample(&mut rng)))
        .collect();
    let mut want = Vec::new();
    for r in 0..m {
        for col in 0..n {
            let dot: f64 = (0..k).map(|x| a[r * k + x] * bt[col * k + x]).sum();
            let sum = c[r * n + col] + dot;
            let sum = if f.mma.contains("satfinite") {
                sum.clamp(f64::from(i32::MIN), f64::from(i32::MAX))
            } else {
                sum
            };
            f.d_ty.encode(sum, &mut want);
        }
    }
    let bytes = |ty: Ty, v: &[f64]| {
        let mut out = Vec::new();
        v.iter().for_each(|x| ty.encode(*x, &mut out));
        out
    };
    let (ab, bb, cb) = (bytes(f.a_ty, &a), bytes(f.b_ty, &bt), bytes(f.c_ty, &c));
    let text = format!("{HEAD}{}", kernel(f));
    let module = load(&kernel(f));
    let mut mem = DevMem::new();
    let (pa, pb, pc) = (mem.upload(&ab), mem.upload(&bb), mem.upload(&cb));
    let pd = mem.alloc(want.len());
    let args = [Arg::Ptr(pa), Arg::Ptr(pb), Arg::Ptr(pc), Arg::Ptr(pd)];
    go(&module, &Shape::linear(1, 32), &args, &[], &mem).unwrap_or_else(|e| panic!("{e}"));
    let got: Vec<u8> = mem.download(pd, want.len());
    assert_eq!(got, want, "{}: D differs from A·B + C", f.mma);

    let (s, sbx) = load_sandboxed(&text);
    assert!(
        s.ptx.contains(&format!("mma.sync.aligned.{}", f.mma)),
        "{}",
        s.ptx
    );
    let mut out = 0;
    let g = crate::redteam::attack_in(
        &sbx,
        "mma",
        crate::sandbox::Shape::linear(1, 32),
        |g| {
            let mut put = |data: &[u8]| {
                let p = g.alloc(data.len());
                g.write(p, data);
                p
            };
            let (pa, pb, pc) = (put(&ab), put(&bb), put(&cb));
            out = g.alloc(want.len());
            [pa, pb, pc, out].map(Arg::U64).to_vec()
        },
        false,
    );
    assert_eq!(g.read(out, want.len()), want, "{} sandboxed", f.mma);
}

/// Forms whose A and B rows are 32 bytes: A's four registers at rows g, g + 8 and columns
/// 0 and 16 bytes on; B's two at 0 and 16 bytes; C/D f32 or s32 pairs at rows g, g + 8.
const fn wide(mma: &'static str, a_ty: Ty, b_ty: Ty, acc: Ty) -> Form {
    Form {
        mma,
        a_ty,
        b_ty,
        c_ty: acc,
        d_ty: acc,
        ab: (32, 4),
        a: &[0, 256, 16, 272],
        b: &[0, 16],
        cd: (32, 8),
        c: &[0, 256],
        cw: 2,
    }
}

/// Forms whose A and B rows are 16 bytes: A's two registers at rows g and g + 8, B's one.
const fn narrow(mma: &'static str, a_ty: Ty, b_ty: Ty, acc: Ty) -> Form {
    Form {
        ab: (16, 4),
        a: &[0, 128],
        b: &[0],
        ..wide(mma, a_ty, b_ty, acc)
    }
}

#[test]
fn mma_of_every_run_shape_and_type_computes_a_times_b_plus_c() {
    let forms = [
        wide(
            "m16n8k16.row.col.f32.f16.f16.f32",
            Ty::F16,
            Ty::F16,
            Ty::F32,
        ),
        wide(
            "m16n8k16.row.col.f32.bf16.bf16.f32",
            Ty::Bf16,
            Ty::Bf16,
            Ty::F32,
        ),
        wide(
            "m16n8k8.row.col.f32.tf32.tf32.f32",
            Ty::Tf32,
            Ty::Tf32,
            Ty::F32,
        ),
        wide("m16n8k32.row.col.s32.s8.s8.s32", Ty::S8, Ty::S8, Ty::S32),
        wide("m16n8k32.row.col.s32.u8.s8.s32", Ty::U8, Ty::S8, Ty::S32),
        narrow("m16n8k8.row.col.f32.f16.f16.f32", Ty::F16, Ty::F16, Ty::F32),
        narrow(
            "m16n8k8.row.col.f32.bf16.bf16.f32",
            Ty::Bf16,
            Ty::Bf16,
            Ty::F32,
        ),
        narrow(
            "m16n8k4.row.col.f32.tf32.tf32.f32",
            Ty::Tf32,
            Ty::Tf32,
            Ty::F32,
        ),
        narrow("m16n8k16.row.col.s32.s8.u8.s32", Ty::S8, Ty::U8, Ty::S32),
        Form {
            a: &[0],
            c: &[0],
            ..narrow("m8n8k16.row.col.s32.s8.s8.s32", Ty::S8, Ty::S8, Ty::S32)
        },
        // f16 accumulators: C/D rows of 8 halves, one f16x2 register at rows g and g + 8.
        Form {
            c_ty: Ty::F16,
            d_ty: Ty::F16,
            cd: (16, 4),
            c: &[0, 128],
            cw: 1,
            ..wide(
                "m16n8k16.row.col.f16.f16.f16.f16",
                Ty::F16,
                Ty::F16,
                Ty::F16,
            )
        },
        // f64: A 8×4 and B 4×8 of one register each, C/D one pair per lane.
        Form {
            ab: (32, 8),
            a: &[0],
            b: &[0],
            cd: (64, 16),
            c: &[0],
            ..wide("m8n8k4.row.col.f64.f64.f64.f64", Ty::F64, Ty::F64, Ty::F64)
        },
    ];
    for (seed, f) in forms.iter().enumerate() {
        check(f, 0x3a7 + seed as u64, None);
    }
}

#[test]
fn mma_integer_sums_wrap_and_satfinite_clamps_them() {
    let big = f64::from(i32::MAX - 5);
    let f = wide(
        "m16n8k32.row.col.satfinite.s32.u8.u8.s32",
        Ty::U8,
        Ty::U8,
        Ty::S32,
    );
    check(&f, 7, Some(big));
    // Without .satfinite the same sums wrap: the reference's encode truncates to 32 bits.
    let f = wide("m16n8k32.row.col.s32.u8.u8.s32", Ty::U8, Ty::U8, Ty::S32);
    check(&f, 7, Some(big));
}

#[test]
fn movmatrix_transposes_the_warps_eight_by_eight_halves() {
    let m = load(
        r#"
.visible .entry k(.param .u64 out)
{
	.reg .b32 %r<8>;
	.reg .b64 %rd<4>;
	ld.param.u64 %rd1, [out];
	mov.u32 %r1, %laneid;
	// Lane l holds row l / 4, columns 2(l % 4) and 2(l % 4) + 1: element (r, c) = 8r + c.
	shl.b32 %r2, %r1, 1;
	add.s32 %r3, %r2, 1;
	shl.b32 %r4, %r3, 16;
	or.b32 %r5, %r4, %r2;
	movmatrix.sync.aligned.m8n8.trans.b16 %r6, %r5;
	mul.wide.u32 %rd2, %r1, 4;
	add.s64 %rd3, %rd1, %rd2;
	st.global.u32 [%rd3], %r6;
	ret;
}
"#,
    );
    let mut mem = DevMem::new();
    let d = mem.alloc(128);
    go(&m, &Shape::linear(1, 32), &[Arg::Ptr(d)], &[], &mem).unwrap();
    let o: Vec<u32> = mem.download(d, 32);
    for (l, word) in o.iter().enumerate() {
        let (r, c) = (l / 4, (l % 4) * 2);
        // After the transpose, lane l's (r, c) holds the element that was at (c, r).
        let want = (8 * c + r) as u32 | (((8 * (c + 1) + r) as u32) << 16);
        assert_eq!(*word, want, "lane {l}");
    }
}

#[test]
fn mma_forms_ptxvm_does_not_run_are_unsupported_errors_naming_the_line() {
    let cases = [
        // Volta's f16 m8n8k4 (quad-pair layout).
        "mma.sync.aligned.m8n8k4.row.col.f32.f16.f16.f32 {%f0,%f1,%f2,%f3,%f4,%f5,%f6,%f7}, {%r0,%r1}, {%r2,%r3}, {%f0,%f1,%f2,%f3,%f4,%f5,%f6,%f7};",
        // A column-major A.
        "mma.sync.aligned.m16n8k16.col.col.f32.f16.f16.f32 {%f0,%f1,%f2,%f3}, {%r0,%r1,%r2,%r3}, {%r4,%r5}, {%f0,%f1,%f2,%f3};",
        // bf16 into an f16 accumulator is no form.
        "mma.sync.aligned.m16n8k16.row.col.f16.bf16.bf16.f16 {%r0,%r1}, {%r0,%r1,%r2,%r3}, {%r4,%r5}, {%r0,%r1};",
        // Sparse mma.
        "mma.sp.sync.aligned.m16n8k32.row.col.f32.f16.f16.f32 {%f0,%f1,%f2,%f3}, {%r0,%r1,%r2,%r3}, {%r4,%r5,%r6,%r7}, {%f0,%f1,%f2,%f3}, %r8, 0x0;",
    ];
    for (n, inst) in cases.iter().enumerate() {
        let text = format!(
            "{HEAD}.visible .entry k()\n{{\n\t.reg .b32 %r<9>;\n\t.reg .f32 %f<8>;\n\t{inst}\n\tret;\n}}\n"
        );
        match ptxvm::Module::load(&text) {
            Err(ptxvm::Error::Unsupported { line, .. }) => assert_eq!(line, 8, "case {n}"),
            other => panic!("case {n}: {other:?}"),
        }
    }
}

#[test]
fn mma_with_the_wrong_register_count_is_an_invalid_error() {
    let text = format!(
        "{HEAD}.visible .entry k()\n{{\n\t.reg .b32 %r<9>;\n\t.reg .f32 %f<8>;\n\t\
         mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {{%f0,%f1,%f2,%f3}}, {{%r0,%r1,%r2}}, \
         {{%r4,%r5}}, {{%f0,%f1,%f2,%f3}};\n\tret;\n}}\n"
    );
    let e = ptxvm::Module::load(&text).unwrap_err();
    assert!(e.to_string().contains("takes 4 registers, found 3"), "{e}");
}

/// A kernel with four 8×8 b16 matrices in shared memory, element (j, r, c) = 64j + 8r + c, read by `ldmatrix`
/// into out[0..128) (lane-major, four registers a lane), then written back by `stmatrix` with
/// the same `.trans` into a second area and copied to out[128..256).
fn ld_st_text(trans: &str, generic: bool) -> String {
    let (space, a, b) = if generic {
        ("", "%rd4", "%rd5")
    } else {
        (".shared", "%r5", "%r6")
    };
    format!(
        r#"
.visible .entry k(.param .u64 out)
{{
	.reg .pred %p<2>;
	.reg .b32 %r<16>;
	.reg .b64 %rd<8>;
	.shared .align 16 .b8 src[512];
	.shared .align 16 .b8 dst[512];
	ld.param.u64 %rd1, [out];
	mov.u32 %r1, %laneid;
	// Lane l fills elements 8l .. 8l + 7 of src with their indices.
	shl.b32 %r2, %r1, 3;
	mov.u32 %r3, src;
	shl.b32 %r4, %r1, 4;
	add.s32 %r5, %r3, %r4;
	mov.u32 %r7, 0;
FILL:
	add.s32 %r8, %r2, %r7;
	mul.lo.s32 %r9, %r7, 2;
	add.s32 %r10, %r5, %r9;
	st.shared.u16 [%r10], %r8;
	add.s32 %r7, %r7, 1;
	setp.lt.u32 %p1, %r7, 8;
	@%p1 bra FILL;
	bar.sync 0;
	mov.u32 %r11, dst;
	add.s32 %r6, %r11, %r4;
	cvta.shared.u64 %rd4, src;
	cvt.u64.u32 %rd6, %r4;
	add.s64 %rd4, %rd4, %rd6;
	cvta.shared.u64 %rd5, dst;
	add.s64 %rd5, %rd5, %rd6;
	ldmatrix.sync.aligned.m8n8.x4{trans}{space}.b16 {{%r12, %r13, %r14, %r15}}, [{a}];
	stmatrix.sync.aligned.m8n8.x4{trans}{space}.b16 [{b}], {{%r12, %r13, %r14, %r15}};
	mul.wide.u32 %rd2, %r1, 16;
	add.s64 %rd3, %rd1, %rd2;
	st.global.v4.u32 [%rd3], {{%r12, %r13, %r14, %r15}};
	bar.sync 0;
	ld.shared.v4.u32 {{%r12, %r13, %r14, %r15}}, [%r6];
	st.global.v4.u32 [%rd3+512], {{%r12, %r13, %r14, %r15}};
	ret;
}}
"#
    )
}

/// [`ld_st_text`] run on ptxvm: the registers `ldmatrix` gave and the area `stmatrix` wrote.
fn ld_st_matrix(trans: &str, generic: bool) -> (Vec<u32>, Vec<u16>) {
    let m = load(&ld_st_text(trans, generic));
    let mut mem = DevMem::new();
    let d = mem.alloc(1024);
    go(&m, &Shape::linear(1, 32), &[Arg::Ptr(d)], &[], &mem).unwrap();
    let regs: Vec<u32> = mem.download(d, 128);
    let all: Vec<u16> = mem.download(d, 512);
    (regs, all[256..].to_vec())
}

#[test]
fn ldmatrix_gives_each_lane_its_fragment_and_stmatrix_puts_it_back() {
    for trans in ["", ".trans"] {
        for generic in [false, true] {
            let (regs, back) = ld_st_matrix(trans, generic);
            let el = |j: usize, r: usize, c: usize| (64 * j + 8 * r + c) as u32;
            for l in 0..32 {
                for j in 0..4 {
                    // Row l / 4, columns 2(l % 4) and +1; with .trans, column l / 4.
                    let (r, c) = (l / 4, 2 * (l % 4));
                    let want = if trans.is_empty() {
                        el(j, r, c) | (el(j, r, c + 1) << 16)
                    } else {
                        el(j, c, r) | (el(j, c + 1, r) << 16)
                    };
                    assert_eq!(regs[4 * l + j], want, "{trans} lane {l} matrix {j}");
                }
            }
            let want: Vec<u16> = (0..256).collect();
            assert_eq!(back, want, "stmatrix{trans} undoes ldmatrix{trans}");
        }
    }
}

#[test]
fn sandboxed_ldmatrix_and_stmatrix_move_the_same_rows_and_report_nothing() {
    for trans in ["", ".trans"] {
        for generic in [false, true] {
            let (regs, back) = ld_st_matrix(trans, generic);
            let (s, sbx) = load_sandboxed(&format!("{HEAD}{}", ld_st_text(trans, generic)));
            assert!(
                s.ptx
                    .contains(&format!("ldmatrix.sync.aligned.m8n8.x4{trans}.shared.b16"))
            );
            let mut out = 0;
            let g = crate::redteam::attack_in(
                &sbx,
                "k",
                crate::sandbox::Shape::linear(1, 32),
                |g| {
                    out = g.alloc(1024);
                    vec![Arg::U64(out)]
                },
                false,
            );
            let bytes = g.read(out, 1024);
            let words: Vec<u32> = bytes[..512]
                .chunks(4)
                .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
                .collect();
            let halves: Vec<u16> = bytes[512..]
                .chunks(2)
                .map(|c| u16::from_le_bytes(c.try_into().unwrap()))
                .collect();
            assert_eq!(words, regs, "{trans} generic {generic}: ldmatrix sandboxed");
            assert_eq!(
                halves, back,
                "{trans} generic {generic}: stmatrix sandboxed"
            );
        }
    }
}

/// Hostile rows: `ldmatrix` through generic addresses aimed at another tenant's memory, and
/// `stmatrix` at a shared offset far past the window. Both are redirected into the kernel's
/// own shared variable and reported; the victim is never read (`attack_in` checks). An `.x1`
/// whose lanes past 8 hold such addresses reads only lanes 0-7's rows: nothing to report.
const WILD_ROWS: &str = r#"
.visible .entry wild(.param .u64 victim, .param .u64 out)
{
	.reg .b32 %r<8>;
	.reg .b64 %rd<8>;
	.shared .align 16 .b8 tile[256];
	ld.param.u64 %rd1, [victim];
	ld.param.u64 %rd2, [out];
	mov.u32 %r1, %laneid;
	mul.wide.u32 %rd3, %r1, 16;
	add.s64 %rd4, %rd1, %rd3;
	ldmatrix.sync.aligned.m8n8.x4.b16 {%r2, %r3, %r4, %r5}, [%rd4];
	mov.u32 %r6, 0x7ffffff0;
	stmatrix.sync.aligned.m8n8.x2.shared.b16 [%r6], {%r2, %r3};
	mul.wide.u32 %rd5, %r1, 16;
	add.s64 %rd6, %rd2, %rd5;
	st.global.v4.u32 [%rd6], {%r2, %r3, %r4, %r5};
	ret;
}

.visible .entry first_eight(.param .u64 victim, .param .u64 out)
{
	.reg .b32 %r<8>;
	.reg .b64 %rd<8>;
	.reg .pred %p<2>;
	.shared .align 16 .b8 tile[256];
	ld.param.u64 %rd1, [victim];
	ld.param.u64 %rd2, [out];
	mov.u32 %r1, %laneid;
	// Lanes 0-7 name row l of tile; the rest name the victim.
	mov.u32 %r2, tile;
	shl.b32 %r3, %r1, 4;
	add.s32 %r4, %r2, %r3;
	cvt.u64.u32 %rd3, %r4;
	setp.lt.u32 %p1, %r1, 8;
	selp.b64 %rd4, %rd3, %rd1, %p1;
	ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%r5}, [%rd4];
	mul.wide.u32 %rd5, %r1, 4;
	add.s64 %rd6, %rd2, %rd5;
	st.global.u32 [%rd6], %r5;
	ret;
}
"#;

#[test]
fn hostile_matrix_rows_are_redirected_into_the_kernels_own_shared_memory_and_reported() {
    let (_, sbx) = load_sandboxed(&format!("{HEAD}{WILD_ROWS}"));
    for (kernel, fenced) in [("wild", true), ("first_eight", false)] {
        crate::redteam::attack_in(
            &sbx,
            kernel,
            crate::sandbox::Shape::linear(1, 32),
            |g| {
                let out = g.alloc(512);
                vec![Arg::U64(g.victim()), Arg::U64(out)]
            },
            fenced,
        );
    }
}

#[test]
fn matrix_accesses_the_sandbox_cannot_redirect_are_refused_with_the_reason() {
    let cases = [
        (
            ".visible .func f(.param .u64 a)\n{\n\t.reg .b32 %r<2>;\n\t.reg .b64 %rd<2>;\n\t\
             ld.param.u64 %rd1, [a];\n\tldmatrix.sync.aligned.m8n8.x1.b16 {%r1}, [%rd1];\n\tret;\n}\n",
            "not available in a .func",
            9,
        ),
        (
            ".visible .entry k(.param .u64 a)\n{\n\t.reg .b32 %r<2>;\n\t.reg .b64 %rd<2>;\n\t\
             ld.param.u64 %rd1, [a];\n\tldmatrix.sync.aligned.m8n8.x1.b16 {%r1}, [%rd1];\n\tret;\n}\n",
            "static .shared variable of at least 16 bytes",
            9,
        ),
        (
            ".visible .entry k()\n{\n\t.reg .b32 %r<2>;\n\t.shared .align 16 .b8 t[64];\n\t\
             ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%r1}, [4096];\n\tret;\n}\n",
            "absolute address",
            8,
        ),
    ];
    for (body, why, at) in cases {
        match ptxvm::sandbox::sandbox(&format!("{HEAD}{body}"), &Default::default()) {
            Err(ptxvm::Error::Refused { line, what }) => {
                assert_eq!(line, at, "{what}");
                assert!(what.contains(why), "{what}");
            }
            other => panic!("{why}: {other:?}"),
        }
    }
}
