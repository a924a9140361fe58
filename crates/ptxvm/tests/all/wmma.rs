//! `wmma` on ptxvm and under the sandbox: loads, multiplies and stores of f16 fragments in
//! every shape ptxvm runs, through strided matrices; the sandbox's fences of the strided tiles
//! (global and shared), with hostile pointers and strides redirected and reported; and what it
//! refuses.

use crate::harness::{Arg, DevMem, Rng, Shape};
use crate::matrix::half;
use crate::sandbox::{GuestMem, load_sandboxed};
use crate::text::{HEAD, go, load};

/// A wmma GEMM kernel of `shape` (`m16n16k16`, …): A row-major, B column-major, C and D
/// row-major of `acc` (`f16` or `f32`), each with its leading dimension from a parameter.
fn wmma_text(shape: &str, acc: &str) -> String {
    let n = if acc == "f16" { 4 } else { 8 };
    let list = |p: &str, n: usize| {
        (0..n)
            .map(|i| format!("%{p}{i}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let (a, b, c, d) = (list("a", 8), list("b", 8), list("c", n), list("d", n));
    format!(
        r#"
.visible .entry wm(.param .u64 pa, .param .u64 pb, .param .u64 pc, .param .u64 pd,
    .param .u32 lda, .param .u32 ldb, .param .u32 ldc)
{{
	.reg .b32 %a<8>;
	.reg .b32 %b<8>;
	.reg .b32 %c<8>;
	.reg .b32 %d<8>;
	.reg .b32 %r<4>;
	.reg .b64 %rd<5>;
	ld.param.u64 %rd1, [pa];
	ld.param.u64 %rd2, [pb];
	ld.param.u64 %rd3, [pc];
	ld.param.u64 %rd4, [pd];
	ld.param.u32 %r1, [lda];
	ld.param.u32 %r2, [ldb];
	ld.param.u32 %r3, [ldc];
	wmma.load.a.sync.aligned.row.{shape}.global.f16 {{{a}}}, [%rd1], %r1;
	wmma.load.b.sync.aligned.col.{shape}.global.f16 {{{b}}}, [%rd2], %r2;
	wmma.load.c.sync.aligned.row.{shape}.global.{acc} {{{c}}}, [%rd3], %r3;
	wmma.mma.sync.aligned.row.col.{shape}.{acc}.{acc} {{{d}}}, {{{a}}}, {{{b}}}, {{{c}}};
	wmma.store.d.sync.aligned.row.{shape}.global.{acc} [%rd4], {{{d}}}, %r3;
	ret;
}}
"#
    )
}

#[test]
fn wmma_loads_multiplies_and_stores_through_strided_matrices() {
    for (shape, (m, n, k)) in [
        ("m16n16k16", (16, 16, 16)),
        ("m32n8k16", (32, 8, 16)),
        ("m8n32k16", (8, 32, 16)),
    ] {
        for acc in ["f32", "f16"] {
            let mut rng = Rng::new(0x3a7 + m as u64);
            let v = |r: &mut Rng| f64::from((r.next_u32() % 9) as i32 - 4) * 0.5;
            // Leading dimensions past the matrices' own (a submatrix of a wider one), kept to
            // the ISA's alignment: each row or column starts on a 32-byte boundary.
            let (lda, ldb) = (k + 16, k + 16);
            let ldc = if acc == "f16" { n + 16 } else { n + 8 };
            let a: Vec<f64> = (0..m * lda).map(|_| v(&mut rng)).collect();
            let b: Vec<f64> = (0..n * ldb).map(|_| v(&mut rng)).collect();
            let c: Vec<f64> = (0..m * ldc).map(|_| v(&mut rng)).collect();
            let halves = |x: &[f64]| {
                x.iter()
                    .flat_map(|v| half(*v).to_le_bytes())
                    .collect::<Vec<u8>>()
            };
            let accs = |x: &[f64]| -> Vec<u8> {
                if acc == "f16" {
                    halves(x)
                } else {
                    x.iter().flat_map(|v| (*v as f32).to_le_bytes()).collect()
                }
            };
            let mut want = c.clone();
            for r in 0..m {
                for col in 0..n {
                    // B is column-major: element (x, col) at col * ldb + x.
                    let dot: f64 = (0..k).map(|x| a[r * lda + x] * b[col * ldb + x]).sum();
                    want[r * ldc + col] = c[r * ldc + col] + dot;
                }
            }
            let module = load(&wmma_text(shape, acc));
            let mut mem = DevMem::new();
            let (pa, pb, pc) = (
                mem.upload(&halves(&a)),
                mem.upload(&halves(&b)),
                mem.upload(&accs(&c)),
            );
            let pd = mem.upload(&accs(&c));
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
            let bytes = accs(&want).len();
            let got: Vec<u8> = mem.download(pd, bytes);
            // Elements between the rows, past each row's n, keep C's values.
            assert_eq!(got, accs(&want), "{shape} {acc}");
        }
    }
}

/// Inputs of [`wmma_text`]'s kernel for `m16n16k16` with f32 accumulators, and D = A·B + C
/// as bytes: A row-major, B column-major, leading dimensions 32, 32 and 24.
fn wmma_case(seed: u64) -> (Vec<u8>, Vec<u8>, Vec<u8>, Vec<u8>) {
    let (m, n, k, lda, ldb, ldc) = (16, 16, 16, 32, 32, 24);
    let mut rng = Rng::new(seed);
    let v = |r: &mut Rng| f64::from((r.next_u32() % 9) as i32 - 4);
    let a: Vec<f64> = (0..m * lda).map(|_| v(&mut rng)).collect();
    let b: Vec<f64> = (0..n * ldb).map(|_| v(&mut rng)).collect();
    let c: Vec<f64> = (0..m * ldc).map(|_| v(&mut rng)).collect();
    let mut d = c.clone();
    for r in 0..m {
        for col in 0..n {
            d[r * ldc + col] += (0..k)
                .map(|x| a[r * lda + x] * b[col * ldb + x])
                .sum::<f64>();
        }
    }
    let halves = |x: &[f64]| x.iter().flat_map(|v| half(*v).to_le_bytes()).collect();
    let floats = |x: &[f64]| x.iter().flat_map(|v| (*v as f32).to_le_bytes()).collect();
    (halves(&a), halves(&b), floats(&c), floats(&d))
}

/// Runs the sandboxed wmma GEMM with A at `a_at(arena memory, A's own allocation)` and lda
/// `lda`; returns the memory and where D is.
fn wmma_sandboxed(
    a_at: impl Fn(&GuestMem, u64) -> u64,
    lda: u32,
    fenced: bool,
) -> (crate::sandbox::GuestMem, u64, Vec<u8>) {
    let (s, sbx) = load_sandboxed(&format!("{HEAD}{}", wmma_text("m16n16k16", "f32")));
    assert!(
        s.ptx
            .contains("wmma.load.a.sync.aligned.row.m16n16k16.global.f16"),
        "{}",
        s.ptx
    );
    let (a, b, c, d) = wmma_case(7);
    let mut out = 0;
    let mem = crate::redteam::attack_in(
        &sbx,
        "wm",
        crate::sandbox::Shape::linear(1, 32),
        |g| {
            let mut put = |bytes: &[u8]| {
                let p = g.alloc(bytes.len().next_multiple_of(256));
                g.write(p, bytes);
                p
            };
            let (pa, pb, pc) = (put(&a), put(&b), put(&c));
            out = put(&c);
            let pa = a_at(g, pa);
            [pa, pb, pc, out]
                .map(Arg::U64)
                .into_iter()
                .chain([Arg::U32(lda), Arg::U32(32), Arg::U32(24)])
                .collect()
        },
        fenced,
    );
    (mem, out, d)
}

#[test]
fn sandboxed_wmma_gives_the_same_product_and_hostile_tiles_are_redirected_and_reported() {
    // Legal: the product, nothing reported.
    let (mem, out, want) = wmma_sandboxed(|_, a| a, 32, false);
    assert_eq!(mem.read(out, want.len()), want);
    // A misaligned pointer is aligned down (the ISA requires 32 bytes), in range: not reported.
    let (mem, out, _) = wmma_sandboxed(|_, a| a + 2, 32, false);
    assert_eq!(mem.read(out, want.len()), want);
    // Another tenant's memory, a tile reaching past the arena's end, a stride that does: each
    // redirected to the arena's base with a dense stride and reported; the victim never read.
    wmma_sandboxed(|g, _| g.victim(), 32, true);
    wmma_sandboxed(
        |g, _| g.base() + crate::sandbox::ARENA as u64 - 256,
        32,
        true,
    );
    wmma_sandboxed(|_, a| a, 0x4000_0000, true);
    wmma_sandboxed(|_, _| u64::MAX - 31, 32, true);
}

#[test]
fn wmma_accesses_the_sandbox_cannot_fence_are_refused_with_the_reason() {
    let text = wmma_text("m16n16k16", "f32");
    let cases = [
        (
            text.replacen(".global.f16", ".f16", 1),
            "a .global or .shared address",
        ),
        (
            text.replacen("\twmma.load.a", "\t@%p1 wmma.load.a", 1)
                .replacen(
                    ".reg .b32 %r<4>;",
                    ".reg .b32 %r<4>;\n\t.reg .pred %p<2>;",
                    1,
                ),
            "under a predicate",
        ),
        // A mangled store with its address alone (the sandbox once indexed past it: a panic
        // the mangled-module sweep of session 36 found).
        (
            text.lines()
                .map(|l| {
                    if l.trim_start().starts_with("wmma.store") {
                        "\twmma.store.d.sync.aligned.row.m16n16k16.global.f32 [%rd4];"
                    } else {
                        l
                    }
                })
                .collect::<Vec<_>>()
                .join("\n"),
            "at most a stride",
        ),
    ];
    for (body, why) in cases {
        match ptxvm::sandbox::sandbox(&format!("{HEAD}{body}"), &Default::default()) {
            Err(ptxvm::Error::Refused { what, .. }) => assert!(what.contains(why), "{what}"),
            other => panic!("{why}: {other:?}"),
        }
    }
}

/// C's 16×16 f32 tile in shared memory, element (r, c) = 16r + c, read by `wmma.load` at
/// `off` bytes into it and written back column-major over it (a transpose), then copied out.
const WMMA_SHARED: &str = r#"
.visible .entry ws(.param .u64 out, .param .u32 off)
{
	.reg .b32 %c<8>;
	.reg .b32 %r<12>;
	.reg .f32 %f<2>;
	.reg .b64 %rd<4>;
	.reg .pred %p<2>;
	.shared .align 32 .b8 tile[1024];
	ld.param.u64 %rd1, [out];
	ld.param.u32 %r1, [off];
	mov.u32 %r2, tile;
	mov.u32 %r4, %laneid;
	mov.u32 %r5, 0;
FILL:
	shl.b32 %r6, %r4, 3;
	add.s32 %r6, %r6, %r5;
	cvt.rn.f32.u32 %f1, %r6;
	shl.b32 %r7, %r6, 2;
	add.s32 %r7, %r2, %r7;
	st.shared.f32 [%r7], %f1;
	add.s32 %r5, %r5, 1;
	setp.lt.u32 %p1, %r5, 8;
	@%p1 bra FILL;
	bar.sync 0;
	add.s32 %r3, %r2, %r1;
	wmma.load.c.sync.aligned.row.m16n16k16.shared.f32 {%c0, %c1, %c2, %c3, %c4, %c5, %c6, %c7}, [%r3], 16;
	wmma.store.d.sync.aligned.col.m16n16k16.shared.f32 [%r2], {%c0, %c1, %c2, %c3, %c4, %c5, %c6, %c7}, 16;
	bar.sync 0;
	shl.b32 %r8, %r4, 5;
	add.s32 %r9, %r2, %r8;
	ld.shared.v4.u32 {%r5, %r6, %r7, %r10}, [%r9];
	cvt.u64.u32 %rd2, %r8;
	add.s64 %rd3, %rd1, %rd2;
	st.global.v4.u32 [%rd3], {%r5, %r6, %r7, %r10};
	ld.shared.v4.u32 {%r5, %r6, %r7, %r10}, [%r9+16];
	st.global.v4.u32 [%rd3+16], {%r5, %r6, %r7, %r10};
	ret;
}
"#;

#[test]
fn sandboxed_wmma_in_shared_memory_transposes_in_the_window_and_is_redirected_out_of_it() {
    let (_, sbx) = load_sandboxed(&format!("{HEAD}{WMMA_SHARED}"));
    for (off, fenced) in [
        (0u32, false),
        (4096, true),
        (1000, true),
        (0x8000_0000, true),
    ] {
        let mut out = 0;
        let mem = crate::redteam::attack_in(
            &sbx,
            "ws",
            crate::sandbox::Shape::linear(1, 32),
            |g| {
                out = g.alloc(1024);
                vec![Arg::U64(out), Arg::U32(off)]
            },
            fenced,
        );
        if !fenced {
            let got: Vec<f32> = mem
                .read(out, 1024)
                .chunks(4)
                .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
                .collect();
            let want: Vec<f32> = (0..256).map(|i| ((i % 16) * 16 + i / 16) as f32).collect();
            assert_eq!(got, want);
        }
    }
}

/// f32 of the f16 bits `h` (test side; every value here is exact).
fn from_half(h: u16) -> f64 {
    let (sign, e, m) = (
        if h & 0x8000 != 0 { -1.0 } else { 1.0 },
        (h >> 10) & 0x1f,
        h & 0x3ff,
    );
    match e {
        0 => sign * f64::from(m) * 2f64.powi(-24),
        _ => sign * (1.0 + f64::from(m) / 1024.0) * 2f64.powi(i32::from(e) - 15),
    }
}

#[test]
fn random_wmma_pointers_and_strides_stay_in_the_arena_and_compute_from_where_the_fence_put_them() {
    let (_, sbx) = load_sandboxed(&format!("{HEAD}{}", wmma_text("m16n16k16", "f32")));
    let arena = crate::sandbox::ARENA as u64;
    let mut rng = Rng::new(0x3f_0035);
    let mut seen = [0usize; 2];
    for round in 0..48 {
        let mut g = GuestMem::new();
        let base = g.base();
        // A's candidates fill the arena's first 64 KiB (so the base, where a fenced tile goes).
        let abuf = g.alloc(65536);
        let abytes: Vec<u8> = (0..32768)
            .flat_map(|_| half(f64::from((rng.next_u32() % 9) as i32 - 4)).to_le_bytes())
            .collect();
        g.write(abuf, &abytes);
        let (_, b, c, _) = wmma_case(round);
        let (pb, pc) = (g.alloc(b.len()), g.alloc(c.len()));
        g.write(pb, &b);
        g.write(pc, &c);
        let out = g.alloc(c.len());
        g.write(out, &c);
        let r = rng.next_u32();
        let stride = 16 * (1 + u64::from(r >> 4) % 64);
        let fit = |s: u64| 65536 - (15 * s + 16) * 2;
        let (p, lda) = match r % 6 {
            0 | 1 => (
                abuf + u64::from(rng.next_u32()) % (fit(stride) / 32) * 32,
                stride,
            ),
            2 => (
                abuf + u64::from(rng.next_u32()) % fit(stride) + 1,
                stride + 1 + u64::from(r >> 20) % 15,
            ),
            3 => (g.victim() + 64, stride),
            4 => (base + arena - 512, stride),
            _ => [(abuf, 0x1000_0000), (u64::MAX - 100, 16), (0, 16)][(r >> 8) as usize % 3],
        };
        // The fence's own arithmetic: aligned, then in the arena with its span, or else the
        // base with the dense stride.
        let (pa, sa) = (p & !31, lda & 0xffff_fff0);
        let span = (15 * sa + 16) * 2;
        let off = pa.wrapping_sub(base);
        let fenced = span > arena || off > arena - span;
        let (pe, se) = if fenced { (base, 16) } else { (pa, sa) };
        seen[usize::from(fenced)] += 1;
        let a = |row: u64, k: u64| {
            let at = pe + (row * se + k) * 2;
            from_half(u16::from_le_bytes(g.read(at, 2).try_into().unwrap()))
        };
        let f = |bytes: &[u8], i: usize| {
            f64::from(f32::from_le_bytes(bytes[4 * i..][..4].try_into().unwrap()))
        };
        let h = |bytes: &[u8], i: usize| {
            from_half(u16::from_le_bytes(bytes[2 * i..][..2].try_into().unwrap()))
        };
        let mut want = c.clone();
        for row in 0..16u64 {
            for col in 0..16usize {
                let dot: f64 = (0..16u64)
                    .map(|k| a(row, k) * h(&b, col * 32 + k as usize))
                    .sum();
                let i = row as usize * 24 + col;
                want[4 * i..][..4].copy_from_slice(&((f(&c, i) + dot) as f32).to_le_bytes());
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
            .chain([Arg::U32(lda as u32), Arg::U32(32), Arg::U32(24)])
            .collect::<Vec<_>>();
        crate::sandbox::run_sandboxed(
            &sbx,
            "wm",
            crate::sandbox::Shape::linear(1, 32),
            &args,
            &hidden,
            &g,
        )
        .unwrap_or_else(|e| panic!("round {round} (p {p:#x}, lda {lda}): {e}"));
        g.assert_victim_safe();
        let word = g
            .ctl_word(crate::sandbox::FAULT)
            .load(std::sync::atomic::Ordering::SeqCst);
        assert_eq!(word != 0, fenced, "round {round}: p {p:#x}, lda {lda}");
        assert_eq!(
            g.read(out, want.len()),
            want,
            "round {round}: p {p:#x}, lda {lda}"
        );
    }
    assert!(seen[0] > 0 && seen[1] > 0, "{seen:?}");
}
