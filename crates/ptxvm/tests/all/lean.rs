//! Red-team checks of lean device functions (a `.func` that reads no hidden value keeps its
//! own signature): the optimisation applies to a helper that only computes, and never to a
//! function that fences or calls one that does, whose writes stay fenced.

use super::redteam::{attack_in, ptx};
use super::sandbox::{Arg, Shape, load_sandboxed};

/// `pure` only computes; `leaky` calls it, then writes through the attacker's pointer; `relay`
/// only calls `leaky`. The kernel calls `relay` with the attacker's pointer, then stores
/// `pure(5)` to its output.
const LEAN: &str = "\
.func (.param .b32 r) pure(.param .b32 x)\n{\n .reg .b32 %r<4>;\n ld.param.u32 %r1, [x];\n\
 mad.lo.s32 %r2, %r1, 3, 1;\n st.param.b32 [r], %r2;\n ret;\n}\n\
.func leaky(.param .b64 p)\n{\n .reg .b64 %rd<2>;\n .reg .b32 %r<3>;\n\
 ld.param.u64 %rd1, [p];\n\
 { .param .b32 a0;\n st.param.b32 [a0], 7;\n .param .b32 r0;\n\
 call.uni (r0), pure, (a0);\n ld.param.b32 %r1, [r0];\n }\n\
 st.global.u32 [%rd1], %r1;\n ret;\n}\n\
.func relay(.param .b64 p)\n{\n .reg .b64 %rd<2>;\n ld.param.u64 %rd1, [p];\n\
 { .param .b64 a0;\n st.param.b64 [a0], %rd1;\n call.uni leaky, (a0);\n }\n ret;\n}\n\
.visible .entry lean(.param .u64 p, .param .u64 out)\n{\n .reg .b64 %rd<3>;\n .reg .b32 %r<2>;\n\
 ld.param.u64 %rd1, [p];\n ld.param.u64 %rd2, [out];\n\
 { .param .b64 a0;\n st.param.b64 [a0], %rd1;\n call.uni relay, (a0);\n }\n\
 { .param .b32 b0;\n st.param.b32 [b0], 5;\n .param .b32 r0;\n\
 call.uni (r0), pure, (b0);\n ld.param.b32 %r1, [r0];\n }\n\
 st.global.u32 [%rd2], %r1;\n ret;\n}\n";

/// The parameter list of function `name` in rewritten PTX.
fn signature<'a>(ptx: &'a str, name: &str) -> &'a str {
    let at = ptx
        .find(&format!(") {name}("))
        .or_else(|| ptx.find(&format!(" {name}(")));
    let rest = &ptx[at.unwrap_or_else(|| panic!("{name} in\n{ptx}"))..];
    &rest[..rest.find(')').map_or(rest.len(), |e| e + 1)]
}

#[test]
fn a_device_function_that_reads_no_hidden_value_keeps_its_signature_and_callers_stay_fenced() {
    let (s, m) = load_sandboxed(&ptx(LEAN));
    // `pure` is lean: nothing to fence or poll, so no hidden parameters to pass at each call.
    let pure = &s.ptx[s.ptx.find(") pure(").unwrap()..];
    let pure = &pure[..pure.find('}').unwrap()];
    assert!(
        !pure.contains("__sbx_"),
        "pure gets no hidden values:\n{pure}"
    );
    // `leaky` fences, and `relay` only calls it: both still receive every hidden value.
    for f in ["leaky", "relay"] {
        assert!(
            signature(&s.ptx, f).contains("__gpuhost_sbx_base"),
            "{f} passes the hidden values on:\n{}",
            s.ptx
        );
    }
    let mut out = 0;
    let mem = attack_in(
        &m,
        "lean",
        Shape::linear(1, 32),
        |m| {
            out = m.alloc(4);
            vec![Arg::U64(m.victim()), Arg::U64(out)]
        },
        true,
    );
    assert_eq!(
        mem.read(out, 4),
        (5u32 * 3 + 1).to_le_bytes(),
        "pure's result came back"
    );
}
