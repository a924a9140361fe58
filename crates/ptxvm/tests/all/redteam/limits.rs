//! Red-team attacks on sizes: deep call chains with locals, oversized globals, long chains of
//! registers feeding an address, and a module whose rewrite would outgrow the output limit.

use super::*;

/// A chain of `depth` device functions, each with its own local array, passing the attacker's
/// pointer down; the innermost writes through it (and 4 MiB past it).
fn chain(depth: usize) -> String {
    let mut s = String::new();
    s.push_str(&format!(
        ".func (.param .b32 r) f{depth}(.param .b64 p, .param .b32 x)\n{{\n\
         .reg .b64 %rd<4>;\n .reg .b32 %r<4>;\n .local .align 4 .b8 d[8];\n\
         ld.param.u64 %rd1, [p];\n ld.param.u32 %r1, [x];\n st.local.u32 [d], %r1;\n\
         ld.local.u32 %r2, [d];\n st.global.u32 [%rd1], %r2;\n\
         st.global.u32 [%rd1+4194304], %r2;\n\
         st.param.b32 [r], %r2;\n ret;\n}}\n"
    ));
    for k in (1..depth).rev() {
        s.push_str(&format!(
            ".func (.param .b32 r) f{k}(.param .b64 p, .param .b32 x)\n{{\n\
             .reg .b64 %rd<4>;\n .reg .b32 %r<4>;\n .local .align 4 .b8 d[16];\n\
             ld.param.u64 %rd1, [p];\n ld.param.u32 %r1, [x];\n add.u32 %r1, %r1, 1;\n\
             st.local.u32 [d+12], %r1;\n ld.local.u32 %r1, [d+12];\n\
             {{\n .param .b64 a0;\n st.param.b64 [a0], %rd1;\n .param .b32 a1;\n\
             st.param.b32 [a1], %r1;\n .param .b32 r0;\n\
             call.uni (r0), f{next}, (a0, a1);\n ld.param.b32 %r2, [r0];\n }}\n\
             st.param.b32 [r], %r2;\n ret;\n}}\n",
            next = k + 1
        ));
    }
    s.push_str(
        ".visible .entry deep(.param .u64 out)\n{\n .reg .b64 %rd<2>;\n .reg .b32 %r<2>;\n\
         ld.param.u64 %rd1, [out];\n\
         { .param .b64 a0;\n st.param.b64 [a0], %rd1;\n .param .b32 a1;\n st.param.b32 [a1], 0;\n\
         .param .b32 r0;\n call.uni (r0), f1, (a0, a1);\n ld.param.b32 %r1, [r0];\n }\n\
         st.global.u32 [%rd1+8], %r1;\n ret;\n}\n",
    );
    s
}

#[test]
fn deep_call_chains_keep_fencing_and_count_their_locals() {
    let depth = 24;
    let src = ptx(&chain(depth));
    let (s, m) = load_sandboxed(&src);
    assert_eq!(
        s.kernels[0].local_bytes_per_thread,
        16 * (depth as u64 - 1) + 8,
        "local bytes along the deepest chain"
    );
    let mut out = 0;
    let mem = attack_in(
        &m,
        "deep",
        Shape::linear(1, 32),
        |m| {
            out = m.alloc(16);
            vec![Arg::U64(out)]
        },
        true,
    );
    let want = (depth as u32 - 1).to_le_bytes();
    assert_eq!(
        mem.read(out, 4),
        want,
        "the innermost call saw every increment"
    );
    assert_eq!(
        mem.read(out + 8, 4),
        want,
        "the result came back up the chain"
    );
}

#[test]
fn an_endless_loop_deep_in_a_call_chain_exits_when_the_epoch_changes() {
    abort_after("deep_spin", Duration::from_millis(50), true);
}

