//! `wmma` beyond f16, on ptxvm and under the sandbox: bf16 into f32 in the three k16 shapes,
//! s8 and u8 into s32 (wrapping, and clamped with `.satfinite`), tf32 in `m16n16k8` and f64 in
//! `m8n8k4`, each a GEMM through strided matrices against a CPU reference; rewritten, each
//! gives the same product, and a hostile pointer or stride is redirected and reported at the
//! alignment of that type's fragment.

use crate::harness::{Arg, DevMem, Rng, Shape};
use crate::redteam::attack_in;
use crate::sandbox::load_sandboxed;
use crate::text::{HEAD, go, load};

/// One GEMM case: the shape, A's and B's type, C's and D's type, and the registers of the A,
/// B and C fragments (the ISA's counts).
struct Case {
    shape: &'static str,
    mnk: (usize, usize, usize),
    ab: &'static str,
    cd: &'static str,
    regs: (usize, usize, usize),
}

/// `Case`s from `(shape, (m, n, k), A/B type, C/D type, registers of A, B, C)`.
const fn case(
    (shape, mnk, ab, cd, regs): (&'static str, Mnk, &'static str, &'static str, Mnk),
) -> Case {
    Case {
        shape,
        mnk,
        ab,
        cd,
        regs,
    }
}

type Mnk = (usize, usize, usize);

#[rustfmt::skip]
const CASES: [Case; 8] = [
    case(("m16n16k16", (16, 16, 16), "bf16", "f32", (4, 4, 8))),
    case(("m32n8k16", (32, 8, 16), "bf16", "f32", (8, 2, 8))),
    case(("m8n32k16", (8, 32, 16), "bf16", "f32", (2, 8, 8))),
    case(("m16n16k16", (16, 16, 16), "s8", "s32", (2, 2, 8))),
    case(("m32n8k16", (32, 8, 16), "u8", "s32", (4, 1, 8))),
    case(("m8n32k16", (8, 32, 16), "s8", "s32", (1, 4, 8))),
    case(("m16n16k8", (16, 16, 8), "tf32", "f32", (4, 4, 8))),
    case(("m8n8k4", (8, 8, 4), "f64", "f64", (1, 1, 2))),
];

/// Bytes of one element of a type.
fn size(ty: &str) -> usize {
    match ty {
        "s8" | "u8" => 1,
        "bf16" => 2,
        "f64" => 8,
        _ => 4,
    }
}

/// An element's bytes (values are small integers, exact in every type).
fn bytes(ty: &str, v: f64) -> Vec<u8> {
    match ty {
        "s8" => vec![v as i8 as u8],
        "u8" => vec![v as u8],
        "bf16" => ((v as f32).to_bits() >> 16).to_le_bytes()[..2].to_vec(),
        "f64" => v.to_le_bytes().to_vec(),
        "s32" => (v as i64 as i32).to_le_bytes().to_vec(),
        _ => (v as f32).to_le_bytes().to_vec(),
    }
}

/// The case's kernel: A row-major, B column-major, C and D row-major, each with its leading
/// dimension from a parameter; `sat` adds `.satfinite` to the multiply.
fn text(c: &Case, sat: bool) -> String {
    let reg = if c.ab == "f64" { "b64" } else { "b32" };
    let list = |p: &str, n: usize| {
        (0..n)
            .map(|i| format!("%{p}{i}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let (na, nb, nc) = c.regs;
    let (a, b, cc, d) = (list("a", na), list("b", nb), list("c", nc), list("d", nc));
    let (shape, ab, cd) = (c.shape, c.ab, c.cd);
    let sat = if sat { ".satfinite" } else { "" };
    format!(
        r#"{HEAD}
.visible .entry wt(.param .u64 pa, .param .u64 pb, .param .u64 pc, .param .u64 pd,
    .param .u32 lda, .param .u32 ldb, .param .u32 ldc)
{{
	.reg .{reg} %a<8>;
	.reg .{reg} %b<8>;
	.reg .{reg} %c<8>;
	.reg .{reg} %d<8>;
	.reg .b32 %r<4>;
	.reg .b64 %rd<5>;
	ld.param.u64 %rd1, [pa];
	ld.param.u64 %rd2, [pb];
	ld.param.u64 %rd3, [pc];
	ld.param.u64 %rd4, [pd];
	ld.param.u32 %r1, [lda];
	ld.param.u32 %r2, [ldb];
	ld.param.u32 %r3, [ldc];
	wmma.load.a.sync.aligned.row.{shape}.global.{ab} {{{a}}}, [%rd1], %r1;
	wmma.load.b.sync.aligned.col.{shape}.global.{ab} {{{b}}}, [%rd2], %r2;
	wmma.load.c.sync.aligned.row.{shape}.global.{cd} {{{cc}}}, [%rd3], %r3;
	wmma.mma.sync.aligned.row.col.{shape}.{cd}.{ab}.{ab}.{cd}{sat} {{{d}}}, {{{a}}}, {{{b}}}, {{{cc}}};
	wmma.store.d.sync.aligned.row.{shape}.global.{cd} [%rd4], {{{d}}}, %r3;
	ret;
}}
"#
    )
}

/// Leading dimensions past each matrix's own, each row 32-byte aligned (the largest fragment).
fn leads(c: &Case) -> (usize, usize, usize) {
    let (_, n, k) = c.mnk;
    let pad = |own: usize, ty: &str| (own + 1).next_multiple_of(32 / size(ty));
    (pad(k, c.ab), pad(k, c.ab), pad(n, c.cd))
}

/// A, B and C as bytes and D = A·B + C (`c0`: C's values, else small random ones), computed
/// in i64 or f64, wrapped or clamped to s32 for integers.
fn inputs(c: &Case, seed: u64, c0: Option<f64>, sat: bool) -> [Vec<u8>; 4] {
    let (m, n, k) = c.mnk;
    let (lda, ldb, ldc) = leads(c);
    let mut rng = Rng::new(seed);
    let mut v = |lo: i32, span: u32| f64::from(lo + (rng.next_u32() % span) as i32);
    let (lo, span) = match c.ab {
        "u8" => (0, 200),
        "s8" => (-100, 200),
        _ => (-4, 9),
    };
    let a: Vec<f64> = (0..m * lda).map(|_| v(lo, span)).collect();
    let b: Vec<f64> = (0..n * ldb).map(|_| v(lo, span)).collect();
    let cm: Vec<f64> = (0..m * ldc)
        .map(|_| c0.unwrap_or_else(|| v(-4, 9)))
        .collect();
    let mut d = cm.clone();
    for r in 0..m {
        for col in 0..n {
            let dot: f64 = (0..k).map(|x| a[r * lda + x] * b[col * ldb + x]).sum();
            let sum = cm[r * ldc + col] + dot;
            d[r * ldc + col] = match (c.cd, sat) {
                ("s32", true) => sum.clamp(f64::from(i32::MIN), f64::from(i32::MAX)),
                ("s32", false) => f64::from(sum as i64 as i32),
                _ => sum,
            };
        }
    }
    let enc = |x: &[f64], ty: &str| x.iter().flat_map(|v| bytes(ty, *v)).collect::<Vec<u8>>();
    [enc(&a, c.ab), enc(&b, c.ab), enc(&cm, c.cd), enc(&d, c.cd)]
}

/// Runs the case's kernel on ptxvm; gives D's bytes.
fn run(c: &Case, sat: bool, [a, b, cm, _]: &[Vec<u8>; 4]) -> Vec<u8> {
    let (lda, ldb, ldc) = leads(c);
    let module = load(&text(c, sat));
    let mut mem = DevMem::new();
    let (pa, pb, pc, pd) = (mem.upload(a), mem.upload(b), mem.upload(cm), mem.upload(cm));
    let args = [
        Arg::Ptr(pa),
        Arg::Ptr(pb),
        Arg::Ptr(pc),
        Arg::Ptr(pd),
        Arg::U32(lda as u32),
        Arg::U32(ldb as u32),
        Arg::U32(ldc as u32),
    ];
    go(&module, &Shape::linear(1, 32), &args, &[], &mem).unwrap_or_else(|e| panic!("{e}"));
    mem.download(pd, cm.len())
}

#[test]
fn wmma_in_bf16_integers_tf32_and_f64_multiplies_strided_matrices_exactly() {
    for (i, c) in CASES.iter().enumerate() {
        let io = inputs(c, 0x77 + i as u64, None, false);
        assert_eq!(run(c, false, &io), io[3], "{} {}", c.shape, c.ab);
    }
}

#[test]
fn integer_wmma_wraps_past_s32_and_clamps_with_satfinite() {
    let c = &CASES[3];
    for sat in [false, true] {
        // Products of up to 100·100, sixteen of them, on top of C near s32's top.
        let io = inputs(c, 5, Some(f64::from(i32::MAX - 1000)), sat);
        assert_eq!(run(c, sat, &io), io[3], "satfinite {sat}");
    }
}

/// The case rewritten: A at `a_at(arena memory, A's own allocation)` with leading dimension
/// `lda`; checks D when nothing is fenced, and the report when something is.
fn sandboxed(
    c: &Case,
    a_at: impl Fn(&crate::sandbox::GuestMem, u64) -> u64,
    lda: u32,
    fenced: bool,
) {
    sandboxed_text(c, &text(c, false), a_at, lda, fenced);
}

/// [`sandboxed`] for the module `text` (a form of the case's kernel).
fn sandboxed_text(
    c: &Case,
    text: &str,
    a_at: impl Fn(&crate::sandbox::GuestMem, u64) -> u64,
    lda: u32,
    fenced: bool,
) {
    let (s, sbx) = load_sandboxed(text);
    assert!(
        s.ptx
            .contains(&format!("wmma.load.a.sync.aligned.row.{}", c.shape))
    );
    let io = inputs(c, 9, None, false);
    let (_, ldb, ldc) = leads(c);
    let mut out = 0;
    let mem = attack_in(
        &sbx,
        "wt",
        crate::sandbox::Shape::linear(1, 32),
        |g| {
            let mut put = |bytes: &[u8]| {
                let p = g.alloc(bytes.len().next_multiple_of(256));
                g.write(p, bytes);
                p
            };
            let (pa, pb, pc) = (put(&io[0]), put(&io[1]), put(&io[2]));
            out = put(&io[2]);
            [a_at(g, pa), pb, pc, out]
                .map(Arg::U64)
                .into_iter()
                .chain([Arg::U32(lda), Arg::U32(ldb as u32), Arg::U32(ldc as u32)])
                .collect()
        },
        fenced,
    );
    if !fenced {
        assert_eq!(mem.read(out, io[3].len()), io[3], "{} {}", c.shape, c.ab);
    }
}

#[test]
fn sandboxed_wmma_of_every_type_gives_the_product_and_redirects_hostile_tiles() {
    for c in &CASES {
        let lda = leads(c).0 as u32;
        // Legal: the product, nothing reported.
        sandboxed(c, |_, a| a, lda, false);
        // Another tenant's memory, a tile past the arena's end, a stride that reaches past it:
        // redirected to the arena's base with a dense stride, and reported.
        sandboxed(c, |g, _| g.victim(), lda, true);
        sandboxed(
            c,
            |g, _| g.base() + crate::sandbox::ARENA as u64 - 64,
            lda,
            true,
        );
        sandboxed(c, |_, a| a, 0x4000_0000, true);
    }
}

#[test]
fn wmma_types_a_shape_does_not_take_are_unsupported_and_refused() {
    for (line, why) in [
        (
            "wmma.load.a.sync.aligned.row.m16n16k8.global.f16 {%a0, %a1, %a2, %a3}, [%rd1];",
            "type",
        ),
        (
            "wmma.load.a.sync.aligned.row.m16n16k16.global.tf32 {%a0, %a1, %a2, %a3}, [%rd1];",
            "type",
        ),
        (
            "wmma.mma.sync.aligned.row.col.m16n16k16.f32.s8.s8.f32 {%d0, %d1, %d2, %d3, %d4, \
             %d5, %d6, %d7}, {%a0, %a1}, {%b0, %b1}, {%c0, %c1, %c2, %c3, %c4, %c5, %c6, %c7};",
            "types",
        ),
        (
            "wmma.mma.sync.aligned.row.col.m8n8k4.rz.f64.f64.f64.f64 {%d0, %d1}, {%a0}, {%b0}, \
             {%c0, %c1};",
            ".rz",
        ),
    ] {
        let ptx = format!(
            "{HEAD}.visible .entry k(.param .u64 p) {{ .reg .b32 %a<4>; .reg .b32 %b<2>; \
             .reg .b32 %c<8>; .reg .b32 %d<8>; .reg .b64 %rd<2>; ld.param.u64 %rd1, [p];\n{line}\n\
             ret; }}"
        );
        let e = ptxvm::Module::load(&ptx).expect_err(line).to_string();
        assert!(e.contains(why) && e.contains("line"), "{line}: {e}");
        // The sandbox refuses what it cannot size a fence for, naming the line.
        if line.contains("load") {
            let e = ptxvm::sandbox::sandbox(&ptx, &ptxvm::sandbox::Policy::default())
                .expect_err(line)
                .to_string();
            assert!(
                e.contains("fragment type") && e.contains("line"),
                "{line}: {e}"
            );
        }
    }
}

/// An element of `ty` from its bytes, as the multiply reads it (tf32 without its low 13 bits).
fn value(ty: &str, b: &[u8]) -> f64 {
    let word = |n: usize| {
        let mut w = [0u8; 8];
        w[..n].copy_from_slice(&b[..n]);
        u64::from_le_bytes(w)
    };
    match ty {
        "s8" => f64::from(b[0] as i8),
        "u8" => f64::from(b[0]),
        "bf16" => f64::from(f32::from_bits((word(2) as u32) << 16)),
        "tf32" => f64::from(f32::from_bits(word(4) as u32 & 0xffff_e000)),
        "f64" => f64::from_bits(word(8)),
        "s32" => f64::from(word(4) as u32 as i32),
        _ => f64::from(f32::from_bits(word(4) as u32)),
    }
}

#[test]
fn random_wmma_pointers_and_strides_of_every_fragment_size_stay_in_the_arena() {
    let arena = crate::sandbox::ARENA as u64;
    let mut rng = Rng::new(0x3f_0036);
    // The smallest fragments (u8/s8 A of m8n32k16: 4 bytes), tf32's 16 and f64's 8.
    for c in [&CASES[5], &CASES[4], &CASES[6], &CASES[7]] {
        let (_, sbx) = load_sandboxed(&text(c, false));
        let (m, n, k) = c.mnk;
        let (m, k) = (m as u64, k as u64);
        let es = size(c.ab) as u64;
        let frag = c.regs.0 as u64 * if c.ab == "f64" { 8 } else { 4 };
        let step = frag / es;
        let (_, ldb, ldc) = leads(c);
        let mut seen = [0usize; 2];
        for round in 0..40 {
            let mut g = crate::sandbox::GuestMem::new();
            let base = g.base();
            // A's candidates fill the arena's first 64 KiB (so the base, where a fenced tile goes).
            let abuf = g.alloc(65536);
            let (lo, span) = if c.ab == "u8" { (0, 200) } else { (-4, 9) };
            let abytes: Vec<u8> = (0..65536 / es)
                .flat_map(|_| bytes(c.ab, f64::from(lo + (rng.next_u32() % span) as i32)))
                .collect();
            g.write(abuf, &abytes);
            let [_, b, cm, _] = inputs(c, round, None, false);
            let (pb, pc) = (g.alloc(b.len()), g.alloc(cm.len()));
            g.write(pb, &b);
            g.write(pc, &cm);
            let out = g.alloc(cm.len());
            g.write(out, &cm);
            let r = rng.next_u32();
            let stride = step * (1 + u64::from(r >> 4) % 64);
            let fit = |s: u64| 65536 - ((m - 1) * s + k) * es;
            let (p, lda) = match r % 6 {
                0 | 1 => (
                    abuf + u64::from(rng.next_u32()) % (fit(stride) / frag) * frag,
                    stride,
                ),
                2 => (
                    abuf + u64::from(rng.next_u32()) % fit(stride) + 1,
                    stride + 1 + u64::from(r >> 20) % 15,
                ),
                3 => (g.victim() + 64, stride),
                4 => (base + arena - 64, stride),
                _ => {
                    [(abuf, 0x1000_0000), (u64::MAX - 100, step), (0, step)][(r >> 8) as usize % 3]
                }
            };
            // The fence's arithmetic: aligned to the fragment, then in the arena with its span,
            // or else the base with the dense stride.
            let (pa, sa) = (p & !(frag - 1), lda & 0xffff_ffff & !(step - 1));
            let reach = ((m - 1) * sa + k) * es;
            let fenced = reach > arena || pa.wrapping_sub(base) > arena - reach;
            let (pe, se) = if fenced {
                (base, k.div_ceil(step) * step)
            } else {
                (pa, sa)
            };
            seen[usize::from(fenced)] += 1;
            let a = |row: u64, x: u64| value(c.ab, &g.read(pe + (row * se + x) * es, es as usize));
            let cs = size(c.cd);
            let mut want = cm.clone();
            for row in 0..m {
                for col in 0..n {
                    let dot: f64 = (0..k)
                        .map(|x| {
                            let at = (col * ldb + x as usize) * es as usize;
                            a(row, x) * value(c.ab, &b[at..])
                        })
                        .sum();
                    let i = row as usize * ldc + col;
                    let sum = value(c.cd, &cm[i * cs..]) + dot;
                    let d = if c.cd == "s32" {
                        f64::from(sum as i64 as i32)
                    } else {
                        sum
                    };
                    want[i * cs..][..cs].copy_from_slice(&bytes(c.cd, d));
                }
            }
            g.ctl_word(0)
                .store(crate::redteam::EPOCH, std::sync::atomic::Ordering::SeqCst);
            let hidden = crate::sandbox::Hidden {
                globals: 0,
                epoch: crate::redteam::EPOCH,
            };
            let args = [p, pb, pc, out]
                .map(Arg::U64)
                .into_iter()
                .chain([
                    Arg::U32(lda as u32),
                    Arg::U32(ldb as u32),
                    Arg::U32(ldc as u32),
                ])
                .collect::<Vec<_>>();
            let shape = crate::sandbox::Shape::linear(1, 32);
            crate::sandbox::run_sandboxed(&sbx, "wt", shape, &args, &hidden, &g)
                .unwrap_or_else(|e| panic!("{} round {round} (p {p:#x}, lda {lda}): {e}", c.ab));
            g.assert_victim_safe();
            let word = g
                .ctl_word(crate::sandbox::FAULT)
                .load(std::sync::atomic::Ordering::SeqCst);
            assert_eq!(
                word != 0,
                fenced,
                "{} round {round}: p {p:#x}, lda {lda}",
                c.ab
            );
            assert_eq!(
                g.read(out, want.len()),
                want,
                "{} round {round}: p {p:#x}, lda {lda}",
                c.ab
            );
        }
        assert!(seen[0] > 0 && seen[1] > 0, "{} {seen:?}", c.ab);
    }
}

/// [`text`] with A staged in a static shared array first (each thread copying words of it),
/// and `wmma.load.a` reading it from there: the fence's shared window and redirect target at
/// each type's fragment size.
fn shared_text(c: &Case) -> String {
    let bytes = c.mnk.0 * leads(c).0 * size(c.ab);
    let load = format!("wmma.load.a.sync.aligned.row.{}.global.{}", c.shape, c.ab);
    let staged = format!(
        ".shared .align 32 .b8 sa[{bytes}];
	.reg .b32 %s<4>;
	.reg .b64 %sd<4>;
	mov.u32 %s0, %tid.x;
	shl.b32 %s0, %s0, 2;
STAGE:
	cvt.u64.u32 %sd0, %s0;
	add.u64 %sd1, %rd1, %sd0;
	ld.global.u32 %s1, [%sd1];
	mov.u64 %sd2, sa;
	add.u64 %sd2, %sd2, %sd0;
	st.shared.u32 [%sd2], %s1;
	add.u32 %s0, %s0, 128;
	setp.lt.u32 %p0, %s0, {bytes};
	@%p0 bra STAGE;
	bar.sync 0;
	mov.u64 %sd3, sa;
	wmma.load.a.sync.aligned.row.{}.shared.{}",
        c.shape, c.ab
    );
    text(c, false)
        .replacen(
            ".reg .b32 %r<4>;",
            ".reg .b32 %r<4>;\n\t.reg .pred %p<2>;",
            1,
        )
        .replacen(&load, &staged, 1)
        .replacen("[%rd1], %r1;", "[%sd3], %r1;", 1)
}

#[test]
fn sandboxed_wmma_of_every_type_reads_shared_tiles_in_the_window_and_redirects_others() {
    for c in &CASES {
        let text = shared_text(c);
        let load = format!("wmma.load.a.sync.aligned.row.{}.shared.{}", c.shape, c.ab);
        assert!(
            text.contains(&load) && text.contains("[%sd3], %r1;"),
            "{text}"
        );
        let (s, _) = load_sandboxed(&text);
        assert!(s.ptx.contains(&load), "{}", s.ptx);
        sandboxed_text(c, &text, |_, a| a, leads(c).0 as u32, false);
        sandboxed_text(c, &text, |_, a| a, 0x10_0000, true);
    }
}
