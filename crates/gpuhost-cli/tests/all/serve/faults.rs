//! Load and faults: a full queue answers 429 with Retry-After, misbehaving guests get a status
//! and a JSON body while the server keeps serving with nothing leaked, and SIGTERM drains the
//! requests in flight before the process exits; a connection that is slow to send its request
//! head, or idles, is closed, and so is one that stops reading its response; a streamed body cut
//! short by its guest's stop does not end as if whole.

use std::time::Duration;

use std::thread::JoinHandle;

use super::{Repo, Response, Server, eventually, misbehave_repo, request, test_guest};

/// `n` GETs of `path` sent at once, each from a thread of its own.
fn gets_at_once(server: &Server, n: usize, path: &'static str) -> Vec<JoinHandle<Response>> {
    (0..n)
        .map(|_| {
            let addr = server.addr.clone();
            std::thread::spawn(move || request(&addr, "GET", path, b""))
        })
        .collect()
}

#[test]
fn a_full_queue_answers_429_with_retry_after_and_admitted_requests_complete() {
    let repo = misbehave_repo("overload", "[serve]\nmax_concurrency = 1\nmax_queue = 1\n");
    let server = Server::start(&repo.dir, &[], &[]);
    // Six at once against room for two (one running, one queued).
    let clients = gets_at_once(&server, 6, "/misbehave/slow?ms=1500");
    let responses: Vec<_> = clients.into_iter().map(|c| c.join().unwrap()).collect();
    let refused: Vec<_> = responses.iter().filter(|r| r.status == 429).collect();
    let served: Vec<_> = responses.iter().filter(|r| r.status == 200).collect();
    assert_eq!(refused.len() + served.len(), 6, "{responses:?}");
    assert!((1..=2).contains(&served.len()), "{responses:?}");
    for r in &refused {
        assert_eq!(r.header("retry-after"), Some("1"));
        // Every error body names its kind, the outcome it is counted under.
        assert_eq!(r.json()["kind"], "overload", "{}", r.text());
        assert_eq!(
            r.json()["request_id"].as_str(),
            r.header("x-request-id"),
            "{}",
            r.text()
        );
        assert!(
            r.json()["error"]
                .as_str()
                .unwrap()
                .contains("queue is full")
        );
    }
    for r in &served {
        assert_eq!(r.text(), "slept");
    }
    let m = server.metrics();
    let overload = [("function", "misbehave"), ("outcome", "overload")];
    assert_eq!(
        m.sum("gpuhost_requests_total", &overload),
        refused.len() as f64
    );
    // Once the queue drains the function takes requests again.
    assert_eq!(server.get("/misbehave/ok").status, 200);
}

#[test]
fn trapping_spinning_leaking_and_silent_guests_get_a_status_and_json_and_the_server_keeps_serving()
{
    let toml = "[serve]\ntimeout_ms = 3000\n[limits]\nfuel = 1000000000000\n";
    let repo = misbehave_repo("faults", toml);
    let server = Server::start(&repo.dir, &[], &[]);
    assert_eq!(server.get("/misbehave/ok").status, 200);
    // Each warm Store holds a sandbox pair of its own once it is ready (its anchors are live
    // buffers): count from a server at rest, all four made (on NVIDIA a sandbox pair takes up to
    // ~80 ms, so a fixed pause was not enough) and the first request's pair reset, as after the
    // misbehaving.
    let buffers = super::buffers_not_kept(&super::wait_at_rest(&server, "misbehave", "at start"));

    let r = server.get("/misbehave/trap");
    assert_eq!(r.status, 500, "{}", r.text());
    assert!(r.json()["error"].as_str().unwrap().contains("trapped"));
    // Its stderr goes to the log, not the client (redteam.rs).
    assert_eq!(r.json()["kind"], "trap", "{}", r.text());
    assert_eq!(r.header("x-gpuhost-version"), Some("1"));

    let r = server.get("/misbehave/leak");
    assert_eq!(r.status, 500, "{}", r.text());

    let r = server.get("/misbehave/spin");
    assert_eq!(r.status, 504, "{}", r.text());
    assert!(r.json()["error"].as_str().unwrap().contains("time limit"));

    let r = server.get("/misbehave/noanswer");
    assert_eq!(r.status, 502, "{}", r.text());
    assert!(
        r.json()["error"]
            .as_str()
            .unwrap()
            .contains("without setting a response")
    );

    // Still serving; and the 2 MiB the leaking guest held went with its Store.
    assert_eq!(server.get("/misbehave/ok").text(), "ok");
    let m = super::wait_at_rest(&server, "misbehave", "after the misbehaving");
    assert_eq!(
        (
            super::buffers_not_kept(&m),
            m.sum("gpuhost_function_gpu_memory_bytes", &[])
        ),
        (buffers, 0.0),
        "device buffers leaked:\n{}",
        server.get("/metrics").text()
    );
    let trap = [("function", "misbehave"), ("outcome", "trap")];
    assert_eq!(m.sum("gpuhost_requests_total", &trap), 3.0);
    let timeout = [("function", "misbehave"), ("outcome", "timeout")];
    assert_eq!(m.sum("gpuhost_requests_total", &timeout), 1.0);
    assert_eq!(server.get("/v2/health/ready").status, 200);
}