#[test]
fn oversized_globals_report_their_size_for_the_host_to_refuse_and_no_image_spans_them() {
    let kernel = ".visible .entry k(.param .u64 o) {\n .reg .b64 %rd<3>;\n\
                  mov.u64 %rd1, big;\n ld.param.u64 %rd2, [o];\n st.global.u64 [%rd2], %rd1;\n}";
    // The constant first: the initial image ends with it, and the host sees the block's size.
    let src = format!(
        ".const .b32 c[4] = {{1, 2, 3, 4}};\n.global .align 16 .b8 big[900000000];\n{kernel}"
    );
    let s = sandbox(&ptx(&src), &Policy::default()).unwrap();
    assert_eq!(s.globals.size, 900_000_016);
    assert_eq!(
        s.globals.init.len(),
        16,
        "the zero tail is not materialised"
    );
    assert!(Module::load(&s.ptx).is_ok());
    // The constant after 900 MB of zeros: its image would span them (host memory the size of
    // the gap, from a few hundred bytes of text), so it is refused, naming it.
    let src = format!(
        ".global .align 16 .b8 big[900000000];\n.const .b32 c[4] = {{1, 2, 3, 4}};\n{kernel}"
    );
    match sandbox(&ptx(&src), &Policy::default()) {
        Err(Error::Refused { what, .. }) => {
            assert!(
                what.contains("initialised variable c ends 900000016 bytes"),
                "{what}"
            )
        }
        other => panic!("{:?}", other.map(|s| s.globals.size)),
    }
}

#[test]
fn a_long_chain_of_dependent_registers_feeding_an_address_is_rewritten_on_a_host_call_sized_stack()
{
    // 20,000 adds, each reading the last, then a shared store at the chain's end: the bounds
    // analysis followed the chain one recursion per add and overflowed the stack, which aborts
    // the process. Rewritten on a 1 MiB stack: less than a host call has on wasmtime's async
    // fiber (2 MiB, less the guest's own 512 KiB), where a guest's module load runs.
    let n = 20_000;
    let mut body = format!(
        ".reg .b32 %r<{}>;\n.reg .b64 %rd<4>;\n.shared .align 4 .b8 sm[1024];\nmov.u32 %r0, 0;\n",
        n + 1
    );
    for i in 0..n {
        body += &format!("add.u32 %r{}, %r{i}, 1;\n", i + 1);
    }
    body += &format!(
        "cvt.u64.u32 %rd1, %r{n};\nmov.u64 %rd2, sm;\nadd.u64 %rd3, %rd2, %rd1;\n\
         st.shared.u8 [%rd3], 1;\nret;\n"
    );
    let src = ptx(&format!(".visible .entry k(.param .u64 o)\n{{\n{body}}}\n"));
    let rewritten = std::thread::Builder::new()
        .stack_size(1 << 20)
        .spawn(move || {
            let text = sandbox(&src, &Policy::default()).expect("rewritten").ptx;
            // softcuda loads it there too.
            let loaded = Module::load(&text).map(drop);
            (text, loaded)
        })
        .unwrap()
        .join()
        .expect("the rewrite and the load end");
    assert!(rewritten.0.contains("st.shared.u8"), "the store is kept");
    assert!(rewritten.1.is_ok(), "{:?}", rewritten.1);
}

#[test]
fn a_module_whose_rewrite_would_outgrow_the_output_limit_is_refused_saying_to_split_it() {
    // A call chain: each function's prologue and call marshalling grow it about 20 times, the
    // shape that makes the most JIT input per byte of a guest's text.
    let mut src = String::new();
    for i in (0..200).rev() {
        let call = if i < 199 {
            format!(
                "{{ .param .b64 q; st.param.b64 [q], %rd1; call f{}, (q); }}\n",
                i + 1
            )
        } else {
            String::new()
        };
        src += &format!(
            ".func f{i}(.param .b64 p)\n{{\n.reg .b64 %rd<2>;\nld.param.u64 %rd1, [p];\n\
             st.global.u32 [%rd1], 1;\n{call}ret;\n}}\n"
        );
    }
    src += ".visible .entry k(.param .u64 o)\n{\n.reg .b64 %rd<2>;\nld.param.u64 %rd1, [o];\n\
            { .param .b64 q; st.param.b64 [q], %rd1; call f0, (q); }\nret;\n}\n";
    let src = ptx(&src);
    let out = sandbox(&src, &Policy::default())
        .expect("within the default limit")
        .ptx;
    assert!(out.len() > 10 * src.len(), "{} -> {}", src.len(), out.len());
    let small = Policy {
        max_output_bytes: out.len() / 2,
        ..Policy::default()
    };
    match sandbox(&src, &small) {
        Err(Error::Refused { what, .. }) => assert!(what.contains("split the module"), "{what}"),
        other => panic!("{:?}", other.map(|s| s.ptx.len())),
    }
}
