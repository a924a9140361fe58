//! Versions under load: a new version loads beside the old, is published atomically and the old
//! one drained and released; failed loads leave the old one serving; nothing leaks over 100 swaps.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::{Repo, Server, eventually, guest, request, test_bundle};

/// The stamp a bundle's kernel writes first: stamp-a → a0000000, stamp-b → b0000000.
fn stamp_of(bundle: &str) -> &'static str {
    match bundle {
        "stamp-a" => "a0000000",
        _ => "b0000000",
    }
}

fn stamp_repo(tag: &str) -> Repo {
    let repo = Repo::new(tag);
    repo.function(
        "stamp",
        &guest("http-stamp"),
        Some(&test_bundle("stamp-a")),
        "[serve]\nmax_concurrency = 8\nmax_queue = 256\n",
    );
    repo
}

#[test]
fn deploying_new_versions_under_concurrent_load_fails_no_request_and_each_response_has_one_version()
{
    let repo = stamp_repo("swap-load");
    let server = Server::start(&repo.dir, &[], &[]);
    let stop = Arc::new(AtomicBool::new(false));
    let addr = server.addr.clone();
    // 4 clients, each bounded to 20 s and 2000 requests.
    let clients: Vec<_> = (0..4)
        .map(|_| {
            let (stop, addr) = (stop.clone(), addr.clone());
            std::thread::spawn(move || {
                let start = Instant::now();
                let mut seen = Vec::new();
                while !stop.load(Ordering::Relaxed)
                    && start.elapsed() < Duration::from_secs(20)
                    && seen.len() < 2000
                {
                    let r = request(&addr, "GET", "/stamp", b"");
                    seen.push((
                        r.status,
                        r.header("x-gpuhost-version").map(str::to_string),
                        r.text(),
                    ));
                }
                seen
            })
        })
        .collect();
    // Versions 2..=7 alternate the bundles: odd versions run stamp-a, even ones stamp-b.
    for v in 2..=7u64 {
        std::thread::sleep(Duration::from_millis(150));
        let bundle = if v % 2 == 1 { "stamp-a" } else { "stamp-b" };
        repo.bundle("stamp", Some(&test_bundle(bundle)));
        let r = server.load("stamp");
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(r.json()["version"], v.to_string());
        assert_eq!(r.json()["previous"]["released"], true, "{}", r.text());
        // Only the bundle changed: the component came from the compile cache.
        assert_eq!(r.json()["compile_cached"], true);
    }
    std::thread::sleep(Duration::from_millis(150));
    stop.store(true, Ordering::Relaxed);
    let mut total = 0;
    let mut versions = std::collections::BTreeSet::new();
    for c in clients {
        for (status, version, body) in c.join().unwrap() {
            total += 1;
            assert_eq!(status, 200, "a request failed during the swaps: {body}");
            let v: u64 = version
                .expect("every response names its version")
                .parse()
                .unwrap();
            let want = stamp_of(if v % 2 == 1 { "stamp-a" } else { "stamp-b" });
            assert_eq!(
                body, want,
                "version {v} answered with another version's bundle"
            );
            versions.insert(v);
        }
    }
    assert!(total > 20, "only {total} requests ran");
    assert!(
        versions.len() >= 3,
        "responses came from versions {versions:?} only"
    );
}

#[test]
fn a_hundred_swaps_leave_no_module_buffer_or_retired_version_behind() {
    let repo = stamp_repo("swap-100");
    let server = Server::start(&repo.dir, &[], &[]);
    assert_eq!(server.get("/stamp").status, 200);
    // Counted at rest: a finished request's pair is reset (or freed) by gpuhost-wasm's resetter
    // once the watchdog lets go of its watch, and the warm Stores are refilled after it.
    let before = super::wait_at_rest(&server, "stamp", "before the swaps");
    let modules = before.sum("gpuhost_device_live_modules", &[]);
    let buffers = super::buffers_not_kept(&before);
    for i in 0..100 {
        let bundle = if i % 2 == 0 { "stamp-b" } else { "stamp-a" };
        repo.bundle("stamp", Some(&test_bundle(bundle)));
        let r = server.load("stamp");
        assert_eq!(r.status, 200, "swap {i}: {}", r.text());
        let r = server.get("/stamp");
        assert_eq!(
            (r.status, r.text().as_str()),
            (200, stamp_of(bundle)),
            "after swap {i}"
        );
    }
    // A swapped-out version's last Stores may still be on their way out when the current one is
    // at rest (CI once counted one buffer more, then none on reruns): a leak never comes back.
    let mut after = super::wait_at_rest(&server, "stamp", "after the swaps");
    eventually(Duration::from_secs(20), || {
        after = super::wait_at_rest(&server, "stamp", "after the swaps");
        after.sum("gpuhost_device_live_modules", &[]) == modules
            && super::buffers_not_kept(&after) == buffers
    });
    assert_eq!(
        after.sum("gpuhost_device_live_modules", &[]),
        modules,
        "modules leaked"
    );
    assert_eq!(super::buffers_not_kept(&after), buffers, "buffers leaked");
    assert_eq!(after.sum("gpuhost_retired_versions", &[]), 0.0);
    assert_eq!(
        after.sum("gpuhost_swaps_total", &[("outcome", "ok")]),
        101.0
    );
    assert_eq!(
        after.sum("gpuhost_function_version", &[("function", "stamp")]),
        101.0
    );
    assert_eq!(after.sum("gpuhost_function_gpu_memory_bytes", &[]), 0.0);
}

