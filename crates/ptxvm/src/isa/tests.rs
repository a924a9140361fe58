//! The instruction table is whole: every implemented opcode has a sample that lowers into its
//! row's family, runs, and is classified by the sandbox as its row says; every unimplemented
//! one is unsupported at load and refused by the sandbox. An opcode cannot be half-added.

use std::sync::atomic::AtomicU64;

use super::{Family, Opcode, Sandbox};
use crate::api::{FaultKind, Launch, Memory};
use crate::ir::{ControlOp, Op};
use crate::{Error, Module};

#[path = "../../tests/all/launch.rs"]
mod launch_support;
use launch_support::launch;

/// One implemented opcode's sample: module-scope text, then the kernel body whose last line is
/// the instruction under test (the lines before it set up its operands).
fn sample(op: Opcode) -> Option<(&'static str, &'static str)> {
    use Opcode::*;
    Some(match op {
        Abs => ("", "abs.s32 %r1, %r2;"),
        Add => ("", "add.s32 %r1, %r2, %r3;"),
        Addc => ("", "add.cc.u32 %r1, %r2, %r3;\naddc.u32 %r4, %r2, %r3;"),
        And => ("", "and.b32 %r1, %r2, %r3;"),
        Bfe => ("", "bfe.u32 %r1, %r2, 4, 8;"),
        Bfi => ("", "bfi.b32 %r1, %r2, %r3, 4, 8;"),
        Bfind => ("", "bfind.u32 %r1, %r2;"),
        Bmsk => ("", "bmsk.wrap.b32 %r1, %r2, %r3;"),
        Fns => ("", "fns.b32 %r1, %r2, %r3, %r4;"),
        Szext => ("", "szext.clamp.s32 %r1, %r2, %r3;"),
        Brev => ("", "brev.b32 %r1, %r2;"),
        Clz => ("", "clz.b32 %r1, %r2;"),
        Cnot => ("", "cnot.b32 %r1, %r2;"),
        Copysign => ("", "copysign.f32 %f1, %f2, %f3;"),
        Cos => ("", "cos.approx.f32 %f1, %f2;"),
        Cvt => ("", "cvt.rn.f32.s32 %f1, %r2;"),
        Cvta => ("", "cvta.to.global.u64 %rd2, %rd1;"),
        Div => ("", "div.s32 %r1, %r2, %r3;"),
        Dp4a => ("", "dp4a.u32.u32 %r1, %r2, %r3, %r4;"),
        Ex2 => ("", "ex2.approx.f32 %f1, %f2;"),
        Fma => ("", "fma.rn.f32 %f1, %f2, %f3, %f2;"),
        Isspacep => ("", "isspacep.global %p1, %rd1;"),
        Lg2 => ("", "lg2.approx.f32 %f1, %f2;"),
        Lop3 => ("", "lop3.b32 %r1, %r2, %r3, %r4, 0x96;"),
        Mad => ("", "mad.lo.s32 %r1, %r2, %r3, %r4;"),
        Mad24 => ("", "mad24.lo.s32 %r1, %r2, %r3, %r4;"),
        Madc => (
            "",
            "mad.lo.cc.u32 %r1, %r2, %r3, %r4;\nmadc.hi.u32 %r5, %r2, %r3, %r4;",
        ),
        Max => ("", "max.s32 %r1, %r2, %r3;"),
        Min => ("", "min.s32 %r1, %r2, %r3;"),
        Mov => ("", "mov.u32 %r1, %r2;"),
        Mul => ("", "mul.lo.s32 %r1, %r2, %r3;"),
        Mul24 => ("", "mul24.lo.s32 %r1, %r2, %r3;"),
        Neg => ("", "neg.s32 %r1, %r2;"),
        Not => ("", "not.b32 %r1, %r2;"),
        Or => ("", "or.b32 %r1, %r2, %r3;"),
        Popc => ("", "popc.b32 %r1, %r2;"),
        Prmt => ("", "prmt.b32 %r1, %r2, %r3, 0x3210;"),
        Rcp => ("", "rcp.rn.f32 %f1, %f2;"),
        Rem => ("", "rem.s32 %r1, %r2, %r3;"),
        Rsqrt => ("", "rsqrt.approx.f32 %f1, %f2;"),
        Sad => ("", "sad.s32 %r1, %r2, %r3, %r4;"),
        Selp => ("", "selp.b32 %r1, %r2, %r3, %p1;"),
        Set => ("", "set.lt.u32.s32 %r1, %r2, %r3;"),
        Setp => ("", "setp.lt.s32 %p1, %r2, %r3;"),
        Shf => ("", "shf.l.wrap.b32 %r1, %r2, %r3, %r4;"),
        Shl => ("", "shl.b32 %r1, %r2, 3;"),
        Shr => ("", "shr.u32 %r1, %r2, 3;"),
        Sin => ("", "sin.approx.f32 %f1, %f2;"),
        Slct => ("", "slct.s32.s32 %r1, %r2, %r3, %r4;"),
        Sqrt => ("", "sqrt.rn.f32 %f1, %f2;"),
        Sub => ("", "sub.s32 %r1, %r2, %r3;"),
        Subc => ("", "sub.cc.u32 %r1, %r2, %r3;\nsubc.u32 %r4, %r2, %r3;"),
        Tanh => ("", "tanh.approx.f32 %f1, %f2;"),
        Testp => ("", "testp.finite.f32 %p1, %f2;"),
        Xor => ("", "xor.b32 %r1, %r2, %r3;"),
        Atom => ("", "atom.global.add.u32 %r1, [%rd1], 1;"),
        Cp => ("", "cp.async.ca.shared.global [sh], [%rd1], 4;"),
        Ld => ("", "ld.global.u32 %r1, [%rd1];"),
        Ldu => ("", "ldu.global.u32 %r1, [%rd1];"),
        Prefetch => ("", "prefetch.global.L2 [%rd1];"),
        Prefetchu => ("", "prefetchu.L1 [%rd1];"),
        Red => ("", "red.global.add.u32 [%rd1], 1;"),
        St => ("", "st.global.u32 [%rd1], %r2;"),
        Bar => ("", "bar.sync 0;"),
        Barrier => ("", "barrier.sync 0;"),
        Bra => ("", "bra $Lend;"),
        Brkpt => ("", "brkpt;"),
        Brx => (
            "",
            "mov.u32 %r1, 0;\n$Ltab: .branchtargets $Lend;\nbrx.idx %r1, $Ltab;",
        ),
        Call => (".func f()\n{\n\tret;\n}\n", "call f;"),
        Exit => ("", "exit;"),
        Fence => ("", "fence.sc.gpu;"),
        Membar => ("", "membar.gl;"),
        Nanosleep => ("", "nanosleep.u32 10;"),
        Pmevent => ("", "pmevent 1;"),
        Ret => ("", "ret;"),
        Trap => ("", "trap;"),
        Activemask => ("", "activemask.b32 %r1;"),
        Match => ("", "match.any.sync.b32 %r1, %r2, 0xffffffff;"),
        Elect => ("", "elect.sync %r1|%p1, 0xffffffff;"),
        Mma => (
            "",
            "mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%f0, %f1, %f2, %f3}, {%r1, %r2}, \
             {%r3}, {%f0, %f1, %f2, %f3};",
        ),
        Movmatrix => ("", "movmatrix.sync.aligned.m8n8.trans.b16 %r1, %r2;"),
        Ldmatrix => ("", "ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%r1}, [sh];"),
        Mbarrier => ("", "mbarrier.init.shared.b64 [sh], 1;"),
        Wmma => (
            "",
            "wmma.mma.sync.aligned.row.col.m16n16k16.f32.f32 {%f0, %f1, %f2, %f3, %f0, %f1, \
             %f2, %f3}, {%r1, %r2, %r3, %r4, %r5, %r6, %r7, %r1}, {%r1, %r2, %r3, %r4, %r5, %r6, \
             %r7, %r1}, {%f0, %f1, %f2, %f3, %f0, %f1, %f2, %f3};",
        ),
        Stmatrix => (
            "",
            "stmatrix.sync.aligned.m8n8.x1.trans.shared.b16 [sh], {%r2};",
        ),
        Redux => ("", "redux.sync.add.u32 %r1, %r2, 0xffffffff;"),
        Shfl => ("", "shfl.sync.down.b32 %r1|%p1, %r2, 1, 0x1f, 0xffffffff;"),
        Vote => ("", "vote.sync.ballot.b32 %r1, %p1, 0xffffffff;"),
        Tex => (
            "",
            "mov.u64 %rd2, 1;\ntex.2d.v4.f32.f32 {%f1, %f2, %f3, %f1}, [%rd2, {%f2, %f3}];",
        ),
        Txq => ("", "mov.u64 %rd2, 1;\ntxq.width.b32 %r1, [%rd2];"),
        Tld4 => (
            "",
            "mov.u64 %rd2, 1;\ntld4.g.2d.v4.f32.f32 {%f1, %f2, %f3, %f1}, [%rd2, {%f2, %f3}];",
        ),
        Suld => (
            "",
            "mov.u64 %rd2, 2;\nmov.u32 %r5, 8;\nsuld.b.2d.v2.b32.trap {%r1, %r6}, [%rd2, {%r5, %r3}];",
        ),
        Sust => (
            "",
            "mov.u64 %rd2, 2;\nmov.u32 %r5, 4;\nsust.b.1d.b32.zero [%rd2, {%r5}], %r3;",
        ),
        Suq => ("", "mov.u64 %rd2, 2;\nsuq.height.b32 %r1, [%rd2];"),
        _ => return None,
    })
}

