//! Red-team shapes of code the rewrite must keep right: relocated globals, the softcuda
//! watchdog, poll intervals, runs sharing a fence, mangled text, generic accesses in every
//! window, cp.async, a load replacing its own base, and jump tables.

use super::*;

#[test]
fn relocated_globals_and_constants_are_read_and_written_in_the_globals_block() {
    let (_, s, m) = fixture();
    assert_eq!(s.globals.size, 32);
    let mut mem = GuestMem::new();
    let out = mem.alloc(16);
    let g = mem.alloc(s.globals.size as usize);
    mem.write(g, &s.globals.init);
    mem.ctl_word(0).store(EPOCH, Ordering::SeqCst);
    let hidden = Hidden {
        globals: g,
        epoch: EPOCH,
    };
    run_sandboxed(
        m,
        "globals_rw",
        Shape::linear(1, 4),
        &[Arg::U64(out)],
        &hidden,
        &mem,
    )
    .unwrap();
    assert_eq!(
        mem.read(g, 4),
        4u32.to_le_bytes(),
        "four atomic increments of counter"
    );
    let got: Vec<u8> = mem.read(out, 16);
    let want: Vec<u8> = [50u32, 60, 70, 80]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    assert_eq!(got, want);
    assert_eq!(
        mem.ctl_word(FAULT).load(Ordering::SeqCst),
        TAG,
        "counter+4 MiB (past the arena) was fenced"
    );
    mem.assert_victim_safe();
}

#[test]
fn the_watchdog_stops_an_unrewritten_endless_kernel() {
    let m = Module::load(&fixture().0).unwrap();
    let kernel = m.kernel_index("endless").unwrap();
    let mut mem = GuestMem::new();
    let out = mem.alloc(8);
    let globals: Vec<u64> = m.globals().iter().map(|_| mem.alloc(64)).collect();
    let params = out.to_le_bytes();
    let cancel = std::sync::atomic::AtomicBool::new(false);
    for by_flag in [false, true] {
        let l = Launch {
            grid: [2, 1, 1],
            block: [32, 1, 1],
            globals: &globals,
            cancel: by_flag.then_some(&cancel),
            deadline: (!by_flag).then(|| std::time::Instant::now() + Duration::from_millis(20)),
            ..launch(kernel, &params)
        };
        let r = std::thread::scope(|s| {
            let h = s.spawn(|| ptxvm::launch(&m, &l, &mem));
            if by_flag {
                std::thread::sleep(Duration::from_millis(20));
                cancel.store(true, Ordering::SeqCst);
            }
            h.join().unwrap()
        });
        let f = r.expect_err("the endless kernel was stopped");
        assert_eq!(f.kind, FaultKind::Timeout);
        assert!(f.to_string().contains("watchdog"), "{f}");
    }
}

#[test]
fn poll_interval_must_be_a_power_of_two_and_one_polls_every_back_edge() {
    for bad in [0, 3, 1000] {
        let r = sandbox(
            &fixture().0,
            &Policy {
                poll_interval: bad,
                ..Policy::default()
            },
        );
        assert!(matches!(r, Err(Error::Refused { line: 0, .. })), "{bad}");
    }
    let s = sandbox(
        &fixture().0,
        &Policy {
            poll_interval: 1,
            ..Policy::default()
        },
    )
    .unwrap();
    let m = Module::load(&s.ptx).unwrap();
    let (n, mut out) = (5000u32, 0);
    let mem = attack_in(
        &m,
        "long",
        Shape::linear(1, 32),
        |g| {
            out = g.alloc(4);
            vec![Arg::U64(out), Arg::U32(n)]
        },
        false,
    );
    let want = (0..n).fold(0u32, |a, i| a.wrapping_add(i));
    assert_eq!(mem.read(out, 4), want.to_le_bytes());
}

#[test]
fn runs_sharing_one_fence_work_in_range_and_are_fenced_as_a_whole() {
    // In range: the run's values come through.
    let mut out = 0;
    let mem = attack(
        "runs",
        Shape::linear(1, 1),
        |m| {
            let buf = m.alloc(32);
            let words: Vec<u8> = (0u32..8).flat_map(|v| (v * 11).to_le_bytes()).collect();
            m.write(buf, &words);
            out = m.alloc(16);
            vec![Arg::U64(buf), Arg::U64(out), Arg::U32(0)]
        },
        false,
    );
    let want: Vec<u8> = [0u32, 22, 44, 2]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    assert_eq!(mem.read(out, 16), want);
    // The global run reaches the victim; then the shared run passes its variable's end.
    attack(
        "runs",
        Shape::linear(1, 1),
        |m| vec![Arg::U64(m.victim() - 8), Arg::U64(m.alloc(16)), Arg::U32(0)],
        true,
    );
    attack(
        "runs",
        Shape::linear(1, 1),
        |m| vec![Arg::U64(m.alloc(32)), Arg::U64(m.alloc(16)), Arg::U32(8)],
        true,
    );
}

