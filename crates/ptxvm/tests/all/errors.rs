//! Load errors (unsupported, malformed, hostile input) and runtime faults.

use crate::harness::{Arg, DevMem, Rng, Shape, fixture, run};
use crate::text::{HEAD, go, load};
use ptxvm::{Error, FaultKind, Launch, Module};

use crate::launch::launch;

#[test]
fn out_of_bounds_store_faults_with_block_thread_and_line() {
    let m = fixture();
    let mut mem = DevMem::new();
    let d = mem.alloc(64 * 4);
    let f = run(
        &m,
        "oob_store",
        &Shape::linear(2, 32),
        &[Arg::Ptr(d), Arg::I32(64)],
        &mem,
    )
    .unwrap_err();
    assert!(
        matches!(f.kind, FaultKind::IllegalAddress { len: 4, .. }),
        "{f}"
    );
    assert_eq!(f.kernel, "oob_store");
    assert_eq!((f.block, f.thread), ([0, 0, 0], [0, 0, 0]));
    assert!(f.line > 0);
    let text = f.to_string();
    assert!(
        text.contains("illegal address") && text.contains("oob_store"),
        "{text}"
    );
}

/// A kernel calling `f` whose call-site `.param` accesses carry `arg` and `ret` as guards (""
/// for none), and which guards its own parameter's read with `own`.
fn guarded_params(arg: &str, ret: &str, own: &str) -> String {
    format!(
        "{HEAD}.func (.param .b32 r) f(.param .b32 x)
{{
	.reg .b32 %a;
	.reg .pred %q;
	setp.eq.u32 %q, %a, 0;
	@%q ld.param.b32 %a, [x];
	@%q st.param.b32 [r], %a;
	ret;
}}
.visible .entry k(.param .u32 n)
{{
	.reg .b32 %r<3>;
	.reg .pred %p;
	mov.u32 %r1, %tid.x;
	setp.eq.u32 %p, %r1, 0;
	{own}ld.param.u32 %r1, [n];
	{{
	.param .b32 a;
	{arg}st.param.b32 [a], %r1;
	.param .b32 v;
	@%p call (v), f, (a);
	{ret}ld.param.b32 %r2, [v];
	}}
	ret;
}}
"
    )
}

#[test]
fn a_guarded_access_to_a_calls_param_variable_fails_load_as_ptxas_refuses_it() {
    for (arg, ret, guarded) in [("@%p ", "", "@%p st.param"), ("", "@!%p ", "@!%p ld.param")] {
        let text = guarded_params(arg, ret, "");
        let line = text
            .lines()
            .position(|l| l.contains(guarded))
            .map(|i| i + 1);
        match Module::load(&text) {
            Err(Error::Invalid { line: at, msg }) => {
                assert_eq!(Some(at as usize), line, "{msg}");
                assert!(
                    msg.contains("under a guard") && msg.contains("guard the call"),
                    "{msg}"
                );
            }
            other => panic!("{arg}/{ret}: {other:?}"),
        }
    }
    // The call itself, and a kernel's or function's own parameters, may be guarded.
    assert!(Module::load(&guarded_params("", "", "@%p ")).is_ok());
}

#[test]
fn a_module_defining_a_name_twice_fails_load_as_nvidia_refuses_it() {
    let entry = ".visible .entry k()\n{\n\tret;\n}\n";
    let func = ".func k()\n{\n\tret;\n}\n";
    for (first, second) in [(entry, entry), (entry, func), (func, entry), (func, func)] {
        let src = format!("{HEAD}{first}{second}");
        match Module::load(&src) {
            Err(Error::Invalid { msg, .. }) => assert_eq!(msg, "function k defined twice"),
            other => panic!("{other:?}"),
        }
    }
    // A prototype and its one definition are one function, not two.
    let ok = format!("{HEAD}.func g();\n.func g()\n{{\n\tret;\n}}\n{entry}");
    assert!(Module::load(&ok).is_ok());
}

