//! The entry check of a count-down loop: one whose back-edge is taken while `iv != C`, `iv`'s
//! one write `add iv, iv, k` (bounded.rs's `Counter::Until`; nvcc rotates counted loops into
//! `add r, r, -2; setp.ne r, 0; @p bra`). Such a loop may run 2^bits / gcd(k, 2^bits)
//! iterations (`v0 == C`, or a start the step jumps over), so its fast copy may be entered only
//! when the check proves it short; a wrong check lets a guest loop for ever without a poll.
//!
//! **Proof.** Let W = 2^bits (the compare's width), v0 the value of `iv` at entry, k the step
//! as a `bits`-wide signed value, s its sign and m = |k|. The compare reads `v_j = v0 + j*k mod
//! W`, for j = 1, 2, … when it follows the add and j = 0, 1, … when it precedes it (the two
//! sit, unguarded, in the back-edge's basic block, so every iteration that reaches the branch
//! runs each once); the back-edge is taken after reading `v_j` only if `v_j != C`. Let
//! D = s*(C - v0) mod W, in [0, W). Multiplying by s (s*s = 1): `v_j == C` ⇔ j*m ≡ D (mod W).
//! If D >= 1 and m divides D, let J = D/m >= 1: J*m = D, so `v_J == C`; for 0 <= j < J,
//! 0 <= j*m < D < W, so j*m mod W = j*m != D and `v_j != C`. The loop therefore leaves at the
//! read of `v_J` at the latest, after at most J back-edges; the check also requires
//! D <= (N - 1)*m, so J <= N - 1 < N = `poll_interval`. What fails the check: k = 0 (m = 0:
//! `v_j == v0` for ever), v0 == C (D = 0: the next read of C is at j = W / gcd(m, W)), and m
//! not dividing D (`iv` steps over C and meets it only after wrapping, j*m >= W).
//!
//! **In 64 bits, where nothing wraps unseen.** At 32 bits `v0` and `C` are zero-extended (in
//! [0, 2^32)), k sign-extended, so m <= 2^31 and s*(C - v0) lies in (-2^32, 2^32): its low 32
//! bits (`and` 2^32 - 1; 2^32 divides 2^64) are D exactly. At 64 bits the subtraction and the
//! product by s are arithmetic mod 2^64, which is D's definition, and s*k mod 2^64 read unsigned
//! is |k| (2^63 for k = -2^63); the check requires m <= 2^32 there, so (N - 1)*m < 2^64. The
//! rest are unsigned compares and a remainder of values in [0, 2^64) (the divisor raised to 1
//! where k = 0, whose check has already failed: no remainder by zero). An immediate k is
//! folded here: m and the order of the subtraction are constants, and a step that can never
//! pass (k = 0, m > 2^32) gets no copy at all.
//!
//! ```text
//! v0 = iv;  d = s*(C - v0) mod W;  m = |k|
//! vp = m >= 1 && m <= 2^32 && d >= 1 && d % m == 0 && d <= (N - 1)*m
//! ```

use super::{Operand, Plan, Stmt, VP, name, new, vd};

/// Whether a loop of immediate step `k`, `bits` wide, can ever pass the check: 1 <= |k| <= 2^32.
pub(super) fn step_may_pass(k: i64, bits: u32) -> bool {
    (1..=1 << 32).contains(&magnitude(k, bits).0)
}

/// |k| and whether k < 0, for `k` read as a `bits`-wide signed value (as the add wraps it).
fn magnitude(k: i64, bits: u32) -> (u64, bool) {
    let k = if bits == 32 { i64::from(k as i32) } else { k };
    (k.unsigned_abs(), k < 0)
}