/// A kernel around `body`, its operands set up; returns the text and the line of `body`'s last
/// line.
fn kernel(module_scope: &str, body: &str) -> (String, u32) {
    let head = format!(
        ".version 8.0\n.target sm_90\n.address_size 64\n{module_scope}\
         .visible .entry k(.param .u64 p)\n{{\n\
         \t.reg .b32 %r<8>;\n\t.reg .b64 %rd<4>;\n\t.reg .f32 %f<4>;\n\t.reg .pred %p<2>;\n\
         \t.shared .align 16 .b8 sh[64];\n\
         \tld.param.u64 %rd1, [p];\n\tmov.u32 %r2, 6;\n\tmov.u32 %r3, 3;\n\tmov.u32 %r4, 2;\n\
         \tmov.f32 %f2, 0f3F800000;\n\tmov.f32 %f3, 0f40000000;\n\tsetp.ne.s32 %p1, %r2, 0;\n"
    );
    let line = (head.lines().count() + body.lines().count()) as u32;
    (format!("{head}{body}\n$Lend:\n\tret;\n}}\n"), line)
}

/// 256 bytes of device memory the samples' pointer addresses.
struct Words(Box<[AtomicU64]>);

// SAFETY: every pointer lies inside the boxed slice (checked for the whole range), which lives
// as long as `self`; its words are atomics, so the VM's accesses alias no plain reference.
unsafe impl Memory for Words {
    fn translate(&self, addr: u64, len: u64) -> Option<*mut u8> {
        let off = addr.checked_sub(self.0.as_ptr() as u64)?;
        (off.checked_add(len)? <= 8 * self.0.len() as u64).then(|| {
            self.0
                .as_ptr()
                .cast::<u8>()
                .wrapping_add(off as usize)
                .cast_mut()
        })
    }