#[test]
fn mangled_modules_are_rewritten_or_refused_never_a_panic() {
    // Deterministic mutations of the red-team module and of every nvcc corpus module (and the
    // clang tensor-core one, and testkit's mbarrier programs):
    // truncations, deleted, duplicated and moved spans, swapped bytes, huge offsets. Every
    // outcome is a value, and rewritten output loads. `SANDBOX_MANGLE_ROUNDS` (300) and
    // `SANDBOX_MANGLE_SEED` run a longer sweep, e.g. `SANDBOX_MANGLE_ROUNDS=1000000 cargo test
    // --release -p ptxvm --test all mangled`.
    let env = |k: &str| std::env::var(k).ok().and_then(|v| v.parse::<u64>().ok());
    let rounds = env("SANDBOX_MANGLE_ROUNDS").unwrap_or(300);
    let mut seed = env("SANDBOX_MANGLE_SEED")
        .unwrap_or(0x2545_f491_4f6c_dd1d)
        .max(1);
    let mut bases = vec![fixture().0.clone()];
    let dir = std::env::var("CARGO_MANIFEST_DIR").unwrap();
    let corpus = format!("{dir}/../../corpus/nvcc");
    let mut names: Vec<_> = std::fs::read_dir(&corpus)
        .expect("corpus/nvcc")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "ptx"))
        .collect();
    // The tensor-core module's clang flavour too: its wmma kernels of every type are newer than
    // its nvcc flavour (session 36).
    names.push(format!("{dir}/../../corpus/clang/mma_gemm.ptx").into());
    names.sort();
    bases.extend(names.iter().map(|p| std::fs::read_to_string(p).unwrap()));
    // And testkit's mbarrier programs (session 40): the sandbox's own parsing of mbarrier's
    // modifiers and operands (sandbox/mbarrier.rs) meets mangled forms of every one.
    use testkit::mbarrier::{GENERIC, HEAD, RING, attacks};
    bases.extend([
        attacks(),
        format!("{HEAD}{RING}"),
        format!("{HEAD}{GENERIC}"),
    ]);
    let mut next = move |n: usize| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % n.max(1) as u64) as usize
    };
    let mut outcomes = [0usize; 2];
    for round in 0..rounds {
        // The red-team module every other round (its shapes are the hostile ones).
        let base = if round % 2 == 0 {
            &bases[0]
        } else {
            &bases[next(bases.len())]
        };
        let mut t = base.as_bytes().to_vec();
        let at = next(t.len());
        match round / 2 % 6 {
            0 => t.truncate(at),
            1 => {
                let n = next(200).min(t.len() - at);
                t.drain(at..at + n);
            }
            2 => {
                let n = next(200).min(t.len() - at);
                let span: Vec<u8> = t[at..at + n].to_vec();
                t.splice(at..at, span);
            }
            3 => {
                let b = next(t.len());
                t.swap(at, b);
            }
            4 => {
                // A span moved elsewhere: blocks, labels and declarations out of their order.
                let n = next(400).min(t.len() - at);
                let span: Vec<u8> = t.drain(at..at + n).collect();
                let to = next(t.len());
                t.splice(to..to, span);
            }
            _ => {
                let huge = b"+9223372036854775807";
                t.splice(at..at, huge.iter().copied());
            }
        }
        let Ok(text) = String::from_utf8(t) else {
            continue;
        };
        match sandbox(&text, &Policy::default()) {
            Ok(s) => {
                outcomes[0] += 1;
                // The original may be invalid for reasons the rewriter does not check (an
                // undeclared register); the rewrite must not add new reasons.
                if Module::load(&text).is_ok() {
                    Module::load(&s.ptx).unwrap_or_else(|e| panic!("round {round}: {e}\n{text}"));
                }
            }
            Err(_) => outcomes[1] += 1,
        }
    }
    assert!(outcomes[0] > 0 && outcomes[1] > 0, "{outcomes:?}");
}

