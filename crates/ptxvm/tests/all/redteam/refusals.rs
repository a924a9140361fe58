//! Red-team attacks the sandbox refuses at load, naming the line: trap, brkpt, recursion,
//! indirect calls, textures, surfaces, externs, barriers that can leave threads waiting, a
//! name defined twice, and a relocated variable named where it is not relocated.

use super::*;

pub(super) fn refused(body: &str) -> (u32, String) {
    match sandbox(&ptx(body), &Policy::default()) {
        Err(Error::Refused { line, what }) => (line, what),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn trap_brkpt_recursion_indirect_calls_textures_surfaces_and_externs_are_refused() {
    let cases: &[(&str, u32, &str)] = &[
        (".visible .entry k() {\n trap;\n}", 5, "trap"),
        (".visible .entry k() {\n brkpt;\n}", 5, "brkpt"),
        (".visible .entry k() {\n pmevent 1;\n}", 5, "pmevent"),
        (
            ".func f() {\n call g;\n ret;\n}\n.func g() {\n call f;\n ret;\n}\n\
             .visible .entry k() {\n call f;\n}",
            9,
            "recursive",
        ),
        (
            ".func f() {\n call f;\n ret;\n}\n.visible .entry k() {\n call f;\n}",
            5,
            "recursive",
        ),
        (
            ".visible .entry k(.param .u64 p) {\n .reg .b64 %rd1;\n ld.param.u64 %rd1, [p];\n \
             call %rd1;\n}",
            7,
            "indirect",
        ),
        (
            ".extern .func ext(.param .b32 a);\n.visible .entry k() {\n ret;\n}",
            4,
            "not defined",
        ),
        (
            ".visible .entry k(.param .u64 t) {\n .reg .f32 %f<5>;\n .reg .b32 %r<3>;\n \
             tex.2d.v4.f32.s32 {%f1, %f2, %f3, %f4}, [t, {%r1, %r2}];\n}",
            7,
            "texture",
        ),
        // Object handles in registers, the form ptxvm now runs unsandboxed: still refused.
        (
            ".visible .entry k(.param .u64 t) {\n .reg .b64 %rd1;\n .reg .b32 %r<3>;\n \
             ld.param.u64 %rd1, [t];\n suld.b.2d.b32.trap {%r1}, [%rd1, {%r1, %r2}];\n}",
            8,
            "texture",
        ),
        (
            ".visible .entry k(.param .u64 t) {\n .reg .b64 %rd1;\n .reg .b32 %r<3>;\n \
             ld.param.u64 %rd1, [t];\n sust.b.1d.b32.zero [%rd1, {%r1}], %r2;\n}",
            8,
            "texture",
        ),
        (
            ".visible .entry k(.param .u64 t) {\n .reg .b64 %rd1;\n .reg .f32 %f<5>;\n \
             ld.param.u64 %rd1, [t];\n tld4.r.2d.v4.f32.f32 {%f1, %f2, %f3, %f4}, [%rd1, {%f1, %f2}];\n}",
            8,
            "texture",
        ),
        (
            ".visible .entry k() {\n .reg .b32 %r1;\n mapa.u32 %r1, %r1, 0;\n}",
            6,
            "allow-list",
        ),
        (
            ".global .u32 a;\n.global .u64 p = a;\n.visible .entry k() { ret; }",
            5,
            "address",
        ),
        (
            ".visible .entry k() {\n .reg .b64 %rd1;\n ld.param.u64 %rd1, [__gpuhost_sbx_ctl];\n}",
            6,
            "reserved",
        ),
        (
            ".visible .entry k() {\n .reg .b64 %rd1;\n ld.shared::cluster.u32 %rd1, [%rd1];\n}",
            6,
            "shared::cluster",
        ),
        (
            ".visible .entry k() {\n .reg .b64 %rd1;\n \
             fence.proxy.tensormap::generic.acquire.gpu [%rd1], 128;\n}",
            6,
            "memory operand",
        ),
    ];
    for (src, line, word) in cases {
        let (l, what) = refused(src);
        assert_eq!(l, *line, "{src}: {what}");
        assert!(what.contains(word), "{src}: {what}");
    }
}

#[test]
fn barriers_that_can_leave_threads_waiting_are_refused_and_whole_block_barrier_zero_is_allowed() {
    // Two barrier ids, a thread count, `arrive` or a predicate can leave threads waiting
    // forever, where no poll runs; ptxvm faults such a launch, which on softcuda ends every
    // guest of the process.
    let k = |body: &str| {
        format!(".visible .entry k() {{\n .reg .b32 %r1;\n .reg .pred %p1;\n {body}\n ret;\n}}")
    };
    for body in [
        "bar.sync 1;",
        "bar.sync 0, 64;",
        "bar.sync %r1;",
        "barrier.sync 2;",
        "bar.arrive 0, 64;",
        "@%p1 bar.sync 0;",
        "bar.red.popc.u32 %r1, 1, %p1;",
        "bar.red.popc.u32 %r1, 0, 64, %p1;",
    ] {
        let (line, what) = refused(&k(body));
        assert_eq!(line, 7, "{body}: {what}");
        assert!(
            what.contains("barrier 0 for the whole block"),
            "{body}: {what}"
        );
    }
    for body in [
        "bar.sync 0;",
        "barrier.sync 0;",
        "bar.red.popc.u32 %r1, 0, %p1;",
        "bar.warp.sync -1;",
    ] {
        sandbox(&ptx(&k(body)), &Policy::default()).unwrap_or_else(|e| panic!("{body}: {e}"));
    }
}

#[test]
fn a_name_defined_twice_is_invalid_whether_entry_or_device_function() {
    // The host finds a kernel by name: two entries named alike could pair the second's code with
    // the first's parameter count and frame sizes. NVIDIA's JIT refuses such a module too.
    let k = |n: u32| {
        format!(
            ".visible .entry k(.param .u64 p{n}) {{\n .reg .b64 %rd1;\n ld.param.u64 %rd1, [p{n}];\n st.global.u32 [%rd1], {n};\n ret;\n}}\n"
        )
    };
    let f = ".func k() {\n ret;\n}\n";
    let cases = [
        (format!("{}{}", k(1), k(2)), 10),
        (format!("{}{}", k(1), f), 10),
        (format!("{f}{}", k(1)), 7),
        (format!("{f}{f}"), 7),
        // A declaration ahead of both does not make either of them the one definition.
        (format!(".func k();\n{}{}", k(1), k(2)), 11),
    ];
    for (src, line) in cases {
        match sandbox(&ptx(&src), &Policy::default()) {
            Err(Error::Invalid { line: l, msg }) => {
                assert_eq!(l, line, "{src}: {msg}");
                assert_eq!(msg, "function k defined twice", "{src}");
            }
            other => panic!("{src}: expected the second definition refused, got {other:?}"),
        }
    }
    // One definition with a declaration ahead of it stays allowed.
    sandbox(
        &ptx(&format!(".func g();\n.func g() {{\n ret;\n}}\n{}", k(1))),
        &Policy::default(),
    )
    .unwrap();
}

#[test]
fn a_relocated_variable_named_outside_an_address_is_refused_not_left_dangling() {
    // Relocation removes `.global`/`.const` declarations and rewrites each access and each
    // address taken with `mov`/`cvta`. A name anywhere else (a value operand, a vector member,
    // a call argument) was copied as written, and the rewritten module failed to load, naming
    // a variable the guest had declared (found by redteam::shapes::mangled_modules...).
    let head = ".const .align 4 .b32 tbl[4] = {10, 20, 30, 40};\n.global .u32 counter;\n";
    let body = |inst: &str| {
        format!(
            "{head}.func f(.param .u64 a) {{\n ret;\n}}\n.visible .entry k(.param .u64 o) {{\n .reg .b64 %rd<4>;\n .reg .b32 %r<4>;\n ld.param.u64 %rd1, [o];\n {inst}\n ret;\n}}\n"
        )
    };
    let cases = [
        ("atom.global.add.u32 %r1, [counter], tbl;", "atom"),
        ("atom.global.add.u32 %r1, [%rd1], tbl;", "atom"),
        ("st.global.u32 [%rd1], tbl;", "st"),
        ("st.global.v2.u32 [%rd1], {tbl, %r1};", "st"),
        ("add.u64 %rd2, tbl, 4;", "add"),
        ("mov.b64 %rd2, {tbl, %r1};", "mov"),
        ("nanosleep.u32 tbl;", "nanosleep"),
        ("call f, (tbl);", "call"),
        // The warp's matrix instructions, whose rewrites print their operands as written.
        (
            "stmatrix.sync.aligned.m8n8.x1.shared.b16 [%rd1], {tbl};",
            "stmatrix",
        ),
        (
            "wmma.store.d.sync.aligned.row.m16n16k16.global.f32 [%rd1], {tbl, %r1, %r1, %r1, %r1, %r1, %r1, %r1}, 16;",
            "wmma",
        ),
        (
            "wmma.mma.sync.aligned.row.col.m16n16k16.f32.f32 {%r1, %r1, %r1, %r1, %r1, %r1, %r1, %r1}, {tbl, %r1, %r1, %r1, %r1, %r1, %r1, %r1}, {%r1, %r1, %r1, %r1, %r1, %r1, %r1, %r1}, {%r1, %r1, %r1, %r1, %r1, %r1, %r1, %r1};",
            "wmma",
        ),
    ];
    for (inst, opcode) in cases {
        let (line, what) = refused(&body(inst));
        assert_eq!(line, 13, "{inst}: {what}");
        assert_eq!(
            what,
            format!(
                "{opcode} uses the .global/.const variable tbl directly; take its address with mov.u64 first"
            ),
            "{inst}"
        );
    }
    // Where the rewriter relocates the name, it stays allowed: an access and an address taken.
    for inst in [
        "atom.global.add.u32 %r1, [counter], 1;",
        "ld.const.u32 %r2, [tbl+12];",
        "mov.u64 %rd2, tbl;",
        "cvta.const.u64 %rd2, tbl;",
    ] {
        let src = ptx(&body(inst));
        let s = sandbox(&src, &Policy::default()).unwrap_or_else(|e| panic!("{inst}: {e}"));
        ptxvm::Module::load(&s.ptx).unwrap_or_else(|e| panic!("{inst}: {e}"));
    }
}