    /// Handle 1: a 4×4 one-channel f32 texture over the words; handle 2: the same as a surface.
    fn texture(&self, handle: u64) -> Option<crate::image::Texture> {
        use crate::image::{AddressMode, FilterMode, Sampler, Texture};
        (handle == 1).then(|| Texture {
            image: self.image(),
            sampler: Sampler {
                address: [AddressMode::Clamp; 3],
                filter: FilterMode::Linear,
                normalized_coords: false,
                read_as_integer: false,
                border: [0.0; 4],
            },
        })
    }

    fn surface(&self, handle: u64) -> Option<crate::image::Surface> {
        (handle == 2).then(|| crate::image::Surface {
            image: self.image(),
        })
    }
}

impl Words {
    fn image(&self) -> crate::image::Image {
        crate::image::Image {
            base: self.0.as_ptr() as u64,
            format: crate::image::TexelFormat::F32,
            channels: 1,
            width: 4,
            height: 4,
            depth: 1,
            row_pitch: 16,
            slice_pitch: 64,
            linear: false,
        }
    }
}

fn run(m: &Module) -> Result<(), FaultKind> {
    let mem = Words((0..32).map(|_| AtomicU64::new(0)).collect());
    let params = (mem.0.as_ptr() as u64).to_le_bytes();
    let l = Launch {
        block: [32, 1, 1],
        ..launch(0, &params)
    };
    crate::launch(m, &l, &mem).map(|_| ()).map_err(|f| f.kind)
}