#[test]
fn legal_generic_accesses_in_every_window_give_the_original_results() {
    let (text, _, m) = fixture();
    let orig = Module::load(text).unwrap();
    let mut want = GuestMem::new();
    let out = want.alloc(1024);
    let k = orig.kernel_index("generic_mix").unwrap();
    let globals: Vec<u64> = orig.globals().iter().map(|_| want.alloc(64)).collect();
    let params = out.to_le_bytes();
    let l = Launch {
        block: [64, 1, 1],
        globals: &globals,
        ..launch(k, &params)
    };
    ptxvm::launch(&orig, &l, &want).unwrap();
    let expected: Vec<u8> = (0u32..64).flat_map(|t| (t * 7).to_le_bytes()).collect();
    assert_eq!(
        want.read(out, 256),
        expected,
        "the original kernel is right"
    );
    let mut got = 0;
    let mem = attack_in(
        m,
        "generic_mix",
        Shape::linear(1, 64),
        |g| {
            got = g.alloc(1024);
            vec![Arg::U64(got)]
        },
        false,
    );
    assert_eq!(mem.read(got, 512), want.read(out, 512));
}

#[test]
fn cp_async_copies_legally_and_is_fenced_on_both_ends() {
    let (mut src, mut out) = (0, 0);
    let mem = attack(
        "cp_async",
        Shape::linear(1, 1),
        |m| {
            src = m.alloc(32);
            let bytes: Vec<u8> = (0u8..32).collect();
            m.write(src, &bytes);
            out = m.alloc(32);
            vec![Arg::U64(src), Arg::U64(out), Arg::U32(0)]
        },
        false,
    );
    assert_eq!(mem.read(out, 32), (0u8..32).collect::<Vec<u8>>());
    // From the victim; then into shared memory past the tile.
    attack(
        "cp_async",
        Shape::linear(1, 1),
        |m| vec![Arg::U64(m.victim()), Arg::U64(m.alloc(32)), Arg::U32(0)],
        true,
    );
    attack(
        "cp_async",
        Shape::linear(1, 1),
        |m| vec![Arg::U64(m.alloc(32)), Arg::U64(m.alloc(32)), Arg::U32(64)],
        true,
    );
    for form in [
        "cp.async.bulk.shared::cluster.global [%r1], [%rd1], 16;",
        "cp.async.ca.shared.global [%r1], [%rd1], 16, 20;",
        "cp.async.ca.shared.global [%r1], [%rd1], 16, %r2, %rd1;",
        "cp.async.ca.shared.global [%r1], [%rd1], 12;",
    ] {
        let src = format!(
            ".visible .entry k(.param .u64 p) {{\n .reg .b64 %rd1;\n .reg .b32 %r<3>;\n {form}\n}}"
        );
        let (line, what) = refused(&src);
        assert_eq!(line, 7, "{form}");
        assert!(what.contains("cp.async"), "{what}");
    }
}

/// Zero-filling `cp.async` forms: a register source size, an ignore-src predicate, and fixed
/// sizes of 3 and 0 bytes, into a tile first filled with 0xff.
const CP_FILL: &str = r#"
.visible .entry cp_fill(.param .u64 src, .param .u64 out, .param .u32 n, .param .u32 skip)
{
    .reg .b64 %rd<4>;
    .reg .b32 %r<8>;
    .reg .pred %p<2>;
    .shared .align 16 .b8 tile[64];
    ld.param.u64 %rd1, [src];
    ld.param.u64 %rd2, [out];
    ld.param.u32 %r1, [n];
    ld.param.u32 %r2, [skip];
    setp.ne.u32 %p1, %r2, 0;
    mov.u32 %r3, -1;
    st.shared.v4.u32 [tile], {%r3, %r3, %r3, %r3};
    st.shared.v4.u32 [tile+16], {%r3, %r3, %r3, %r3};
    st.shared.v4.u32 [tile+32], {%r3, %r3, %r3, %r3};
    st.shared.v4.u32 [tile+48], {%r3, %r3, %r3, %r3};
    cp.async.ca.shared.global [tile], [%rd1], 16, %r1;
    cp.async.cg.shared.global [tile+16], [%rd1+16], 16, %p1;
    cp.async.ca.shared.global [tile+32], [%rd1+32], 8, 3;
    cp.async.ca.shared.global [tile+48], [%rd1+48], 16, 0;
    cp.async.wait_all;
    bar.sync 0;
    ld.shared.v4.u32 {%r4, %r5, %r6, %r7}, [tile];
    st.global.v4.u32 [%rd2], {%r4, %r5, %r6, %r7};
    ld.shared.v4.u32 {%r4, %r5, %r6, %r7}, [tile+16];
    st.global.v4.u32 [%rd2+16], {%r4, %r5, %r6, %r7};
    ld.shared.v4.u32 {%r4, %r5, %r6, %r7}, [tile+32];
    st.global.v4.u32 [%rd2+32], {%r4, %r5, %r6, %r7};
    ld.shared.v4.u32 {%r4, %r5, %r6, %r7}, [tile+48];
    st.global.v4.u32 [%rd2+48], {%r4, %r5, %r6, %r7};
    ret;
}