#[test]
fn underscore_declared_as_a_name_fails_load_and_sandbox_as_nvidia_refuses_it() {
    // `_` is the sink operand. Declared as a shared variable it once loaded (nothing used it),
    // and the sandbox's window setup then named it as an operand, which no loader accepts: a
    // mangled module (redteam::shapes::mangled_modules...) found it.
    let bodies = [
        ".visible .entry k()\n{\n\t.shared .align 4 .b8 _;\n\tret;\n}\n",
        ".visible .entry k()\n{\n\t.reg .b32 _;\n\tret;\n}\n",
        ".visible .entry k()\n{\n_:\n\tret;\n}\n",
        ".visible .entry k(.param .u64 _)\n{\n\tret;\n}\n",
        ".func _()\n{\n\tret;\n}\n",
        ".global .u32 _;\n",
    ];
    for b in bodies {
        let src = format!("{HEAD}{b}");
        for e in [
            Module::load(&src).err(),
            ptxvm::sandbox::sandbox(&src, &Default::default()).err(),
        ] {
            match e {
                Some(Error::Parse { msg, .. }) => {
                    assert!(
                        msg.starts_with("`_` is the sink operand, not a name"),
                        "{b}: {msg}"
                    )
                }
                other => panic!("{b}: {other:?}"),
            }
        }
    }
    // As an operand it is still the sink.
    let sink = format!(
        "{HEAD}.visible .entry k(.param .u64 p)\n{{\n\t.reg .b64 %rd<2>;\n\tld.param.u64 %rd1, [p];\n\tatom.global.add.u32 _, [%rd1], 1;\n\tret;\n}}\n"
    );
    Module::load(&sink).unwrap();
}

#[test]
fn unsupported_instruction_fails_load_naming_its_line() {
    let src = format!(
        "{HEAD}.visible .entry k()\n{{\n\t.reg .b32 %r<3>;\n\tvadd.u32.u32.u32 %r1, %r2, %r2, %r1;\n\tret;\n}}\n"
    );
    match Module::load(&src) {
        Err(Error::Unsupported { line, what }) => {
            assert_eq!(line, 7);
            assert!(what.contains("vadd"), "{what}");
        }
        other => panic!("{other:?}"),
    }
    // Volta's f16 m8n8k4 is the one mma shape ptxvm does not run (its quad-pair layout).
    let mma = format!(
        "{HEAD}.visible .entry k() {{ .reg .b32 %r<5>; .reg .f32 %f<9>;\n\
         mma.sync.aligned.m8n8k4.row.col.f32.f16.f16.f32 {{%f1,%f2,%f3,%f4,%f5,%f6,%f7,%f8}}, {{%r1,%r2}}, {{%r3,%r4}}, {{%f1,%f2,%f3,%f4,%f5,%f6,%f7,%f8}};\n}}"
    );
    assert!(matches!(
        Module::load(&mma),
        Err(Error::Unsupported { line: 5, .. })
    ));
    // Texture syntax is not even parsed: a syntax error, still never a panic.
    let tex = format!(
        "{HEAD}.visible .entry k() {{ .reg .b32 %r<2>; suld.b.1d.b32.trap {{%r1}}, [s, {{%r1}}]; }}"
    );
    assert!(Module::load(&tex).is_err());
}

#[test]
fn malformed_ptx_is_an_error_with_position() {
    let cases = [
        ".entry",
        ".visible .entry k(.param .u64 a { ret; }",
        ".visible .entry k() { mov.u32 %r1, 1; }",
        ".visible .entry k() { bra $nowhere; }",
        ".visible .entry k() { .reg .b32 %r<2>; add.s32 %r1, %r1; }",
        ".visible .entry k() { .reg .b32 %r<2>; ld.global.u32 %r1, %r1; }",
        ".visible .entry k() { $a: $a: ret; }",
        ".global .b32 g[2] = {1, 2, 3};",
    ];
    for c in cases {
        let e = Module::load(&format!("{HEAD}{c}")).expect_err(c);
        let msg = e.to_string();
        assert!(msg.contains("line"), "{c}: {msg}");
    }
}