#[test]
fn names_are_unique_and_parse_back_to_their_opcode() {
    for &op in Opcode::ALL {
        assert_eq!(Opcode::parse(op.name()), Some(op), "{op}");
    }
    assert_eq!(Opcode::parse("notanopcode"), None);
    // The hashed lookup compares the whole name: neither a prefix nor an extension matches.
    for miss in [
        "",
        "a",
        "ad",
        "adx",
        "dda",
        "adds",
        "xor_",
        "clusterlaunchcontrolx",
    ] {
        assert_eq!(Opcode::parse(miss), None, "{miss}");
    }
}

#[test]
fn every_implemented_opcode_lowers_into_its_family_runs_and_is_classified_by_the_sandbox() {
    let mut checked = 0;
    for &op in Opcode::ALL {
        if op.family() == Family::Unimplemented {
            assert!(
                sample(op).is_none(),
                "{op} is unimplemented but has a sample"
            );
            continue;
        }
        let (scope, body) = sample(op)
            .unwrap_or_else(|| panic!("{op} is implemented but has no sample in isa/tests.rs"));
        let (text, line) = kernel(scope, body);
        let m = Module::load(&text).unwrap_or_else(|e| panic!("{op}: {e}\n{text}"));
        let k = m.kernel(0).unwrap();
        let ops: Vec<&Op> = k
            .code
            .iter()
            .filter(|i| i.line == line)
            .map(|i| &i.op)
            .collect();
        assert!(
            !ops.is_empty(),
            "{op}: no op decoded at line {line}\n{text}"
        );
        for o in ops {
            assert!(
                o.family() == op.family() || *o == Op::Control(ControlOp::Nop),
                "{op} is in family {:?} but lowers to {o:?}",
                op.family()
            );
        }
        let ran = run(&m);
        match op {
            Opcode::Trap | Opcode::Brkpt => assert_eq!(ran, Err(FaultKind::Trap), "{op}"),
            _ => assert_eq!(ran, Ok(()), "{op}\n{text}"),
        }
        match (
            op.sandbox(),
            crate::sandbox::sandbox(&text, &Default::default()),
        ) {
            (Sandbox::Refuse(why), Err(Error::Refused { what, .. })) => {
                assert_eq!(what, why.message(op.name()), "{op}")
            }
            (Sandbox::Refuse(_), other) => panic!("{op} must be refused, got {other:?}"),
            (_, Ok(s)) => {
                Module::load(&s.ptx).unwrap_or_else(|e| panic!("{op} rewritten: {e}"));
            }
            (_, Err(e)) => panic!("{op} must be allowed by the sandbox: {e}"),
        }
        checked += 1;
    }
    assert!(checked > 70, "only {checked} implemented opcodes");
}

#[test]
fn every_unimplemented_opcode_is_unsupported_at_load_and_refused_by_the_sandbox() {
    for &op in Opcode::ALL {
        if op.family() != Family::Unimplemented {
            continue;
        }
        let (text, _) = kernel("", &format!("{op}.b32 %r1, %r2;"));
        match Module::load(&text) {
            Err(Error::Unsupported { what, .. }) => assert_eq!(what, format!("instruction {op}")),
            other => panic!("{op}: {other:?}"),
        }
        assert!(
            matches!(op.sandbox(), Sandbox::Refuse(_)),
            "{op}: the sandbox must not allow what ptxvm cannot run"
        );
        assert!(
            matches!(
                crate::sandbox::sandbox(&text, &Default::default()),
                Err(Error::Refused { .. })
            ),
            "{op}"
        );
    }
}