#[test]
fn a_module_a_handler_loads_on_every_request_is_rewritten_once_and_each_request_has_its_own_globals()
 {
    let repo = misbehave_repo("module-cache", "");
    let server = Server::start(&repo.dir, &[], &[]);
    // The handler loads its module (64 KiB of globals) itself, each time; its kernel counts
    // launches in a global word, which starts at zero in every request's Store.
    for i in 0..4 {
        let r = server.get("/misbehave/globals");
        assert_eq!(
            (r.status, r.text()),
            (200, "bumped [1, 2, 3]".into()),
            "request {i}"
        );
    }
    // At once: the shared module runs for several requests together, each on its own globals.
    for t in gets_at_once(&server, 4, "/misbehave/globals") {
        let r = t.join().unwrap();
        assert_eq!((r.status, r.text()), (200, "bumped [1, 2, 3]".into()));
    }
    let m = server.metrics();
    let loads = |result| {
        m.sum(
            "gpuhost_function_module_loads_total",
            &[("function", "misbehave"), ("result", result)],
        )
    };
    assert_eq!((loads("loaded"), loads("cached")), (1.0, 7.0));
}

#[test]
fn a_kernel_fault_that_poisons_the_device_turns_liveness_false_so_the_process_is_restarted() {
    // Trusted: nothing fences its kernel's store to address 0x100, which faults and poisons the
    // device for the process (docs/ISOLATION.md: sandboxed functions cannot).
    let repo = misbehave_repo("poison", "sandbox = false\n");
    let server = Server::start(&repo.dir, &[], &[]);
    assert_eq!(server.get("/v2/health/live").status, 200);
    let r = server.get("/misbehave/fault");
    assert!(r.text().contains("Err"), "{}", r.text());
    // Every later GPU call of the process fails: the liveness probe says so.
    assert_eq!(server.get("/v2/health/live").status, 503);
    // A sandboxed function's identical kernel is fenced and the device stays live.
    let repo = misbehave_repo("no-poison", "");
    let server = Server::start(&repo.dir, &[], &[]);
    let r = server.get("/misbehave/fault");
    assert!(r.text().contains("MemoryFenced"), "{}", r.text());
    assert_eq!(server.get("/v2/health/live").status, 200);
}

/// Stores set up for function `f`: for a request (a miss) or ahead of one (a warm Store).
fn stores_set_up(m: &super::Metrics, f: (&str, &str)) -> f64 {
    ["setup", "warm_setup"]
        .map(|p| m.sum("gpuhost_request_phase_seconds_count", &[f, ("phase", p)]))
        .iter()
        .sum()
}

