//! What operators see: KServe v2 health, /metrics scraped and parsed, several devices, and the
//! status page rendered by a real headless Chromium.

use std::process::Command;

use super::{Repo, Server, request, root, test_guest};

#[test]
fn health_endpoints_and_metrics_count_what_the_requests_did() {
    let server = Server::start(&root().join("examples/repository"), &[], &[]);
    assert_eq!(server.get("/v2/health/live").status, 200);
    assert_eq!(server.get("/v2/health/ready").status, 200);
    assert_eq!(server.get("/v2/models/saxpy/ready").status, 200);
    assert_eq!(server.get("/v2/models/nope/ready").status, 404);
    let meta = server.get("/v2/models/saxpy").json();
    assert_eq!(meta["route"], "/saxpy");
    assert_eq!(meta["versions"], serde_json::json!(["1"]));
    for _ in 0..3 {
        let r = server.post("/saxpy", br#"{"a": 1, "x": [1, 2], "y": [3, 4]}"#);
        assert_eq!(r.status, 200, "{}", r.text());
    }
    assert_eq!(server.post("/saxpy", b"not json").status, 400);
    let m = server.metrics();
    let f = ("function", "saxpy");
    assert_eq!(
        m.sum("gpuhost_requests_total", &[f, ("outcome", "success")]),
        3.0
    );
    assert_eq!(
        m.sum("gpuhost_requests_total", &[f, ("outcome", "client_error")]),
        1.0
    );
    assert_eq!(m.sum("gpuhost_request_duration_seconds_count", &[f]), 4.0);
    assert_eq!(m.sum("gpuhost_queue_duration_seconds_count", &[f]), 4.0);
    let inf = m.sum(
        "gpuhost_request_duration_seconds_bucket",
        &[f, ("le", "+Inf")],
    );
    assert_eq!(inf, 4.0);
    assert!(m.sum("gpuhost_request_duration_seconds_sum", &[f]) > 0.0);
    // Every request's handler answered (the 400 too: the guest answered it); each request had
    // its own Store, made for it (a miss) or ahead of it (a hit), and each Store was set up
    // before it was instantiated.
    let phase = |m: &super::Metrics, phase: &str| {
        m.sum(
            "gpuhost_request_phase_seconds_count",
            &[f, ("phase", phase)],
        )
    };
    let takes = |result: &str| {
        m.sum(
            "gpuhost_function_warm_store_takes_total",
            &[f, ("result", result)],
        )
    };
    assert_eq!(phase(&m, "respond"), 4.0);
    // The first request's run was timed on its thread's CPU clock too (one in 16 is, the first
    // among them): some CPU, and no more than the wall time of the requests it ran within.
    let cpu = "gpuhost_request_respond_cpu_seconds";
    assert_eq!(m.sum(&format!("{cpu}_count"), &[f]), 1.0);
    let cpu_sum = m.sum(&format!("{cpu}_sum"), &[f]);
    let wall_sum = m.sum("gpuhost_request_duration_seconds_sum", &[f]);
    assert!(
        cpu_sum > 0.0 && cpu_sum <= wall_sum,
        "{cpu_sum} s of CPU in {wall_sum} s of requests"
    );
    // Each request either took a warm Store (hit) or made its own (miss), counted once.
    assert_eq!(takes("hit") + takes("miss"), 4.0);
    // A Store made ahead is timed under the warm_ phases, not as a request's own: the request
    // phases count only the Stores requests made themselves (they counted every warm Store
    // too, so a request that took a warm one seemed to have paid for an instantiation).
    assert_eq!(phase(&m, "instantiate"), takes("miss"));
    assert!(phase(&m, "warm_instantiate") >= takes("hit"));
    // Warm Stores are made in the background while /metrics renders, and a scrape reads one
    // phase after another: a Store set up and instantiated between the two reads would show
    // more instantiates than setups in one scrape. The counts only grow, so a phase that comes
    // first in a Store's life is read from the later scrape, `later`, and one that comes after
    // from the earlier one.
    let later = server.metrics();
    assert!(phase(&later, "setup") >= phase(&m, "instantiate"));
    assert!(phase(&later, "warm_setup") >= phase(&m, "warm_instantiate"));
    // The function is sandboxed: its warm Stores took their arena and control block when they
    // were made, not in a request.
    assert!(phase(&m, "warm_sandbox") >= 1.0);
    assert!(phase(&m, "warm_sandbox") <= phase(&later, "warm_instantiate"));
    assert!(phase(&m, "sandbox") <= phase(&later, "instantiate"));
    for p in ["warm_setup", "warm_instantiate", "respond"] {
        assert!(
            m.sum("gpuhost_request_phase_seconds_sum", &[f, ("phase", p)]) > 0.0,
            "{p}"
        );
    }
    // A Store is dropped after its response is on its way: the last teardown may trail it.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let teardowns = |m: &super::Metrics| {
        m.sum(
            "gpuhost_request_phase_seconds_count",
            &[f, ("phase", "teardown")],
        )
    };
    let mut m = m;
    while teardowns(&m) < 4.0 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
        m = server.metrics();
    }
    assert_eq!(teardowns(&m), 4.0);
    // One saxpy launch per computing request, counted for the function and its device.
    assert_eq!(m.sum("gpuhost_function_launches_total", &[f]), 3.0);
    assert!(m.sum("gpuhost_device_launches_total", &[("device", "0")]) >= 3.0);
    // Of the device's launch batches, those a request completed itself (no more than there
    // were launches; how many depends on the driver's speed against the await's spin).
    let by_poll = "gpuhost_device_batches_completed_by_poll_total";
    assert!(
        m.samples.iter().any(|(name, _, _)| name == by_poll),
        "{by_poll} missing"
    );
    assert!(m.sum(by_poll, &[]) <= m.sum("gpuhost_device_launches_total", &[]));
    // Each computing request read its result once behind its launch (`stream.read-after`: one
    // call, one wait); each call is timed, and a call no request made has no series.
    let c = ("call", "stream/stream.read-after");
    assert_eq!(m.sum("gpuhost_host_calls_total", &[f, c]), 3.0);
    let seconds = m.sum("gpuhost_host_call_seconds_total", &[f, c]);
    assert!(seconds > 0.0);
    // Their spread: the same three calls and the same time, in buckets that only grow.
    let spread = "gpuhost_host_call_duration_seconds";
    assert_eq!(m.sum(&format!("{spread}_count"), &[f, c]), 3.0);
    assert_eq!(
        m.sum(&format!("{spread}_bucket"), &[f, c, ("le", "+Inf")]),
        3.0
    );
    let sum = m.sum(&format!("{spread}_sum"), &[f, c]);
    assert!((sum - seconds).abs() < 1e-6, "{sum} s against {seconds} s");
    let mut buckets: Vec<(f64, f64)> = m
        .samples
        .iter()
        .filter(|(n, labels, _)| {
            n == &format!("{spread}_bucket")
                && labels.get("function").map(String::as_str) == Some(f.1)
                && labels.get("call").map(String::as_str) == Some(c.1)
        })
        .map(|(_, labels, v)| (labels["le"].parse::<f64>().unwrap_or(f64::INFINITY), *v))
        .collect();
    buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
    assert_eq!(buckets.first().map(|b| b.0), Some(1e-6), "{buckets:?}");
    assert!(buckets.windows(2).all(|w| w[0].1 <= w[1].1), "{buckets:?}");
    for unmade in [
        "module/module.from-ptx",
        "stream/stream.synchronize",
        "memory/buffer.read",
    ] {
        let found = m
            .samples
            .iter()
            .find(|(_, labels, _)| labels.get("call").map(String::as_str) == Some(unmade));
        assert_eq!(found, None, "{unmade}");
    }
    assert_eq!(m.sum("gpuhost_requests_in_flight", &[f]), 0.0);
    assert_eq!(m.sum("gpuhost_function_version", &[f]), 1.0);
    assert!(
        m.sum("gpuhost_device_live_modules", &[]) >= 2.0,
        "both bundles are loaded"
    );
    assert_eq!(m.sum("gpuhost_device_context_losses_total", &[]), 0.0);
    let ptx = std::fs::metadata(root().join("examples/repository/saxpy/bundle/saxpy.ptx")).unwrap();
    assert!(m.sum("gpuhost_function_bundle_bytes", &[f]) > ptx.len() as f64);
    assert!(
        server.logs().contains("\"published\""),
        "JSON logs: {}",
        server.logs()
    );
}

