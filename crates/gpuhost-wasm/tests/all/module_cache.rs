//! Sandboxed modules shared through a `ModuleCache`: loaded once for many Stores, each guest
//! still with its own globals and its own quota charges.

use std::sync::Arc;

use gpuhost_wasm::ModuleCache;

use super::redteam::{attack_limits, in_child, verdict};
use super::{assert_ok, device, guest, opts};

/// The red-team guest's `globals` run: it loads a module of huge globals (refused by its quota)
/// and one of 64 KiB of globals whose `bump` kernel counts launches in a global word, and checks
/// that its globals were charged and that its counter started at zero (1, 2, 3 over three
/// launches).
async fn globals_run(cache: &Arc<ModuleCache>) {
    let (rt, _device) = device().await.expect("driver");
    let mut o = opts("redteam", &["globals", "0", "5ec2e7a5"]);
    o.limits = attack_limits();
    o.modules = Some(cache.clone());
    let out = rt.run(&guest("redteam"), o).await.expect("run");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.exit_code, 0, "{err}");
    let (outcomes, _) = verdict(&out, "globals");
    assert_eq!(outcomes, ["quota-exceeded", "ok"], "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stores_sharing_a_module_cache_load_each_text_once_and_keep_their_own_globals() {
    if device().await.is_none() {
        return;
    }
    let cache = Arc::new(ModuleCache::default());
    globals_run(&cache).await;
    let first = cache.stats();
    assert!(
        first.entries >= 2,
        "the guest's own module and globals.ptx are kept: {first:?}"
    );
    assert_eq!(first.hits, 0, "{first:?}");
    // Each later run finds every module it loads in the cache (its counter still starts at 0:
    // the guest checks), except the one its quota refuses, which is never kept.
    for run in 1..=2u64 {
        globals_run(&cache).await;
        let now = cache.stats();
        assert_eq!(
            (now.entries, now.bytes),
            (first.entries, first.bytes),
            "{now:?}"
        );
        assert_eq!(now.hits, run * first.entries as u64, "{now:?}");
        assert_eq!(now.misses, first.misses + run, "{now:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_module_cache_forgets_the_least_recently_used_text_past_its_bounds() {
    let Some((rt, _device)) = device().await else {
        return;
    };
    // Room for one module: the example guests' saxpy and reduce modules displace each other,
    // and every run still computes its right answer.
    let cache = Arc::new(ModuleCache::new(1, 1 << 20));
    let limits = gpuhost_wasm::Limits {
        sandbox: true,
        ..Default::default()
    };
    // (hits, misses, entries) after each run; a run's stdout names its check.
    let run = async |name: &str| {
        let mut o = opts(name, &["1000"]);
        o.limits = limits.clone();
        o.modules = Some(cache.clone());
        let out = rt.run(&guest(name), o).await.expect("run");
        assert_ok(&out, &format!("{name} ok"));
        let s = cache.stats();
        assert!(s.bytes > 0 && s.bytes <= 1 << 20, "{s:?}");
        (s.hits, s.misses, s.entries)
    };
    assert_eq!(run("saxpy").await, (0, 1, 1));
    assert_eq!(run("saxpy").await, (1, 1, 1));
    assert_eq!(run("reduce").await, (1, 2, 1));
    assert_eq!(run("saxpy").await, (1, 3, 1));
    // A text over the cache's bytes is loaded and run, never kept.
    let tiny = Arc::new(ModuleCache::new(8, 16));
    let mut o = opts("saxpy", &["1000"]);
    o.limits = limits.clone();
    o.modules = Some(tiny.clone());
    assert_ok(&rt.run(&guest("saxpy"), o).await.expect("run"), "saxpy ok");
    let t = tiny.stats();
    assert_eq!((t.misses, t.entries, t.bytes), (1, 0, 0), "{t:?}");
}

#[test]
fn after_a_foreign_context_reset_a_cached_module_is_loaded_again_not_handed_out_dead() {
    // In a child process: the reset ends every context handle of the process's runtime.
    in_child(
        "module_cache::after_a_foreign_context_reset_a_cached_module_is_loaded_again_not_handed_out_dead",
        async |rt| {
            let cache = Arc::new(ModuleCache::default());
            let limits = gpuhost_wasm::Limits {
                sandbox: true,
                ..Default::default()
            };
            let run = async || {
                let mut o = opts("saxpy", &["1000"]);
                o.limits = limits.clone();
                o.modules = Some(cache.clone());
                let out = rt.run(&guest("saxpy"), o).await.expect("run");
                assert_ok(&out, "saxpy ok");
                let s = cache.stats();
                (s.hits, s.misses)
            };
            assert_eq!(run().await, (0, 1));
            assert_eq!(run().await, (1, 1));
            // Another part of the process resets the device's primary context: the cached
            // module's handles die with it.
            crate::foreign_reset();
            // The next load misses (its entry is of the lost generation), loads again and runs
            // right; the one after finds the new module.
            assert_eq!(run().await, (1, 2));
            assert_eq!(run().await, (2, 2));
        },
    );
}