#[test]
fn every_request_runs_in_a_fresh_instance_even_when_its_store_was_made_ahead() {
    let repo = misbehave_repo("fresh", "");
    let server = Server::start(&repo.dir, &[], &[]);
    // One at a time with pauses (each request then finds the Store made ahead after the last
    // one), and in bursts (some find none ready): no instance is ever handed a second request.
    for i in 0..6 {
        assert_eq!(server.get("/misbehave/count").text(), "1", "request {i}");
        std::thread::sleep(Duration::from_millis(50));
    }
    let burst = gets_at_once(&server, 8, "/misbehave/count");
    for t in burst {
        let r = t.join().unwrap();
        assert_eq!((r.status, r.text()), (200, "1".to_string()));
    }
    // Stores were made ahead of requests: more Stores than requests were set up, never fewer;
    // and at most one more per request beyond the rest depth (4) and one per request that
    // found none ready (each such miss deepens the spares by one).
    let m = server.metrics();
    let f = ("function", "misbehave");
    let stores = stores_set_up(&m, f);
    let misses = m.sum(
        "gpuhost_function_warm_store_takes_total",
        &[f, ("result", "miss")],
    );
    assert!(
        (14.0..=18.0 + misses).contains(&stores),
        "{stores} Stores for 14 requests, {misses} of which found none ready"
    );
}

#[test]
fn warm_stores_grow_by_one_per_request_that_found_none_and_shrink_back_to_four_once_unused() {
    let repo = misbehave_repo("warm-depth", "[serve]\nmax_concurrency = 16\n");
    let server = Server::start(&repo.dir, &[], &[]);
    let f = ("function", "misbehave");
    super::wait_warm_stores(&server, "misbehave", 4.0, "at start");
    // Sixteen at once, each running a while: the four warm Stores go to four of them, the others
    // make their own (misses).
    let burst = gets_at_once(&server, 16, "/misbehave/slow?ms=300");
    for t in burst {
        assert_eq!(t.join().unwrap().status, 200);
    }
    let m = server.metrics();
    let misses = m.sum(
        "gpuhost_function_warm_store_takes_total",
        &[f, ("result", "miss")],
    );
    assert!(
        misses >= 1.0,
        "no request of the burst found the warm Stores gone"
    );
    // Each miss made the depth one more (up to max_concurrency), and the requests' teardowns
    // refilled to it: Stores set up = the first four + the misses' own + the refill to the
    // depth (with a fixed depth of four: 4 + misses + 4). Counted, so however soon they shrink.
    let depth = (4.0 + misses).min(16.0);
    let expected = 4.0 + misses + depth;
    let setups = |server: &Server| stores_set_up(&server.metrics(), f);
    assert!(
        eventually(Duration::from_secs(20), || setups(&server) == expected),
        "{} Stores set up after {misses} misses, not {expected}",
        setups(&server)
    );
    // Unused, the spares past four are dropped (their slots and pairs given back).
    super::wait_warm_stores(&server, "misbehave", 4.0, "once unused");
    let m = super::wait_at_rest(&server, "misbehave", "after the shrink");
    assert_eq!(m.sum("gpuhost_function_gpu_memory_bytes", &[]), 0.0);
}

#[test]
fn a_body_over_the_function_limit_is_refused_with_413() {
    let repo = misbehave_repo("body-limit", "[serve]\nmax_body_bytes = 1024\n");
    let server = Server::start(&repo.dir, &[], &[]);
    let r = server.post("/misbehave/ok", &vec![b'x'; 4096]);
    assert_eq!(r.status, 413, "{}", r.text());
    assert_eq!(r.json()["kind"], "too_large", "{}", r.text());
    assert_eq!(server.post("/misbehave/ok", &[b'x'; 512]).status, 200);
}

#[test]
fn a_guest_that_ends_with_its_answer_is_sent_whole_and_one_writing_on_after_its_head_is_streamed_to_its_end()
 {
    let repo = misbehave_repo("drip", "");
    let server = Server::start(&repo.dir, &[], &[]);
    // Answered and ended in one go: the whole body at once, with its length.
    let r = server.get("/misbehave/ok");
    assert_eq!((r.status, r.text().as_str()), (200, "ok"));
    assert_eq!(
        r.headers.get("content-length").map(String::as_str),
        Some("2")
    );
    // The head first and the lines after it, while the guest still runs: every line arrives, in
    // order, streamed.
    let r = server.get("/misbehave/drip?n=4&ms=30");
    assert_eq!((r.status, r.text().as_str()), (200, "0\n1\n2\n3\n"));
    assert_eq!(
        r.headers.get("transfer-encoding").map(String::as_str),
        Some("chunked")
    );
    // Both Stores are torn down once their guests end, and nothing is left running.
    let f = ("function", "misbehave");
    let settled = eventually(Duration::from_secs(10), || {
        let m = server.metrics();
        m.sum(
            "gpuhost_request_phase_seconds_count",
            &[f, ("phase", "teardown")],
        ) == 2.0
            && m.sum("gpuhost_requests_in_flight", &[f]) == 0.0
    });
    assert!(settled, "{}", server.get("/metrics").text());
}

