//! Registries: loading bundles, errors that name what is wrong, release refusing and releasing.

use gpuhost::{Arg, Error, LaunchConfig, ModuleImage, ModuleSource, ParamInfo, Registry};

use crate::common::{TAG_B, bundle, expected, host, read_u32s, shared};

#[test]
fn bad_ptx_error_carries_the_jit_log_and_module_file() {
    let _g = shared();
    let Some(host) = host() else { return };
    let e = Registry::load(&host, bundle("bad-ptx")).unwrap_err();
    match &e {
        Error::InvalidModule { module, file, log } => {
            assert_eq!(module, "broken");
            assert!(
                file.as_ref().unwrap().ends_with("bad-ptx/broken.ptx"),
                "{file:?}"
            );
            assert!(
                log.contains("frobnicate"),
                "the JIT log should point at the bad instruction: {log}"
            );
        }
        other => panic!("expected InvalidModule, got {other:?}"),
    }
}

#[test]
fn unknown_kernel_lists_the_names_that_exist() {
    let _g = shared();
    let Some(host) = host() else { return };
    let reg = Registry::load(&host, bundle("stamp-a")).unwrap();
    match reg.kernel("stmap") {
        Err(Error::KernelNotFound {
            name,
            registry,
            available,
        }) => {
            assert_eq!((name.as_str(), registry.as_str()), ("stmap", "stamp-a"));
            assert_eq!(available, ["mixed", "noop", "poke", "stamp"]);
        }
        other => panic!("expected KernelNotFound, got {other:?}"),
    }
}

#[test]
fn release_is_refused_while_a_kernel_is_held_naming_it_and_its_label() {
    let _g = shared();
    let Some(host) = host() else { return };
    let reg = Registry::load(&host, bundle("stamp-a")).unwrap();
    let k = reg.kernel_labeled("stamp", "request-42").unwrap();
    let refused = gpuhost::release(reg).unwrap_err();
    match &refused.error {
        Error::HandlesOutstanding {
            registry,
            count,
            holders,
        } => {
            assert_eq!((registry.as_str(), *count), ("stamp-a", 1));
            assert_eq!(holders, &["kernel 'stamp' (label 'request-42')"]);
        }
        other => panic!("expected HandlesOutstanding, got {other:?}"),
    }
    let msg = refused.to_string();
    assert!(msg.contains("stamp") && msg.contains("request-42"), "{msg}");
    // The refused registry is handed back intact and still serves.
    let reg = refused.registry;
    let extra = reg.clone();
    let e = gpuhost::release(reg).unwrap_err();
    assert!(
        matches!(&e.error, Error::HandlesOutstanding { count: 2, holders, .. } if holders[1].contains("other Arc<Registry> handle(s): 1")),
        "{e}"
    );
    drop(k);
    drop(e);
    let report = gpuhost::release(extra).unwrap();
    assert_eq!(report.modules_queued, 1);
    host.wait_unloads();
}

#[test]
fn kernels_taken_and_dropped_on_many_threads_are_each_named_until_dropped() {
    let _g = shared();
    let Some(host) = host() else { return };
    let reg = Registry::load(&host, bundle("stamp-a")).unwrap();
    // Twenty holders from four threads, more than one per shard of the holder table; half are
    // dropped again on the threads that took them.
    let kept: Vec<gpuhost::Kernel> = std::thread::scope(|s| {
        let takers: Vec<_> = (0..4)
            .map(|t| {
                let reg = &reg;
                s.spawn(move || {
                    let mut kept = Vec::new();
                    for i in 0..10 {
                        let k = reg.kernel_labeled("stamp", &format!("t{t}-{i}")).unwrap();
                        if i % 2 == 0 {
                            kept.push(k);
                        }
                    }
                    kept
                })
            })
            .collect();
        takers.into_iter().flat_map(|t| t.join().unwrap()).collect()
    });
    let refused = gpuhost::release(reg).unwrap_err();
    match &refused.error {
        Error::HandlesOutstanding { count, holders, .. } => {
            assert_eq!(*count, 20);
            let mut labels: Vec<&str> = holders
                .iter()
                .filter_map(|h| {
                    h.strip_prefix("kernel 'stamp' (label '")?
                        .strip_suffix("')")
                })
                .collect();
            labels.sort_unstable();
            let mut want: Vec<String> = (0..4)
                .flat_map(|t| (0..10).step_by(2).map(move |i| format!("t{t}-{i}")))
                .collect();
            want.sort_unstable();
            assert_eq!(labels, want);
        }
        other => panic!("expected HandlesOutstanding, got {other:?}"),
    }
    drop(kept);
    let report = gpuhost::release(refused.registry).unwrap();
    assert_eq!(report.modules_queued, 1);
    host.wait_unloads();
}