#[test]
fn each_version_has_its_warm_stores_made_when_published_and_dropped_when_swapped_out() {
    let repo = stamp_repo("warm");
    let server = Server::start(&repo.dir, &[], &[]);
    // Four per device (the function runs up to 8 at once), made before any request.
    super::wait_warm_stores(&server, "stamp", 4.0, "after the first load");
    // A request with Stores ready takes one of them: a hit, and no Store made in the request.
    let r = server.get("/stamp");
    assert_eq!((r.status, r.text().as_str()), (200, stamp_of("stamp-a")));
    let m = server.metrics();
    let takes = |result| {
        m.sum(
            "gpuhost_function_warm_store_takes_total",
            &[("function", "stamp"), ("result", result)],
        )
    };
    assert_eq!((takes("hit"), takes("miss")), (1.0, 0.0));
    // Each swap publishes a version that makes its own four; if a swapped-out version kept
    // its spares, there would be four more per swap.
    for (i, bundle) in ["stamp-b", "stamp-a", "stamp-b"].into_iter().enumerate() {
        repo.bundle("stamp", Some(&test_bundle(bundle)));
        let r = server.load("stamp");
        assert_eq!(r.status, 200, "swap {i}: {}", r.text());
        let r = server.get("/stamp");
        assert_eq!((r.status, r.text().as_str()), (200, stamp_of(bundle)));
    }
    super::wait_warm_stores(&server, "stamp", 4.0, "after three swaps");
    let m = server.metrics();
    assert_eq!(m.sum("gpuhost_retired_versions", &[]), 0.0);
    // Unloaded, the function keeps none.
    let r = server.post("/v2/repository/models/stamp/unload", b"");
    assert_eq!(r.status, 200, "{}", r.text());
    let m = server.metrics();
    assert_eq!(
        m.sum("gpuhost_function_warm_stores", &[("function", "stamp")]),
        0.0
    );
}

#[test]
fn a_new_version_is_published_with_as_many_warm_stores_as_the_old_one_grew_to_under_load() {
    let repo = super::misbehave_repo("warm-carry", "[serve]\nmax_concurrency = 16\n");
    let server = Server::start(&repo.dir, &[], &[]);
    let f = ("function", "misbehave");
    super::wait_warm_stores(&server, "misbehave", 4.0, "at start");
    // At rest, a swap carries the rest depth over: four made before the new version serves.
    let r = server.load("misbehave");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["warmed"], 4, "{}", r.text());
    // Eight clients, each with one request in flight at all times: more than four spares are
    // taken at once, so misses grow the depth, and the shrinker keeps it at about eight (a
    // depth below eight misses again).
    let stop = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = (0..8)
        .map(|_| {
            let (stop, addr) = (stop.clone(), server.addr.clone());
            std::thread::spawn(move || {
                let start = Instant::now();
                let mut failed = Vec::new();
                while !stop.load(Ordering::Relaxed) && start.elapsed() < Duration::from_secs(30) {
                    let r = request(&addr, "GET", "/misbehave/slow?ms=20", b"");
                    if r.status != 200 {
                        failed.push((r.status, r.text()));
                    }
                }
                failed
            })
        })
        .collect();
    let misses = |server: &Server| {
        server.metrics().sum(
            "gpuhost_function_warm_store_takes_total",
            &[f, ("result", "miss")],
        )
    };
    assert!(
        eventually(Duration::from_secs(20), || misses(&server) >= 4.0),
        "eight at once missed the four spares only {} times",
        misses(&server)
    );
    let r = server.load("misbehave");
    stop.store(true, Ordering::Relaxed);
    assert_eq!(r.status, 200, "{}", r.text());
    let warmed = r.json()["warmed"].as_u64().unwrap_or(0);
    assert!(
        (5..=16).contains(&warmed),
        "the new version had {warmed} Stores made before it served eight at once: {}",
        r.text()
    );
    for c in clients {
        assert_eq!(c.join().unwrap(), vec![], "requests failed across the swap");
    }
    // The depth it took over is given back once unused, as one grown by misses.
    super::wait_warm_stores(&server, "misbehave", 4.0, "once unused");
}