#[test]
fn sigterm_turns_readiness_false_then_drains_requests_in_flight_and_exits_cleanly() {
    let repo = misbehave_repo("sigterm", "");
    let mut server = Server::start(&repo.dir, &["--shutdown-delay", "1"], &[]);
    assert_eq!(server.get("/v2/health/ready").status, 200);
    let addr = server.addr.clone();
    let slow = gets_at_once(&server, 3, "/misbehave/slow?ms=2000");
    assert!(eventually(Duration::from_secs(5), || {
        server.metrics().sum("gpuhost_requests_in_flight", &[]) == 3.0
    }));
    server.terminate();
    // During the shutdown delay: not ready, still live and still answering.
    assert!(eventually(Duration::from_secs(2), || server
        .get("/v2/health/ready")
        .status
        == 503));
    assert_eq!(server.get("/v2/health/live").status, 200);
    for s in slow {
        let r = s.join().unwrap();
        assert_eq!(
            (r.status, r.text().as_str()),
            (200, "slept"),
            "an in-flight request was cut"
        );
    }
    let code = server.wait_exit(Duration::from_secs(20));
    assert_eq!(code, Some(0), "logs:\n{}", server.logs());
    assert!(server.logs().contains("shut down"));
    // Nothing listens any more.
    assert_eq!(request(&addr, "GET", "/v2/health/live", b"").status, 0);
}

/// The misbehave repository plus `granted`: the same guest, granted the stamp-a bundle. Its
/// time limits are generous: its fenced 4 Mi-word stamp runs for seconds on softcuda, and past
/// the default 10 s of GPU time on a CI machine's two loaded cores (twice, sessions 14 and 15).
fn granted_repo(tag: &str) -> Repo {
    let repo = misbehave_repo(tag, "");
    repo.function(
        "granted",
        &test_guest("http-misbehave"),
        Some(&super::test_bundle("stamp-a")),
        "[serve]\ntimeout_ms = 120000\n[limits]\nmax_kernel_time_ms = 90000\n",
    );
    repo
}

#[test]
fn a_sandboxed_functions_scalars_cannot_carry_a_bundle_kernel_outside_its_memory() {
    let repo = granted_repo("bundle-fence");
    let server = Server::start(&repo.dir, &[], &[]);
    // In bounds the operator's kernel computes as ever (stamp-a writes 0xa0000000 + i).
    assert_eq!(server.get("/granted/stamp?n=32").text(), "ok a000001f");
    // 4 Mi words from a 32-word buffer: far past the guest's buffer and its 2 MiB arena chunk.
    let r = server.get("/granted/stamp?n=4194304");
    assert!(r.text().contains("MemoryFenced"), "{}", r.text());
    // The function and the server go on.
    assert_eq!(server.get("/granted/stamp?n=32").text(), "ok a000001f");
    assert_eq!(server.get("/v2/health/ready").status, 200);
}

#[test]
fn a_function_gets_its_bundle_kernels_by_name_and_a_clear_error_for_others() {
    let repo = granted_repo("bundle-grant");
    let server = Server::start(&repo.dir, &[], &[]);
    let r = server.get("/misbehave/kernel?name=stamp");
    assert!(
        r.text().contains("KernelNotFound") && r.text().contains("no bundle was granted"),
        "{}",
        r.text()
    );
    let r = server.get("/granted/kernel?name=stamp");
    assert!(r.text().starts_with("granted stamp of ["), "{}", r.text());
    assert!(r.text().contains("\"noop\""), "{}", r.text());
    let r = server.get("/granted/kernel?name=nope");
    assert!(
        r.text().contains("KernelNotFound") && r.text().contains("nope"),
        "{}",
        r.text()
    );
}