#[test]
fn mutated_fixture_text_never_panics() {
    let dir = std::env::var("CARGO_MANIFEST_DIR").unwrap();
    let text = std::fs::read_to_string(format!("{dir}/tests/fixtures/kernels.ptx")).unwrap();
    let bytes = text.as_bytes();
    let mut rng = Rng::new(99);
    let alphabet = b"{}()[];,.%$@!-+|<>=0123456789abcxyz_ \n";
    for _ in 0..300 {
        let mut b = bytes.to_vec();
        for _ in 0..1 + rng.next_u32() % 8 {
            let at = rng.next_u32() as usize % b.len();
            match rng.next_u32() % 3 {
                0 => b[at] = alphabet[rng.next_u32() as usize % alphabet.len()],
                1 => {
                    b.remove(at);
                }
                _ => b.truncate(at),
            }
        }
        let s = String::from_utf8_lossy(&b);
        let _ = Module::load(&s);
    }
    // Line-level surgery keeps most tokens valid and so reaches the lowering and its limits.
    let lines: Vec<&str> = text.lines().collect();
    let numbers = [
        "0",
        "-1",
        "4294967295",
        "18446744073709551615",
        "0x7fffffffffffffff",
        "-9223372036854775808",
    ];
    for _ in 0..400 {
        let mut l = lines.clone();
        for _ in 0..1 + rng.next_u32() % 4 {
            let at = rng.next_u32() as usize % l.len();
            let other = rng.next_u32() as usize % l.len();
            match rng.next_u32() % 3 {
                0 => {
                    l.remove(at);
                }
                1 => l.insert(at, lines[other]),
                _ => l.swap(at, other),
            }
        }
        let mut s = l.join("\n");
        // Swap an integer literal for an extreme one.
        if let Some(pos) = s.find(", 4;") {
            let n = numbers[rng.next_u32() as usize % numbers.len()];
            s.replace_range(pos + 2..pos + 3, n);
        }
        let _ = Module::load(&s);
    }
    let offsets = [
        "[k_p+-9223372036854775808]",
        "[k_p+18446744073709551615]",
        "[%rd1+-1]",
    ];
    for o in offsets {
        let src = format!(
            "{HEAD}.visible .entry k(.param .u64 k_p) {{ .reg .b64 %rd<2>; ld.param.u64 %rd1, {o}; ret; }}"
        );
        let _ = Module::load(&src);
    }
    let deep = format!(
        "{HEAD}.visible .entry k() {}{}",
        "{".repeat(100_000),
        "}".repeat(100_000)
    );
    assert!(Module::load(&deep).is_err());
    // A huge variable with a short initialiser: its image is as long as the initialiser, never
    // the declared size (a GB of host memory from a line of text).
    let big_init = format!("{HEAD}.global .b8 g[1000000000] = {{1}};");
    let m = Module::load(&big_init).expect("a huge variable with a one-byte initialiser loads");
    assert_eq!(
        (m.globals()[0].size, &m.globals()[0].init[..]),
        (1_000_000_000, &[1u8][..])
    );
    let huge = format!("{HEAD}.visible .entry k() {{ .reg .b32 %r<4000000000>; ret; }}");
    assert!(Module::load(&huge).is_err());
}

#[test]
fn trap_and_misaligned_access_fault() {
    let m = load(
        ".visible .entry k() { .reg .pred %p<2>; .reg .b32 %r<2>; mov.u32 %r1, %tid.x; setp.eq.u32 %p1, %r1, 5; @%p1 trap; ret; }",
    );
    let mem = DevMem::new();
    let f = go(&m, &Shape::linear(2, 32), &[], &[], &mem).unwrap_err();
    assert_eq!(f.kind, FaultKind::Trap);
    assert_eq!((f.block, f.thread), ([0, 0, 0], [5, 0, 0]));

    let m = load(
        ".visible .entry k(.param .u64 p) { .reg .b64 %rd<2>; .reg .b32 %r<2>; ld.param.u64 %rd1, [p]; ld.global.u32 %r1, [%rd1+2]; ret; }",
    );
    let mut mem = DevMem::new();
    let d = mem.alloc(16);
    let f = go(&m, &Shape::linear(1, 1), &[Arg::Ptr(d)], &[], &mem).unwrap_err();
    assert_eq!(f.kind, FaultKind::MisalignedAddress { addr: d + 2 });
}