.visible .entry cp_zero(.param .u64 src, .param .u64 out, .param .u32 n, .param .u32 skip)
{
    .reg .b64 %rd<4>;
    .reg .b32 %r<8>;
    .reg .pred %p<2>;
    .shared .align 16 .b8 tile[32];
    ld.param.u64 %rd1, [src];
    ld.param.u64 %rd2, [out];
    ld.param.u32 %r1, [n];
    ld.param.u32 %r2, [skip];
    setp.ne.u32 %p1, %r2, 0;
    cp.async.ca.shared.global [tile], [%rd1], 16, %r1;
    cp.async.cg.shared.global [tile+16], [%rd1+16], 16, %p1;
    cp.async.wait_all;
    bar.sync 0;
    ld.shared.v4.u32 {%r4, %r5, %r6, %r7}, [tile];
    st.global.v4.u32 [%rd2], {%r4, %r5, %r6, %r7};
    ret;
}
"#;

#[test]
fn zero_filling_cp_async_reads_only_its_source_size_and_is_reported_only_when_it_reads() {
    let (_, m) = load_sandboxed(&ptx(CP_FILL));
    // Legal: 5 bytes, 16, 3, none; the rest zeros, and an 8-byte copy leaves the 0xff after it.
    let mut out = 0;
    let mem = attack_in(
        &m,
        "cp_fill",
        Shape::linear(1, 1),
        |g| {
            let src = g.alloc(64);
            g.write(src, &(0u8..64).collect::<Vec<u8>>());
            out = g.alloc(64);
            vec![Arg::U64(src), Arg::U64(out), Arg::U32(5), Arg::U32(0)]
        },
        false,
    );
    let mut want = vec![0u8; 64];
    want[..5].copy_from_slice(&[0, 1, 2, 3, 4]);
    want[16..32].copy_from_slice(&(16u8..32).collect::<Vec<u8>>());
    want[32..35].copy_from_slice(&[32, 33, 34]);
    want[40..48].fill(0xff);
    assert_eq!(mem.read(out, 64), want);
    // A source at another tenant's memory that nothing reads (size 0, ignore-src set): zeros,
    // nothing reported, the victim never looked at. Read, it is fenced and reported.
    for (n, skip, fenced) in [(0, 1, false), (4, 1, true), (0, 0, true)] {
        let mut out = 0;
        let mem = attack_in(
            &m,
            "cp_zero",
            Shape::linear(1, 1),
            |g| {
                out = g.alloc(16);
                vec![
                    Arg::U64(g.victim()),
                    Arg::U64(out),
                    Arg::U32(n),
                    Arg::U32(skip),
                ]
            },
            fenced,
        );
        if !fenced {
            assert_eq!(mem.read(out, 16), vec![0u8; 16]);
        }
    }
}

#[test]
fn a_load_that_replaces_its_own_base_does_not_share_its_fence() {
    let mut out = 0;
    let mem = attack(
        "chase",
        Shape::linear(1, 1),
        |m| {
            let (a, b) = (m.alloc(16), m.alloc(16));
            m.write(a, &b.to_le_bytes());
            m.write(b + 8, &0x1234_5678_9abc_def0u64.to_le_bytes());
            out = m.alloc(8);
            vec![Arg::U64(a), Arg::U64(out)]
        },
        false,
    );
    assert_eq!(mem.read(out, 8), 0x1234_5678_9abc_def0u64.to_le_bytes());
}