/// The check, onto `out`: `%gpuhost_vp` := the loop entered here takes fewer than `n`
/// back-edges (the module's proof).
pub(super) fn check(p: &Plan, n: u32, line: u32, out: &mut Vec<Stmt<'_>>) {
    let narrow = p.bits == 32;
    let vp = || Operand::Name(super::Str::borrowed(VP));
    let push2 = |out: &mut Vec<Stmt<'_>>, op, mods: &[&'static str], d, s| {
        out.push(new(line, None, op, mods, [d, s]));
    };
    // vd0 = v0, vd1 = C, both zero-extended to 64 bits.
    let wide = |o: Operand<'static>| match o {
        Operand::Int(c) if narrow => Operand::Int(i64::from(c as u32)),
        o => o,
    };
    let load: &[&str] = if narrow { &["u64", "u32"] } else { &["b64"] };
    let load_op = if narrow { "cvt" } else { "mov" };
    push2(out, load_op, load, vd(0), name(&p.iv));
    match wide(p.limit.clone()) {
        c @ Operand::Int(_) => push2(out, "mov", &["b64"], vd(1), c),
        c => push2(out, load_op, load, vd(1), c),
    }
    let tail = match p.step {
        Operand::Int(k) => {
            // m and s are constants: vd1 = s*(C - v0).
            let (m, negative) = magnitude(k, p.bits);
            let (a, b) = if negative {
                (vd(0), vd(1))
            } else {
                (vd(1), vd(0))
            };
            out.push(new(line, None, "sub", &["s64"], [vd(1), a, b]));
            Some(m)
        }
        ref k => {
            // vd2 = k sign-extended; vd3 = s: k >> 63 is 0 or -1, and or-ing in 1 makes it 1
            // or -1. Then vd2 = s*k = m and vd1 = s*(C - v0).
            let sext: &[&str] = if narrow { &["s64", "s32"] } else { &["b64"] };
            push2(out, load_op, sext, vd(2), k.clone());
            for (op, mods, ops) in [
                ("shr", &["s64"][..], [vd(3), vd(2), Operand::Int(63)]),
                ("or", &["b64"], [vd(3), vd(3), Operand::Int(1)]),
                ("mul", &["lo", "s64"], [vd(2), vd(2), vd(3)]),
                ("sub", &["s64"], [vd(1), vd(1), vd(0)]),
                ("mul", &["lo", "s64"], [vd(1), vd(1), vd(3)]),
            ] {
                out.push(new(line, None, op, mods, ops));
            }
            None
        }
    };
    if narrow {
        out.push(new(
            line,
            None,
            "and",
            &["b64"],
            [vd(1), vd(1), Operand::Int(0xffff_ffff)],
        ));
    }
    let n1 = i64::from(n) - 1;
    let setp = |cmp: &'static str, a: Operand<'static>, b: Operand<'static>, first: bool| {
        if first {
            new(line, None, "setp", &[cmp, "u64"], [vp(), a, b])
        } else {
            new(line, None, "setp", &[cmp, "and", "u64"], [vp(), a, b, vp()])
        }
    };
    match tail {
        // plan() admits no other immediate step; should one come, the check fails (vd1 != vd1
        // never holds), for the proof needs 1 <= m (no remainder by 0) and m <= 2^32 (no
        // product below wraps).
        Some(m) if !(1..=1 << 32).contains(&m) => {
            out.push(setp("ne", vd(1), vd(1), true));
        }
        Some(m) => {
            out.push(setp("ge", vd(1), Operand::Int(1), true));
            // A power of two divides d when d's low bits are clear. ptxas 13.0 (sm_90) calls
            // its 64-bit remainder subroutine even for `rem.u64 d, 4`: about 25 SASS
            // instructions and a call on every entry of nvcc's unrolled count-down loops.
            let (op, mods, by) = if m.is_power_of_two() {
                ("and", ["b64"], m - 1)
            } else {
                ("rem", ["u64"], m)
            };
            let m = m as i64;
            out.push(new(
                line,
                None,
                op,
                &mods,
                [vd(3), vd(1), Operand::Int(by as i64)],
            ));
            out.push(setp("eq", vd(3), Operand::Int(0), false));
            out.push(setp("le", vd(1), Operand::Int(n1.max(0) * m), false));
            if p.nested {
                // floor(log2 m), known here.
                let shift = Operand::Int(i64::from(63 - (m as u64).leading_zeros()));
                super::estimate(line, vd(1), shift, n, vd(3), out);
            }
        }
        None => {
            out.push(setp("ge", vd(2), Operand::Int(1), true));
            out.push(setp("le", vd(2), Operand::Int(1 << 32), false));
            out.push(setp("ge", vd(1), Operand::Int(1), false));
            out.push(new(
                line,
                None,
                "max",
                &["u64"],
                [vd(2), vd(2), Operand::Int(1)],
            ));
            out.push(new(line, None, "rem", &["u64"], [vd(3), vd(1), vd(2)]));
            out.push(setp("eq", vd(3), Operand::Int(0), false));
            if p.nested {
                out.push(super::log2_step(line, vd(2)));
            }
            out.push(new(
                line,
                None,
                "mul",
                &["lo", "u64"],
                [vd(2), vd(2), Operand::Int(n1.max(0))],
            ));
            out.push(setp("le", vd(1), vd(2), false));
            if p.nested {
                super::estimate(line, vd(1), super::vt(), n, vd(3), out);
            }
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::super::{Plan, Str, Test};
    use super::{Operand, Stmt, check};
    use std::collections::HashMap;

    /// Runs the emitted check on one thread's registers (a small evaluator of the few opcodes it
    /// uses, at their PTX meaning): whether `%gpuhost_vp` ends true. version.rs's counted
    /// checks use it too.
    pub(in crate::sandbox::version) fn passes(
        code: &[Stmt<'_>],
        regs: &mut HashMap<String, u64>,
    ) -> bool {
        for s in code {
            let Stmt::Inst(i) = s else {
                panic!("not an instruction")
            };
            let m: Vec<&str> = i.mods.iter().map(|x| x.as_ref()).collect();
            let get = |o: &Operand, regs: &HashMap<String, u64>| match o {
                Operand::Int(v) => *v as u64,
                Operand::Name(n) => regs[n.as_ref()],
                o => panic!("{o:?}"),
            };
            let ops: Vec<u64> = i.operands[1..].iter().map(|o| get(o, regs)).collect();
            let v = match (i.opcode.as_ref(), m.as_slice()) {
                ("cvt", ["u64", "u32"]) => ops[0] & 0xffff_ffff,
                ("cvt", ["s64", "s32"]) => ops[0] as u32 as i32 as i64 as u64,
                ("mov", ["b64"]) => ops[0],
                ("sub", ["s64"]) => ops[0].wrapping_sub(ops[1]),
                ("mul", ["lo", _]) => ops[0].wrapping_mul(ops[1]),
                ("shr", ["s64"]) => ((ops[0] as i64) >> ops[1]) as u64,
                ("or", ["b64"]) => ops[0] | ops[1],
                ("and", ["b64"]) => ops[0] & ops[1],
                ("max", ["u64"]) => ops[0].max(ops[1]),
                ("min", ["u64"]) => ops[0].min(ops[1]),
                ("rem", ["u64"]) => ops[0] % ops[1],
                ("add", ["u64" | "s64"]) => ops[0].wrapping_add(ops[1]),
                ("cvt", ["u32", "u64"]) => ops[0] & 0xffff_ffff,
                // bfind.u64's result is a .u32: 0xffffffff when no bit is set.
                ("bfind", ["u64"]) => match ops[0] {
                    0 => 0xffff_ffff,
                    v => u64::from(63 - v.leading_zeros()),
                },
                // PTX clamps a shift past the width: a logical shift gives 0.
                ("shr", ["u64"]) => ops[0].checked_shr(ops[1] as u32).unwrap_or(0),
                ("setp", [cmp, rest @ ..]) => {
                    let signed = rest.last() == Some(&"s64");
                    let (a, b) = if signed {
                        ((ops[0] ^ (1 << 63)), (ops[1] ^ (1 << 63)))
                    } else {
                        (ops[0], ops[1])
                    };
                    let c = match *cmp {
                        "ge" => a >= b,
                        "le" => a <= b,
                        "eq" => a == b,
                        "ne" => a != b,
                        c => panic!("{c}"),
                    };
                    u64::from(c && (rest.len() == 1 || ops[2] == 1))
                }
                (op, m) => panic!("{op} {m:?}"),
            };
            let Some(Operand::Name(d)) = i.operands.first() else {
                panic!()
            };
            regs.insert(d.to_string(), v);
        }
        regs["%gpuhost_vp"] == 1
    }

    /// Back-edges the loop takes from `v0` (the compare before or after the add), or `None`
    /// past `cap`.
    fn back_edges(v0: u64, c: u64, k: u64, bits: u32, before: bool, cap: u64) -> Option<u64> {
        let mask = if bits == 32 { 0xffff_ffff } else { u64::MAX };
        let mut iv = v0;
        for taken in 0..=cap {
            let old = iv;
            iv = iv.wrapping_add(k) & mask;
            if (if before { old } else { iv }) == c {
                return Some(taken);
            }
        }
        None
    }

    /// The check of `Plan` `p` (count-down, immediate or register `k`) on `v0`, `c`, `k`.
    fn run(bits: u32, imm: bool, n: u32, vck: (u64, u64, u64)) -> bool {
        run_nested(bits, imm, n, vck, false).0
    }

    /// [`run`], for a nested loop when `nested`: whether it passes, and `%gpuhost_vt`.
    fn run_nested(
        bits: u32,
        imm: bool,
        n: u32,
        (v0, c, k): (u64, u64, u64),
        nested: bool,
    ) -> (bool, Option<u64>) {
        let name = |n: &str| Operand::Name(Str::owned(n.to_string()));
        let p = Plan {
            head: 0,
            back: 0,
            iv: "%iv".into(),
            limit: if imm {
                Operand::Int(c as i64)
            } else {
                name("%c")
            },
            step: if imm {
                Operand::Int(k as i64)
            } else {
                name("%k")
            },
            test: Test::Ne,
            bits,
            nested,
        };
        let mut code = Vec::new();
        check(&p, n, 1, &mut code);
        let mut regs = HashMap::from([
            ("%iv".to_string(), v0),
            ("%c".to_string(), c),
            ("%k".to_string(), k),
        ]);
        let ok = passes(&code, &mut regs);
        (ok, regs.get("%gpuhost_vt").copied())
    }

    #[test]
    fn an_immediate_step_the_proof_cannot_use_fails_the_check_even_if_planned() {
        // plan() gives these no copy; the check refuses them on its own as well.
        for (bits, k) in [
            (32, 0),
            (64, 0),
            (32, 1 << 32),
            (64, (1 << 32) + 1),
            (64, i64::MIN),
        ] {
            for (v0, c) in [(0, 0), (4, 0), (1, 1 << 33), (0, 1)] {
                assert!(
                    !run(bits, true, 1024, (v0, c, k as u64)),
                    "{bits} {k} {v0} {c}"
                );
            }
        }
    }

    /// A xorshift generator from `seed`: the checks' random cases, the same on every run.
    pub(in crate::sandbox::version) fn xorshift(mut x: u64) -> impl FnMut() -> u64 {
        move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        }
    }

    #[test]
    fn the_emitted_check_passes_only_loops_shorter_than_the_poll_interval() {
        const N: u32 = 16;
        let mut next = xorshift(0x2545_f491_4f6c_dd1d);
        let (mut passed, mut refused) = (0, 0);
        for round in 0..60_000u64 {
            let bits = if round % 2 == 0 { 32 } else { 64 };
            let mask = if bits == 32 { 0xffff_ffff } else { u64::MAX };
            // Steps and distances near the edges: small, ±2^31, ±2^32, the extremes.
            let pick = |r: u64| match r % 6 {
                0 => r >> 60,
                1 => (r >> 61).wrapping_neg(),
                2 => (1u64 << 31).wrapping_add(r >> 62),
                3 => (1u64 << 32).wrapping_sub(r >> 62),
                4 => (1u64 << 63).wrapping_add(r >> 62).wrapping_neg(),
                _ => r,
            };
            let k = pick(next()) & mask;
            let v0 = next() & mask;
            // C a few steps from v0 (either way), or anywhere.
            let j = next() % 20;
            let c = match next() % 3 {
                0 => v0.wrapping_add(j.wrapping_mul(k)),
                1 => v0.wrapping_add(j.wrapping_mul(k)).wrapping_add(next() % 3),
                _ => next(),
            } & mask;
            for imm in [false, true] {
                if imm && !super::step_may_pass(k as i64, bits) {
                    continue;
                }
                let ok = run(bits, imm, N, (v0, c, k));
                let case = format!("bits {bits} v0 {v0:#x} c {c:#x} k {k:#x} imm {imm}");
                // Nested, the same check, which also leaves a bound on the back-edges.
                let (nested_ok, vt) = run_nested(bits, imm, N, (v0, c, k), true);
                assert_eq!(ok, nested_ok, "{case}");
                if ok {
                    passed += 1;
                    let vt = vt.expect("a nested check sets %gpuhost_vt");
                    assert!(vt <= u64::from(N), "{case}: estimate {vt}");
                    for before in [false, true] {
                        let b = back_edges(v0, c, k, bits, before, u64::from(N));
                        assert!(b.is_some_and(|b| b < u64::from(N)), "{case}: {b:?}");
                        assert!(b.is_some_and(|b| b <= vt), "{case}: {b:?} > {vt}");
                    }
                } else {
                    refused += 1;
                }
                // It passes exactly what the proof allows (the fast copy is not given up on
                // loops it covers).
                let (m, d) = if (k >> (bits - 1)) & 1 == 1 {
                    (k.wrapping_neg() & mask, v0.wrapping_sub(c) & mask)
                } else {
                    (k, c.wrapping_sub(v0) & mask)
                };
                let proof = (1..=1 << 32).contains(&m)
                    && d >= 1
                    && d % m == 0
                    && u128::from(d) <= u128::from(N - 1) * u128::from(m);
                assert_eq!(ok, proof, "{case}");
            }
        }
        assert!(
            passed > 10_000 && refused > 10_000,
            "{passed} passed, {refused} refused"
        );
    }
}