#[test]
fn barrier_in_divergent_code_is_reported() {
    let m = load(
        r#".visible .entry k() {
	.reg .pred %p<2>; .reg .b32 %r<2>;
	mov.u32 %r1, %tid.x;
	setp.lt.u32 %p1, %r1, 16;
	@%p1 bra $a;
	bar.sync 0;
	ret;
$a:
	bar.sync 1;
	ret;
}"#,
    );
    let mem = DevMem::new();
    let f = go(&m, &Shape::linear(1, 64), &[], &[], &mem).unwrap_err();
    assert_eq!(f.kind, FaultKind::BarrierDivergence, "{f}");
}

#[test]
fn invalid_launches_are_refused() {
    let m = fixture();
    let k = m.kernel_index("vadd").unwrap();
    let mem = DevMem::new();
    let params = [0u8; 28];
    let base = Launch {
        block: [32, 1, 1],
        ..launch(k, &params)
    };
    let bad = |l: Launch<'_>| match ptxvm::launch(&m, &l, &mem) {
        Err(f) => matches!(f.kind, FaultKind::InvalidLaunch(_)),
        Ok(_) => false,
    };
    assert!(bad(Launch {
        block: [1025, 1, 1],
        ..base.clone()
    }));
    assert!(bad(Launch {
        block: [0, 1, 1],
        ..base.clone()
    }));
    assert!(bad(Launch {
        grid: [0, 1, 1],
        ..base.clone()
    }));
    assert!(bad(Launch {
        params: &params[..20],
        ..base.clone()
    }));
    assert!(bad(Launch {
        dynamic_shared_bytes: 1 << 20,
        ..base.clone()
    }));
    assert!(bad(Launch {
        kernel: 99,
        ..base.clone()
    }));
}

/// A `Memory` whose host bytes sit one byte off the device addresses' alignment: sound under
/// the trait's contract (alignment is not part of it), so the VM must fault, never access.
struct Skewed(Box<[std::sync::atomic::AtomicU64]>);

const SKEWED_BASE: u64 = 0x10_0000;

// SAFETY: every pointer lies inside the boxed slice (checked for the whole range), which lives
// as long as `self`; its words are atomics, so the VM's accesses alias no plain reference.
unsafe impl ptxvm::Memory for Skewed {
    fn translate(&self, addr: u64, len: u64) -> Option<*mut u8> {
        // Device SKEWED_BASE is host byte 1 of the slice.
        let off = addr.checked_sub(SKEWED_BASE)?.checked_add(1)?;
        (off.checked_add(len)? <= 8 * self.0.len() as u64).then(|| {
            self.0
                .as_ptr()
                .cast::<u8>()
                .wrapping_add(off as usize)
                .cast_mut()
        })
    }
}

#[test]
fn a_host_pointer_aligned_unlike_its_device_address_is_a_misaligned_fault_not_an_access() {
    let mem = Skewed(
        (0..8)
            .map(|_| std::sync::atomic::AtomicU64::new(0))
            .collect(),
    );
    let m = load(
        ".visible .entry k(.param .u64 p)\n{\n\t.reg .b32 %r<2>;\n\t.reg .b64 %rd<2>;\n\
         \tld.param.u64 %rd1, [p];\n\tmov.u32 %r1, 7;\n\tst.global.u32 [%rd1], %r1;\n\tret;\n}\n",
    );
    for block in [1, 32] {
        let f = go(
            &m,
            &Shape::linear(1, block),
            &[Arg::Ptr(SKEWED_BASE)],
            &[],
            &mem,
        )
        .unwrap_err();
        assert_eq!(
            f.kind,
            FaultKind::MisalignedAddress { addr: SKEWED_BASE },
            "{block} threads: {f}"
        );
    }
    assert!(
        mem.0
            .iter()
            .all(|w| w.load(std::sync::atomic::Ordering::Relaxed) == 0),
        "the skewed store must not have been performed"
    );
}