#[test]
fn the_quotas_of_function_toml_bound_each_request() {
    let repo = Repo::new("quotas");
    let saxpy = super::root().join("examples/repository/saxpy");
    repo.function(
        "saxpy",
        &saxpy.join("function.wasm"),
        Some(&saxpy.join("bundle")),
        "[limits]\nmax_buffer_bytes = 4096\n",
    );
    let server = Server::start(&repo.dir, &[], &[]);
    let small = br#"{"a": 1, "x": [1, 2], "y": [3, 4]}"#;
    assert_eq!(server.post("/saxpy", small).status, 200);
    // 1024 elements: two 4 KiB buffers, over the 4 KiB quota.
    let xs = vec!["1"; 1024].join(",");
    let big = format!(r#"{{"a": 1, "x": [{xs}], "y": [{xs}]}}"#);
    let r = server.post("/saxpy", big.as_bytes());
    assert_eq!(r.status, 500, "{}", r.text());
    assert!(r.text().contains("QuotaExceeded"), "{}", r.text());
    // The refusal was the guest's error, not a fault: the next request is served.
    assert_eq!(server.post("/saxpy", small).status, 200);
}

#[test]
fn clients_that_hang_up_mid_request_leave_no_request_counted_in_flight_or_queued() {
    use std::io::Write;
    let repo = misbehave_repo("hangup", "[serve]\nmax_concurrency = 1\nmax_queue = 8\n");
    let server = Server::start(&repo.dir, &[], &[]);
    // One running and two queued behind it, then all three clients hang up.
    let conns: Vec<_> = (0..3)
        .map(|_| {
            let mut s = std::net::TcpStream::connect(&server.addr).unwrap();
            let req = "GET /misbehave/slow?ms=800 HTTP/1.1\r\nhost: x\r\ncontent-length: 0\r\n\r\n";
            s.write_all(req.as_bytes()).unwrap();
            s
        })
        .collect();
    assert!(eventually(Duration::from_secs(5), || {
        let m = server.metrics();
        m.sum("gpuhost_requests_in_flight", &[]) == 1.0
            && m.sum("gpuhost_requests_queued", &[]) == 2.0
    }));
    drop(conns);
    let settled = eventually(Duration::from_secs(10), || {
        let m = server.metrics();
        m.sum("gpuhost_requests_in_flight", &[]) == 0.0
            && m.sum("gpuhost_requests_queued", &[]) == 0.0
    });
    assert!(settled, "{}", server.get("/metrics").text());
    assert_eq!(server.get("/misbehave/ok").status, 200);
}

/// A client that closes its sending side mid-request is taken as gone (hyper's HTTP/1 default,
/// kept on purpose: TCP tells that from a client that left only once the response is written,
/// and an abandoned GPU request should give its place up rather than run): its queued request
/// never runs.
#[test]
fn a_client_that_closes_its_sending_side_mid_request_is_gone_and_its_queued_request_never_runs() {
    use std::io::{Read, Write};
    let repo = misbehave_repo(
        "half-close",
        "[serve]\nmax_concurrency = 1\nmax_queue = 8\n",
    );
    let server = Server::start(&repo.dir, &[], &[]);
    let req = b"GET /misbehave/slow?ms=1500 HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n";
    let connect = || {
        let mut s = std::net::TcpStream::connect(&server.addr).unwrap();
        s.write_all(req).unwrap();
        s
    };
    let mut running = connect();
    assert!(eventually(Duration::from_secs(5), || {
        server.metrics().sum("gpuhost_requests_in_flight", &[]) == 1.0
    }));
    let leaving: Vec<_> = (0..2).map(|_| connect()).collect();
    assert!(eventually(Duration::from_secs(5), || {
        server.metrics().sum("gpuhost_requests_queued", &[]) == 2.0
    }));
    for s in &leaving {
        s.shutdown(std::net::Shutdown::Write).unwrap();
    }
    assert!(eventually(Duration::from_secs(5), || {
        server.metrics().sum("gpuhost_requests_queued", &[]) == 0.0
    }));
    // The one that stayed is answered; the two that left never ran.
    running
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut raw = Vec::new();
    running.read_to_end(&mut raw).unwrap();
    assert!(
        raw.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&raw)
    );
    assert!(eventually(Duration::from_secs(10), || {
        server.metrics().sum("gpuhost_requests_in_flight", &[]) == 0.0
    }));
    let m = server.metrics();
    assert_eq!(
        m.sum("gpuhost_requests_total", &[("function", "misbehave")]),
        1.0,
        "{}",
        server.get("/metrics").text()
    );
}