#[test]
fn bad_deploys_are_refused_with_the_reason_and_the_old_version_keeps_serving() {
    let repo = stamp_repo("bad-deploys");
    let server = Server::start(&repo.dir, &[], &[]);
    let dir = repo.dir.join("stamp");
    let good = std::fs::read(dir.join("function.wasm")).unwrap();
    type BreakIt<'a> = Box<dyn Fn() + 'a>;
    let cases: Vec<(&str, BreakIt)> = vec![
        (
            "not a valid WebAssembly component",
            Box::new(|| std::fs::write(dir.join("function.wasm"), b"hello").unwrap()),
        ),
        (
            "core WebAssembly module, not a component",
            Box::new(|| std::fs::write(dir.join("function.wasm"), b"\0asm\x01\0\0\0").unwrap()),
        ),
        (
            "test:alien/probe",
            Box::new(|| {
                std::fs::copy(super::test_guest("alien"), dir.join("function.wasm"))
                    .map(drop)
                    .unwrap()
            }),
        ),
        (
            "does not export wasi:http/incoming-handler",
            Box::new(|| {
                std::fs::copy(guest("saxpy"), dir.join("function.wasm"))
                    .map(drop)
                    .unwrap()
            }),
        ),
        (
            "bundle did not load",
            Box::new(|| {
                std::fs::write(dir.join("function.wasm"), &good).unwrap();
                repo.bundle("stamp", Some(&test_bundle("bad-ptx")));
            }),
        ),
        (
            "unknown field",
            Box::new(|| {
                repo.bundle("stamp", Some(&test_bundle("stamp-a")));
                std::fs::write(dir.join("function.toml"), "routes = \"/x\"\n").unwrap();
            }),
        ),
    ];
    for (want, break_it) in cases {
        break_it();
        let r = server.load("stamp");
        assert_eq!(r.status, 400, "{want}: {}", r.text());
        let error = r.json()["error"].as_str().unwrap().to_string();
        assert!(error.contains(want), "{want}: {error}");
        assert_eq!(r.json()["serving_version"], "1", "{}", r.text());
        let ok = server.get("/stamp");
        assert_eq!(
            (ok.status, ok.header("x-gpuhost-version")),
            (200, Some("1")),
            "{want}"
        );
        assert_eq!(ok.text(), "a0000000");
        assert_eq!(
            server.get("/v2/health/ready").status,
            200,
            "a failed swap keeps the server ready"
        );
    }
    let m = server.metrics();
    assert_eq!(m.sum("gpuhost_swaps_total", &[("outcome", "failed")]), 6.0);
    // Loading a function the repository does not hold, or a name that escapes it.
    assert_eq!(server.load("nope").status, 404);
    assert_eq!(
        server
            .post("/v2/repository/models/..%2Fetc/load", b"")
            .status,
        404
    );
    // Fixed, it loads as version 2 (failed loads take no number).
    std::fs::write(dir.join("function.toml"), "").unwrap();
    let r = server.load("stamp");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(server.get("/stamp").header("x-gpuhost-version"), Some("2"));
    // Unload: the route stops answering, the index says why, and it can come back.
    let r = server.post("/v2/repository/models/stamp/unload", b"");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(server.get("/stamp").status, 404);
    let index = server.post("/v2/repository/index", b"").json();
    assert_eq!(index[0]["name"], "stamp");
    assert_eq!(index[0]["state"], "UNAVAILABLE");
    assert_eq!(server.get("/v2/models/stamp/ready").status, 503);
    assert_eq!(server.load("stamp").status, 200);
    assert_eq!(server.get("/v2/models/stamp/ready").status, 200);
}

#[test]
fn with_no_load_nothing_serves_until_a_function_is_loaded_explicitly() {
    let repo = stamp_repo("no-load");
    let server = Server::start(&repo.dir, &["--no-load"], &[]);
    let index = server.post("/v2/repository/index", b"").json();
    assert_eq!(index[0]["name"], "stamp");
    assert_eq!(index[0]["state"], "UNAVAILABLE");
    assert_eq!(index[0]["reason"], "not loaded");
    assert_eq!(server.get("/stamp").status, 404);
    assert_eq!(
        server.get("/v2/health/ready").status,
        200,
        "nothing failed to load"
    );
    assert_eq!(server.load("stamp").status, 200);
    let r = server.get("/stamp");
    assert_eq!((r.status, r.text().as_str()), (200, "a0000000"));
    assert_eq!(
        server.post("/v2/repository/index", b"").json()[0]["state"],
        "READY"
    );
}