#[test]
fn release_waits_for_pending_launches_then_unloads_every_module() {
    let _g = shared();
    let Some(host) = host() else { return };
    let reg = Registry::load(&host, bundle("stamp-b")).unwrap();
    let out = host.alloc(8192 * 4).unwrap();
    let s = host.stream().unwrap();
    let done = {
        let k = reg.kernel("stamp").unwrap();
        s.launch(
            &k,
            LaunchConfig::for_elements(8192, 128),
            &[Arg::Buffer(&out, 0), Arg::U32(8192)],
        )
        .unwrap()
    };
    let report = gpuhost::release(reg).unwrap();
    // The launch finished before release returned: its output is all there. (Its Completion
    // may resolve a moment later: a batch releases what it holds before waking its waiters.)
    assert_eq!(
        read_u32s(&out, 8192),
        expected(TAG_B, 8192),
        "release returned before the launch using its module completed"
    );
    assert_eq!(report.registry, "stamp-b");
    assert_eq!(report.modules_queued, 1);
    assert!(!report.context_lost);
    done.wait().unwrap();
    assert_eq!(read_u32s(&out, 8192), expected(TAG_B, 8192));
}

#[test]
fn parameter_lists_match_the_ptx_signature_whichever_source_is_used() {
    let _g = shared();
    let Some(host) = host() else { return };
    let ptx = std::fs::read_to_string(bundle("stamp-a").join("stamp.ptx")).unwrap();
    let reg = Registry::from_sources(
        &host,
        "inline",
        vec![ModuleSource::new("m", ModuleImage::Ptx(ptx.clone()))],
    )
    .unwrap();
    let sigs = gpuhost::ptx_sig::entries(&ptx).unwrap();
    for sig in sigs {
        let k = reg.kernel(&sig.name).unwrap();
        println!("{}: {:?} from {:?}", sig.name, k.params(), k.param_source());
        assert_eq!(k.params(), sig.params.as_slice(), "kernel {}", sig.name);
    }
    let mixed = reg.kernel("mixed").unwrap();
    let p = |offset, size| ParamInfo { offset, size };
    assert_eq!(mixed.params(), [p(0, 1), p(8, 8), p(16, 2), p(24, 8)]);
}

#[test]
fn mixed_size_arguments_reach_the_kernel_at_their_offsets() {
    let _g = shared();
    let Some(host) = host() else { return };
    let reg = Registry::load(&host, bundle("stamp-a")).unwrap();
    let k = reg.kernel("mixed").unwrap();
    let out = host.alloc(4).unwrap();
    let s = host.stream().unwrap();
    s.launch(
        &k,
        LaunchConfig::for_elements(1, 1),
        &[
            Arg::U8(3),
            Arg::F64(40.0),
            Arg::U16(500),
            Arg::Buffer(&out, 0),
        ],
    )
    .unwrap()
    .wait()
    .unwrap();
    assert_eq!(read_u32s(&out, 1), [543]);
}

#[test]
fn release_returns_once_launches_whose_completions_were_dropped_finish() {
    let _g = shared();
    let Some(host) = host() else { return };
    let reg = Registry::load(&host, bundle("stamp-b")).unwrap();
    let out = host.alloc(512 * 4).unwrap();
    // The stream stays alive and nobody polls or waits: more than one launcher-side flush's
    // worth, then a tail that only the completion thread's idle flush records.
    let s = host.stream().unwrap();
    {
        let k = reg.kernel("stamp").unwrap();
        for _ in 0..300 {
            drop(
                s.launch(
                    &k,
                    LaunchConfig::for_elements(512, 128),
                    &[Arg::Buffer(&out, 0), Arg::U32(512)],
                )
                .unwrap(),
            );
        }
    }
    let report = gpuhost::release(reg).unwrap();
    assert_eq!(report.modules_queued, 1);
    assert!(!report.context_lost);
    assert_eq!(read_u32s(&out, 512), expected(TAG_B, 512));
    drop(s);
}