/// Reads `conn` until the server closes it (bounded by 20 s): true when it did, false when the
/// read timed out with the connection still open.
fn closed_by_server(conn: &mut std::net::TcpStream) -> bool {
    use std::io::{ErrorKind, Read};
    conn.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut buf = [0u8; 4096];
    loop {
        match conn.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return false;
            }
            // Reset: closed too.
            Err(_) => return true,
        }
    }
}

#[test]
fn connections_that_never_finish_a_request_head_or_idle_after_a_response_are_closed() {
    use std::io::{BufRead, BufReader, Write};
    let repo = misbehave_repo("slowloris", "");
    let server = Server::start(&repo.dir, &["--header-read-timeout", "1"], &[]);
    let connect = || std::net::TcpStream::connect(&server.addr).unwrap();
    // Silent from its opening.
    let mut silent = connect();
    // Half a head, then nothing.
    let mut half = connect();
    half.write_all(b"GET /misbehave/ok HTTP/1.1\r\nhost: x\r\n")
        .unwrap();
    // A head a byte at a time, for longer than the timeout, never finished.
    let mut trickle = connect();
    for b in b"GET /misbehave/ok HTTP/1.1\r\nhost: x\r\nx-pad: 0123456789" {
        if trickle.write_all(&[*b]).is_err() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    // A whole request answered on a kept-alive connection, which then idles.
    let mut idle = connect();
    idle.write_all(b"GET /misbehave/ok HTTP/1.1\r\nhost: x\r\ncontent-length: 0\r\n\r\n")
        .unwrap();
    let mut status = String::new();
    BufReader::new(&idle).read_line(&mut status).unwrap();
    assert!(status.contains(" 200 "), "{status:?}");
    for (name, conn) in [
        ("silent", &mut silent),
        ("half a head", &mut half),
        ("a byte at a time", &mut trickle),
        ("idle after a response", &mut idle),
    ] {
        assert!(
            closed_by_server(conn),
            "the connection {name} was still open 20 s after the 1 s header read timeout"
        );
    }
    assert_eq!(server.get("/misbehave/ok").status, 200);
}

#[test]
fn a_streamed_body_cut_short_by_the_time_limit_is_not_ended_as_if_whole() {
    use std::io::{Read, Write};
    // At 16 test threads on NVIDIA (sessions 47, 48) the head came, then no line for the whole
    // 3 s limit, then a clean end (the guest stopped at its deadline): not understood yet. Its
    // failure says when each read returned, and how fast the server answered health probes
    // meanwhile (a starved runtime or a guest that never ran on), with the server's log.
    // The likeliest cause, its mechanism shown but this case not caught in the act: a guest task
    // woken into a tokio worker's LIFO slot, which other workers cannot steal (tokio 1.54),
    // starves while that worker is held in a driver call that 15 other processes' GPU work makes
    // slow — the warm Stores still being made at start. gpuhost-wasm's blocking.rs shows the
    // stall and now makes a guest's slow calls (JIT, rewrite, new sandbox pairs) off the worker.
    // The request still goes once the server is at rest: what is tested is the cut, not the
    // start.
    let repo = misbehave_repo("cut-short", "[serve]\ntimeout_ms = 3000\n");
    let server = Server::start(&repo.dir, &[], &[]);
    super::wait_at_rest(&server, "misbehave", "before the drip");
    // A line every 20 ms for far longer than the 3 s limit: the head and some lines go out,
    // then the guest is stopped mid-body.
    let mut conn = std::net::TcpStream::connect(&server.addr).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    conn.write_all(
        b"GET /misbehave/drip?n=100000&ms=20 HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n",
    )
    .unwrap();
    let sent = std::time::Instant::now();
    let probing = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let probes = {
        let (addr, probing) = (server.addr.clone(), probing.clone());
        std::thread::spawn(move || {
            let mut slowest = Duration::ZERO;
            while probing.load(std::sync::atomic::Ordering::Relaxed) {
                let t = std::time::Instant::now();
                let status = super::request(&addr, "GET", "/v2/health/live", b"").status;
                slowest = slowest.max(t.elapsed());
                assert_eq!(status, 200);
                std::thread::sleep(Duration::from_millis(50));
            }
            slowest
        })
    };
    let mut raw = Vec::new();
    let mut reads = Vec::new();
    // The connection ends either way (closed, or reset when cut): what came before counts.
    let ended = loop {
        let mut buf = [0u8; 4096];
        match conn.read(&mut buf) {
            Ok(0) => break Ok(raw.len()),
            Ok(n) => {
                raw.extend_from_slice(&buf[..n]);
                if reads.len() < 8 {
                    reads.push((sent.elapsed(), n));
                }
            }
            Err(e) => break Err(e),
        }
    };
    let lasted = sent.elapsed();
    probing.store(false, std::sync::atomic::Ordering::Relaxed);
    let slowest_probe = probes.join().unwrap();
    let text = String::from_utf8_lossy(&raw);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(
        text.contains("transfer-encoding: chunked") && text.contains("\r\n0\n\r\n"),
        "not a streamed body with lines in it ({lasted:?} after the request, the read ending \
         {ended:?}; first reads (time, bytes) {reads:?}; slowest health probe meanwhile \
         {slowest_probe:?}): {text}\nphases:\n{}\nserver log (end):\n{}",
        server
            .get("/metrics")
            .text()
            .lines()
            .filter(|l| l.starts_with("gpuhost_request_phase_seconds_sum")
                || l.starts_with("gpuhost_request_phase_seconds_count"))
            .collect::<Vec<_>>()
            .join("\n"),
        {
            let logs = server.logs();
            let from = logs.len().saturating_sub(6000);
            let from = (from..logs.len()).find(|&i| logs.is_char_boundary(i));
            logs[from.unwrap_or(logs.len())..].to_string()
        }
    );
    assert!(
        !text.ends_with("\r\n0\r\n\r\n"),
        "the body cut short by the time limit ended with the last chunk, as if whole: ...{}",
        &text[text.len().saturating_sub(80)..]
    );
    assert!(eventually(Duration::from_secs(10), || {
        server.metrics().sum("gpuhost_requests_in_flight", &[]) == 0.0
    }));
    assert_eq!(server.get("/misbehave/ok").status, 200);
}

#[test]
fn a_client_that_never_reads_its_response_has_its_connection_dropped_after_the_send_timeout() {
    use std::io::{Read, Write};
    let server = Server::start(
        &super::root().join("examples/repository"),
        &["--send-timeout", "1"],
        &[],
    );
    // An answer of about a megabyte: more than the socket buffers hold while nobody reads.
    let n = 60_000;
    let body = serde_json::json!({ "a": 2, "x": vec![1.123456; n], "y": vec![2.654321; n] });
    let body = body.to_string();
    let mut conn = std::net::TcpStream::connect(&server.addr).unwrap();
    let head = format!(
        "POST /saxpy HTTP/1.1\r\nhost: x\r\nconnection: close\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    conn.write_all(head.as_bytes()).unwrap();
    conn.write_all(body.as_bytes()).unwrap();
    // Not reading for well past the 1 s send timeout; the guest answered long before.
    std::thread::sleep(Duration::from_secs(6));
    conn.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut raw = Vec::new();
    let read = conn.read_to_end(&mut raw);
    // Whole: read to a clean end, and the body ends as its head says (last chunk or length).
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n");
    let whole = read.is_ok()
        && split.is_some_and(|at| {
            let head = String::from_utf8_lossy(&raw[..at]).to_ascii_lowercase();
            if head.contains("transfer-encoding: chunked") {
                return raw.ends_with(b"\r\n0\r\n\r\n");
            }
            let length = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok());
            length == Some(raw.len() - at - 4)
        });
    assert!(
        !whole,
        "the server held the whole {}-byte response for a client that read nothing for 6 s",
        raw.len()
    );
    assert_eq!(server.get("/v2/health/live").status, 200);
}