#[test]
fn a_jump_table_index_past_its_table_is_clamped_and_reported_not_a_wild_jump() {
    // Found by reading the allow-list after the generated programs (session 26): `brx.idx` past
    // its table is undefined on NVIDIA (a jump through whatever follows the table, past every
    // fence) and a fault on ptxvm, which on softcuda ended every guest of the process.
    let text = ptx(r#"
.visible .entry jump(.param .u64 out, .param .u32 i)
{
    .reg .b32 %r<3>;
    .reg .b64 %rd<2>;
    .reg .pred %p;
    ld.param.u64 %rd0, [out];
    ld.param.u32 %r0, [i];
    mov.u32 %r1, 7;
    setp.ne.u32 %p, %r0, 5;
$tab: .branchtargets $a, $b;
    @%p brx.idx %r0, $tab;
$a:
    mov.u32 %r1, 1;
    bra.uni $end;
$b:
    mov.u32 %r1, 2;
$end:
    st.global.u32 [%rd0], %r1;
    ret;
}
"#);
    let (_, m) = load_sandboxed(&text);
    // In range: the table's own targets, nothing reported. Past it: the last target, reported.
    // Index 5 is guarded off: no jump, nothing reported.
    for (i, want, fenced) in [
        (0u32, 1u32, false),
        (1, 2, false),
        (2, 2, true),
        (u32::MAX, 2, true),
        (5, 1, false),
    ] {
        let mut out = 0;
        let mem = attack_in(
            &m,
            "jump",
            Shape::linear(1, 32),
            |m| {
                out = m.alloc(4);
                vec![Arg::U64(out), Arg::U32(i)]
            },
            fenced,
        );
        assert_eq!(mem.read(out, 4), want.to_le_bytes(), "index {i}");
    }
    // A kernel whose jump table is its only fence still reports the clamp: the report is stored
    // at exit only by functions that noted one.
    let text = ptx(r#"
.visible .entry jump_only(.param .u32 i)
{
    .reg .b32 %r<2>;
    ld.param.u32 %r0, [i];
$tab: .branchtargets $a, $b;
    brx.idx %r0, $tab;
$a:
    ret;
$b:
    ret;
}
"#);
    let (_, m) = load_sandboxed(&text);
    for (i, fenced) in [(1u32, false), (9, true)] {
        attack_in(
            &m,
            "jump_only",
            Shape::linear(1, 32),
            |_| vec![Arg::U32(i)],
            fenced,
        );
    }
}

#[test]
fn a_jump_table_becomes_a_search_of_compares_that_takes_every_entry_and_polls_its_back_edges() {
    // NVIDIA's JIT ran two rewritten programs' `brx.idx` wrong at -O2 and above (sessions 28 and
    // 29), so the rewrite jumps with compares and branches instead. Five entries (an odd split),
    // one of them back to the loop's head: each index takes its own entry, the loop still polls
    // (an endless one stops), and past the table the last entry runs, reported.
    let text = ptx(r#"
.visible .entry jump5(.param .u64 out, .param .u32 i)
{
    .reg .b32 %r<4>;
    .reg .b64 %rd<2>;
    ld.param.u64 %rd0, [out];
    ld.param.u32 %r0, [i];
    mov.u32 %r1, 0;
$head:
    add.u32 %r1, %r1, 100;
    st.global.u32 [%rd0], %r1;
$tab: .branchtargets $a, $b, $c, $head, $e;
    brx.idx %r0, $tab;
$a:
    add.u32 %r1, %r1, 1;
    bra.uni $end;
$b:
    add.u32 %r1, %r1, 2;
    bra.uni $end;
$c:
    add.u32 %r1, %r1, 3;
    bra.uni $end;
$e:
    add.u32 %r1, %r1, 5;
$end:
    st.global.u32 [%rd0], %r1;
    ret;
}
"#);
    let (s, m) = load_sandboxed(&text);
    let k = crate::fastpath::entry(&s.ptx, "jump5");
    assert!(!k.contains("brx"), "{k}");
    for (i, want, fenced) in [
        (0u32, 101u32, false),
        (1, 102, false),
        (2, 103, false),
        (4, 105, false),
        (5, 105, true),
        (u32::MAX, 105, true),
    ] {
        let got = output_in(&m, "jump5", Shape::linear(1, 32), 4, &[Arg::U32(i)], fenced);
        assert_eq!(got, want.to_le_bytes(), "index {i}");
    }
    // Index 3 jumps back to the head forever: the poll at that back-edge stops it.
    abort_in_with(
        &m,
        "jump5",
        Duration::from_millis(20),
        false,
        &[Arg::U32(3)],
    );
}
