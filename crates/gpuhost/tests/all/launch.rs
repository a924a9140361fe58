//! Launch checks on a real kernel: mismatched arguments and over-limit dimensions are refused
//! with their own error variants, and nothing reaches the driver.

use gpuhost::{Arg, Error, LaunchConfig, Registry};

use crate::common::{bundle, exclusive, host, shared};

#[test]
fn argument_count_and_size_mismatches_are_arg_mismatch() {
    // Exclusive: it counts the host's launches, which a test beside it would move.
    let _g = exclusive();
    let Some(host) = host() else { return };
    let reg = Registry::load(&host, bundle("stamp-a")).unwrap();
    let k = reg.kernel("stamp").unwrap();
    let out = host.alloc(64).unwrap();
    let s = host.stream().unwrap();
    let cfg = LaunchConfig::for_elements(16, 16);
    let launches_before = host.stats().launches;
    let cases: [(&[Arg<'_>], &str); 4] = [
        (
            &[Arg::Buffer(&out, 0)],
            "1 argument(s) given, the kernel takes 2",
        ),
        (
            &[Arg::Buffer(&out, 0), Arg::U32(16), Arg::U32(1)],
            "3 argument(s) given",
        ),
        (
            &[Arg::U32(0), Arg::U32(16)],
            "argument 0 is U32 (4 bytes) but parameter 0 is 8 bytes",
        ),
        (
            &[Arg::Buffer(&out, 0), Arg::F64(16.0)],
            "argument 1 is F64 (8 bytes) but parameter 1 is 4 bytes",
        ),
    ];
    for (args, needle) in cases {
        match s.launch(&k, cfg, args) {
            Err(Error::ArgMismatch { kernel, reason }) => {
                assert_eq!(kernel, "stamp");
                assert!(reason.contains(needle), "{reason:?} lacks {needle:?}");
            }
            Err(e) => panic!("expected ArgMismatch, got {e:?}"),
            Ok(_) => panic!("launched with bad arguments {args:?}"),
        }
    }
    match s.launch(&k, cfg, &[Arg::Buffer(&out, 65), Arg::U32(16)]) {
        Err(Error::ArgMismatch { reason, .. }) => {
            assert!(reason.contains("past the end"), "{reason}")
        }
        other => panic!(
            "expected ArgMismatch for an offset past the buffer, got {:?}",
            other.err()
        ),
    }
    assert_eq!(
        host.stats().launches,
        launches_before,
        "no refused launch was enqueued"
    );
}

#[test]
fn a_leading_check_refuses_bad_leading_arguments_and_geometry_and_accepts_a_short_list() {
    let _g = shared();
    let Some(host) = host() else { return };
    let reg = Registry::load(&host, bundle("stamp-a")).unwrap();
    let k = reg.kernel("stamp").unwrap();
    let out = host.alloc(64).unwrap();
    let cfg = LaunchConfig::for_elements(16, 16);
    // A caller that appends the last parameters itself (the sandbox's hidden ones) checks the
    // rest: any prefix of the right arguments passes.
    k.check_launch_leading(&cfg, &[Arg::Buffer(&out, 0)])
        .unwrap();
    k.check_launch_leading(&cfg, &[]).unwrap();
    k.check_launch_leading(&cfg, &[Arg::Buffer(&out, 0), Arg::U32(16)])
        .unwrap();
    let cases: [(&[Arg<'_>], &str); 3] = [
        (
            &[Arg::U32(0)],
            "argument 0 is U32 (4 bytes) but parameter 0 is 8 bytes",
        ),
        (&[Arg::Buffer(&out, 65)], "past the end"),
        (
            &[Arg::Buffer(&out, 0), Arg::U32(16), Arg::U32(1)],
            "3 argument(s) given, the kernel takes 2",
        ),
    ];
    for (args, needle) in cases {
        match k.check_launch_leading(&cfg, args) {
            Err(Error::ArgMismatch { kernel, reason }) => {
                assert_eq!(kernel, "stamp");
                assert!(reason.contains(needle), "{reason:?} lacks {needle:?}");
            }
            other => panic!("expected ArgMismatch for {args:?}, got {other:?}"),
        }
    }
    let too_wide = LaunchConfig {
        block: [host.facts().max_threads_per_block + 1, 1, 1],
        ..cfg
    };
    assert!(matches!(
        k.check_launch_leading(&too_wide, &[Arg::Buffer(&out, 0)]),
        Err(Error::InvalidLaunch { .. })
    ));
}

#[test]
fn launch_dimensions_over_device_limits_are_invalid_launch() {
    let _g = shared();
    let Some(host) = host() else { return };
    let reg = Registry::load(&host, bundle("stamp-a")).unwrap();
    let k = reg.kernel("noop").unwrap();
    let s = host.stream().unwrap();
    let f = host.facts().clone();
    let cfg = |grid, block, shared_mem_bytes| LaunchConfig {
        grid,
        block,
        shared_mem_bytes,
    };
    let cases = [
        (
            cfg([1, 1, 1], [f.max_threads_per_block + 1, 1, 1], 0),
            "block",
        ),
        (cfg([1, 1, 1], [1, 1, f.max_block_dim[2] + 1], 0), "block.z"),
        (cfg([1, f.max_grid_dim[1] + 1, 1], [1, 1, 1], 0), "grid.y"),
        (
            cfg([1, 1, 1], [1, 1, 1], f.max_shared_mem_per_block + 1),
            "shared memory",
        ),
        (cfg([1, 1, 1], [0, 1, 1], 0), "zero dimension"),
    ];
    for (c, needle) in cases {
        match s.launch(&k, c, &[Arg::U32(0)]) {
            Err(Error::InvalidLaunch { kernel, reason }) => {
                assert_eq!(kernel, "noop");
                assert!(reason.contains(needle), "{reason:?} lacks {needle:?}");
            }
            Err(e) => panic!("{c:?}: expected InvalidLaunch, got {e:?}"),
            Ok(_) => panic!("{c:?} launched"),
        }
    }
    // The limits themselves are accepted.
    let edge = cfg([1, 1, 1], [f.max_threads_per_block, 1, 1], 0);
    s.launch(&k, edge, &[Arg::U32(0)]).unwrap().wait().unwrap();
}

#[test]
fn awaited_launches_resolve_with_their_results_under_every_spin_budget() {
    // Alone: the budget is the host's, and this test changes it.
    let _g = exclusive();
    let Some(host) = host() else { return };
    let reg = Registry::load(&host, bundle("stamp-a")).unwrap();
    let k = reg.kernel("stamp").unwrap();
    let s = host.stream().unwrap();
    let before = host.await_spin();
    let n = 4096u32;
    let out = host.alloc(n as usize * 4).unwrap();
    for budget in [
        std::time::Duration::ZERO,
        std::time::Duration::from_micros(10),
        std::time::Duration::from_secs(5),
    ] {
        host.set_await_spin(budget);
        assert_eq!(host.await_spin(), budget.min(gpuhost::MAX_AWAIT_SPIN));
        crate::common::block_on(async {
            s.fill(&out, 0, out.len(), 0).unwrap().await.unwrap();
            for _ in 0..20 {
                s.launch(
                    &k,
                    LaunchConfig::for_elements(n, 64),
                    &[Arg::Buffer(&out, 0), Arg::U32(n)],
                )
                .unwrap()
                .await
                .unwrap();
            }
        });
        let got = crate::common::read_u32s(&out, n as usize);
        assert_eq!(
            got,
            crate::common::expected(crate::common::TAG_A, n),
            "{budget:?}"
        );
    }
    host.set_await_spin(before);
}

#[test]
fn an_awaited_launch_that_ends_within_the_spin_budget_is_completed_by_its_own_poll_with_its_holds_released()
 {
    // Alone: the budget is the host's, and this test changes it.
    let _g = exclusive();
    let Some(host) = host() else { return };
    let reg = Registry::load(&host, bundle("stamp-a")).unwrap();
    let k = reg.kernel("stamp").unwrap();
    let s = host.stream().unwrap();
    let before = host.await_spin();
    // The longest budget: a small kernel ends within it even on a loaded machine.
    host.set_await_spin(gpuhost::MAX_AWAIT_SPIN);
    let n = 256u32;
    let start = crate::common::settled_stats(&host);
    // Up to 20 launches, or on a loaded machine (CI ran this beside a build once, and none of 20
    // ended within the budget) as many as 2 s allow, until a poll completes one.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    let by_poll = || host.stats().batches_completed_by_poll > start.batches_completed_by_poll;
    for i in 0.. {
        if i >= 20 && (by_poll() || std::time::Instant::now() > deadline) {
            break;
        }
        let out = host.alloc(n as usize * 4).unwrap();
        let launched = s
            .launch(
                &k,
                LaunchConfig::for_elements(n, 64),
                &[Arg::Buffer(&out, 0), Arg::U32(n)],
            )
            .unwrap();
        // The launch's batch now holds the only handle: it must be gone once `.await` returns,
        // whichever thread completed the batch.
        drop(out);
        crate::common::block_on(launched).unwrap();
        assert_eq!(
            host.stats().live_buffers,
            start.live_buffers,
            "a completed batch still holds its buffer after .await returned"
        );
    }
    let end = crate::common::settled_stats(&host);
    host.set_await_spin(before);
    assert!(
        end.batches_completed_by_poll > start.batches_completed_by_poll,
        "no batch was completed by the poll that recorded it: every .await went through the completion thread"
    );
    assert_eq!(end.pending_launches, 0);
}

#[test]
fn a_stream_marked_settled_is_pooled_without_asking_the_driver_unless_it_launched_since() {
    // Exclusive: it counts the host's stream queries, which a test beside it would move.
    let _g = exclusive();
    let Some(host) = host() else { return };
    let reg = Registry::load(&host, bundle("stamp-a")).unwrap();
    let k = reg.kernel("stamp").unwrap();
    let out = host.alloc(64 * 4).unwrap();
    let queries = || host.stats().stream_idle_queries;
    // Unmarked: its drop asks.
    let s = host.stream().unwrap();
    let before = queries();
    drop(s);
    assert_eq!(
        queries(),
        before + 1,
        "an unmarked stream was pooled unasked"
    );
    // Its launch seen complete, then marked: pooled unasked.
    let s = host.stream().unwrap();
    crate::common::stamp(&s, &k, &out, 64).unwrap();
    s.mark_settled();
    let before = queries();
    drop(s);
    assert_eq!(
        queries(),
        before,
        "a settled stream's drop asked the driver"
    );
    // Marked, then a launch: its drop asks after all.
    let s = host.stream().unwrap();
    s.mark_settled();
    let cfg = LaunchConfig::for_elements(64, 64);
    let done = s
        .launch(&k, cfg, &[Arg::Buffer(&out, 0), Arg::U32(64)])
        .unwrap();
    let before = queries();
    drop(s);
    assert_eq!(
        queries(),
        before + 1,
        "a launch after the mark went unasked"
    );
    done.wait().unwrap();
}

/// Two kernels whose own limits are tighter than the device's: `bounded` allows 64 threads per
/// block (`.maxntid`), `tiled` holds 40 KiB of static shared memory, which leaves 8 KiB of the
/// device's default 48 KiB per block for dynamic shared memory. `tiled` reads back a word the
/// host names, so the compiler keeps the whole array.
const TIGHT_PTX: &str = r#"
.version 7.0
.target sm_70
.address_size 64

.visible .entry bounded(.param .u64 out)
.maxntid 64, 1, 1
{
    .reg .b32 %r<2>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [out];
    cvta.to.global.u64 %rd1, %rd1;
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r1;
    ret;
}

.visible .entry tiled(.param .u64 out, .param .u32 word)
{
    .shared .align 4 .b8 tile[40960];
    .reg .b32 %r<6>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [out];
    cvta.to.global.u64 %rd1, %rd1;
    ld.param.u32 %r4, [word];
    mov.u32 %r1, %tid.x;
    mov.u32 %r3, tile;
    shl.b32 %r2, %r1, 2;
    add.s32 %r2, %r3, %r2;
    st.shared.u32 [%r2], %r1;
    bar.sync 0;
    shl.b32 %r4, %r4, 2;
    add.s32 %r4, %r3, %r4;
    ld.shared.u32 %r5, [%r4];
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r5;
    ret;
}
"#;

#[test]
fn launches_beyond_a_kernels_own_limits_are_invalid_launch_naming_the_limit() {
    let _g = shared();
    let Some(host) = host() else { return };
    let source = gpuhost::ModuleSource::new("tight", gpuhost::ModuleImage::Ptx(TIGHT_PTX.into()));
    let reg = Registry::from_sources(&host, "tight", vec![source]).unwrap();
    let (bounded, tiled) = (reg.kernel("bounded").unwrap(), reg.kernel("tiled").unwrap());
    let out = host.alloc(1024 * 4).unwrap();
    let s = host.stream().unwrap();
    let block = |threads, shared_mem_bytes| LaunchConfig {
        grid: [1, 1, 1],
        block: [threads, 1, 1],
        shared_mem_bytes,
    };
    // Within the device's 1024 threads, beyond the kernel's 64: the driver's bare
    // CUDA_ERROR_INVALID_VALUE (the H200's answer) becomes the kernel's limit.
    match s.launch(&bounded, block(128, 0), &[Arg::Buffer(&out, 0)]) {
        Err(Error::InvalidLaunch { kernel, reason }) => {
            assert_eq!(kernel, "bounded");
            assert!(
                reason.contains("128 threads") && reason.contains("at most 64 per block"),
                "{reason}"
            );
        }
        other => panic!("expected InvalidLaunch, got {:?}", other.err()),
    }
    // 16 KiB of dynamic shared memory is within the device's per-block limit, but not beside
    // 40 KiB of static shared memory.
    match s.launch(
        &tiled,
        block(32, 16 << 10),
        &[Arg::Buffer(&out, 0), Arg::U32(3)],
    ) {
        Err(Error::InvalidLaunch { kernel, reason }) => {
            assert_eq!(kernel, "tiled");
            assert!(
                reason.contains("16384 bytes of dynamic shared memory")
                    && reason.contains("exceed the 8192")
                    && reason.contains("40960 bytes of static"),
                "{reason}"
            );
        }
        other => panic!("expected InvalidLaunch, got {:?}", other.err()),
    }
    // A refusal is not sticky: both kernels run within their limits on the same stream.
    s.launch(&bounded, block(64, 0), &[Arg::Buffer(&out, 0)])
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(
        crate::common::read_u32s(&out, 64),
        (0..64).collect::<Vec<u32>>()
    );
    s.launch(
        &tiled,
        block(32, 8 << 10),
        &[Arg::Buffer(&out, 0), Arg::U32(5)],
    )
    .unwrap()
    .wait()
    .unwrap();
    assert_eq!(crate::common::read_u32s(&out, 32), vec![5u32; 32]);
}