#[test]
fn with_two_devices_a_function_spreads_its_requests_over_both() {
    let repo = Repo::new("two-devices");
    repo.function(
        "saxpy",
        &root().join("examples/repository/saxpy/function.wasm"),
        Some(&root().join("examples/repository/saxpy/bundle")),
        // Trusted: softcuda's virtual memory (the sandbox's arena) serves device 0 only so far
        // (vmm.rs check_location), so sandboxed guests cannot run on its second device yet.
        "devices = [0, 1]\nsandbox = false\n",
    );
    let server = Server::start(
        &repo.dir,
        &["--devices", "0,1"],
        &[("SOFTCUDA_DEVICES", "2")],
    );
    let addr = server.addr.clone();
    let clients: Vec<_> = (0..4)
        .map(|_| {
            let addr = addr.clone();
            std::thread::spawn(move || {
                (0..10)
                    .map(|_| request(&addr, "POST", "/saxpy", br#"{"a": 2, "x": [1], "y": [1]}"#))
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    for c in clients {
        for r in c.join().unwrap() {
            assert_eq!(r.status, 200, "{}", r.text());
            assert_eq!(r.json()["y"], serde_json::json!([3.0]));
        }
    }
    let meta = server.get("/v2/models/saxpy").json();
    assert_eq!(meta["devices"], serde_json::json!([0, 1]));
    let m = server.metrics();
    let on0 = m.sum("gpuhost_device_launches_total", &[("device", "0")]);
    let on1 = m.sum("gpuhost_device_launches_total", &[("device", "1")]);
    assert_eq!(on0 + on1, 40.0);
    assert!(
        on0 >= 5.0 && on1 >= 5.0,
        "launches per device: {on0} and {on1}"
    );
}

/// Headless Chromium (Debian's `chromium`; .ci/run installs it).
fn chromium() -> Command {
    let bin = ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|b| {
            Command::new(b)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        })
        .expect(
            "headless Chromium is needed for this test: apt-get install chromium (.ci/run does)",
        );
    let mut cmd = Command::new(bin);
    let profile = std::env::temp_dir().join(format!("gpuhost-chromium-{}", std::process::id()));
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
    ])
    .arg(format!("--user-data-dir={}", profile.display()));
    cmd
}

/// `server`'s status page as headless Chromium leaves it after its script has run.
fn status_dom(server: &Server) -> String {
    let out = chromium()
        .args(["--virtual-time-budget=5000", "--dump-dom"])
        .arg(format!("http://{}/", server.addr))
        .output()
        .expect("running chromium");
    assert!(
        out.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The row of function `name` in the status page's table.
fn function_row(dom: &str, name: &str) -> String {
    let start = dom
        .find(&format!("data-function=\"{name}\""))
        .unwrap_or_else(|| panic!("no row for {name}:\n{dom}"));
    let end = dom[start..]
        .find("</tr>")
        .map(|e| start + e)
        .unwrap_or(dom.len());
    dom[start..end].to_string()
}

#[test]
fn the_status_page_shows_functions_versions_rates_latency_and_memory_in_a_real_browser() {
    let repo = Repo::new("status-page");
    repo.function("misbehave", &test_guest("http-misbehave"), None, "");
    repo.function(
        "saxpy",
        &root().join("examples/repository/saxpy/function.wasm"),
        Some(&root().join("examples/repository/saxpy/bundle")),
        "",
    );
    let server = Server::start(&repo.dir, &[], &[]);
    for _ in 0..5 {
        assert_eq!(
            server
                .post("/saxpy", br#"{"a": 1, "x": [1], "y": [1]}"#)
                .status,
            200
        );
    }
    assert_eq!(server.load("saxpy").status, 200);
    // The table the page's script built from /metrics and the repository index.
    let dom = status_dom(&server);
    let row = |name: &str| function_row(&dom, name);
    let saxpy = row("saxpy");
    assert!(saxpy.contains("data-col=\"version\">2<"), "{saxpy}");
    assert!(saxpy.contains("class=\"READY\">READY<"), "{saxpy}");
    assert!(saxpy.contains("data-col=\"requests\">5<"), "{saxpy}");
    assert!(saxpy.contains("data-col=\"route\">/saxpy<"), "{saxpy}");
    assert!(
        !saxpy.contains("data-col=\"bundle\">0 B<"),
        "the bundle has bytes: {saxpy}"
    );
    for col in ["rate", "p50", "p99", "memory", "bundle"] {
        assert!(
            saxpy.contains(&format!("data-col=\"{col}\">")),
            "{col} missing: {saxpy}"
        );
    }
    assert!(row("misbehave").contains("data-col=\"requests\">0<"));
    assert!(dom.contains("id=\"devices\""), "{dom}");
    // And a picture of it for people (kept under target/ for a look).
    let shot = root().join("target/status-page.png");
    let out = chromium()
        .args(["--virtual-time-budget=5000", "--window-size=1100,700"])
        .arg(format!("--screenshot={}", shot.display()))
        .arg(format!("http://{}/", server.addr))
        .output()
        .unwrap();
    assert!(
        out.status.success() && shot.is_file(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn with_a_control_listener_the_status_page_lists_the_functions_from_metrics_in_a_real_browser() {
    // The page's function list came from the repository index, which the public listener then
    // refuses (403): the page showed only "Refresh failed".
    let server = Server::start(
        &root().join("examples/repository"),
        &["--control-listen", "127.0.0.1:0"],
        &[],
    );
    let r = server.post("/saxpy", br#"{"a": 1, "x": [1], "y": [1]}"#);
    assert_eq!(r.status, 200, "{}", r.text());
    let dom = status_dom(&server);
    let row = function_row(&dom, "saxpy");
    for cell in [
        "data-col=\"version\">1<",
        "class=\"READY\">READY<",
        "data-col=\"requests\">1<",
        "data-col=\"route\">/saxpy<",
    ] {
        assert!(row.contains(cell), "{cell} missing: {row}");
    }
    assert!(
        dom.contains("data-function=\"mlp\""),
        "no row for mlp:\n{dom}"
    );
}
