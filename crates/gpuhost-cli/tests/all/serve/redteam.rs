//! What a client of the public listener, or an operator's typo, could do to the server that its
//! limits did not cover: request heads of hundreds of KiB per connection, requests whose Host a
//! function cannot be given, refusals without a JSON body, a body larger than the server's whole
//! body budget told to retry, durations too long for the clock, a control listener bound
//! where every client reaches it, a trapping function's internals (its backtrace, what it
//! logged) sent to whoever called it, a guest confusing the ends of a component-model stream
//! (stream_end_confusion.wat), and a function whose start code never ends (endless_start.wat).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Stdio;
use std::time::{Duration, Instant};

use super::admission::{connect_from, connect_with, read_response, served_on_a_new_connection};
use super::{
    Repo, Response, Server, eventually, gpuhost, misbehave_repo, parse_response, request, root,
    test_guest,
};

/// Sends `raw` on a fresh connection and reads, for at most `limit`, until the server closes it
/// (every request here says `connection: close` or is HTTP/1.0): what came, as sent, or the
/// connection's error as text.
fn exchange(addr: &str, raw: &[u8], limit: Duration) -> Vec<u8> {
    let exchange = || -> std::io::Result<Vec<u8>> {
        let mut s = TcpStream::connect(addr)?;
        s.set_read_timeout(Some(limit))?;
        s.write_all(raw)?;
        let mut got = Vec::new();
        s.read_to_end(&mut got)?;
        Ok(got)
    };
    exchange().unwrap_or_else(|e| e.to_string().into_bytes())
}

/// [`exchange`] of `raw`, parsed; a connection error is status 0.
fn raw(addr: &str, raw: &[u8]) -> Response {
    let got = exchange(addr, raw, Duration::from_secs(60));
    parse_response(&got).unwrap_or_else(|| Response {
        status: 0,
        headers: Default::default(),
        body: got,
    })
}

/// The message of a JSON error response; fails naming the response if it is not one.
fn error_of(r: &Response) -> String {
    assert_eq!(
        r.header("content-type"),
        Some("application/json"),
        "{} {:?}",
        r.status,
        r.text()
    );
    r.json()["error"].as_str().unwrap_or_default().to_string()
}

/// The example repository with nothing loaded (nothing compiled: a quick start).
fn bare(extra: &[&str]) -> Server {
    let mut args = vec!["--no-load"];
    args.extend_from_slice(extra);
    Server::start(&root().join("examples/repository"), &args, &[])
}

#[test]
fn a_request_head_over_64_kib_is_refused_with_431_not_buffered() {
    let server = bare(&[]);
    let head = |pad: usize| {
        let pad = "a".repeat(pad);
        format!(
            "GET /v2/health/live HTTP/1.1\r\nhost: x\r\nconnection: close\r\nx-pad: {pad}\r\n\r\n"
        )
    };
    // hyper's default buffers a head of up to 408 KiB, per connection, counted nowhere.
    let r = raw(&server.addr, head(100 << 10).as_bytes());
    assert_eq!(r.status, 431, "{:?}", r.text());
    // A large head within the cap is still served.
    let r = raw(&server.addr, head(32 << 10).as_bytes());
    assert_eq!(r.status, 200, "{:?}", r.text());
}

/// hyper answers a head it cannot parse (400) or one over the cap (431) itself, with no body and
/// before the server sees a request (hyper 1.12 has no hook to shape them): the operator sees
/// them in `gpuhost_connection_errors_total{cause}`, or they are counted nowhere.
#[test]
fn requests_hyper_refuses_before_the_server_sees_them_are_counted_by_cause() {
    let server = bare(&[]);
    let count = |cause: &str| {
        server
            .metrics()
            .sum("gpuhost_connection_errors_total", &[("cause", cause)])
    };
    assert_eq!(count("bad_request"), 0.0);
    let r = raw(
        &server.addr,
        b"GET /v2/health/live HTTP/1.1\r\nno colon here\r\n\r\n",
    );
    assert_eq!(r.status, 400, "{:?}", r.text());
    let pad = "a".repeat(100 << 10);
    let big = format!("GET / HTTP/1.1\r\nhost: x\r\nx-pad: {pad}\r\n\r\n");
    assert_eq!(raw(&server.addr, big.as_bytes()).status, 431);
    assert!(
        super::eventually(Duration::from_secs(5), || {
            count("bad_request") == 1.0 && count("head_too_large") == 1.0
        }),
        "{}",
        server.get("/metrics").text()
    );
}

#[test]
fn a_request_without_a_usable_host_is_a_400_client_error_not_a_function_trap() {
    let server = bare(&[]);
    let load = server.load("saxpy");
    assert_eq!(load.status, 200, "{}", load.text());
    let body = br#"{"a": 2, "x": [1, 2], "y": [10, 20]}"#;
    let post = |head: &[u8]| raw(&server.addr, &[head, body.as_slice()].concat());
    let length = body.len();
    let no_host_1_0 = format!("POST /saxpy HTTP/1.0\r\ncontent-length: {length}\r\n\r\n");
    let no_host_1_1 =
        format!("POST /saxpy HTTP/1.1\r\nconnection: close\r\ncontent-length: {length}\r\n\r\n");
    let not_text = [
        b"POST /saxpy HTTP/1.1\r\nhost: \xff\xfe\r\nconnection: close\r\n".as_slice(),
        format!("content-length: {length}\r\n\r\n").as_bytes(),
    ]
    .concat();
    for (which, head) in [
        ("HTTP/1.0, no Host", no_host_1_0.as_bytes()),
        ("HTTP/1.1, no Host", no_host_1_1.as_bytes()),
        ("a Host not text", &not_text),
    ] {
        let r = post(head);
        assert_eq!(r.status, 400, "{which}: {:?}", r.text());
        let error = error_of(&r);
        assert!(error.contains("Host"), "{which}: {error}");
        assert_eq!(r.json()["kind"], "client_error", "{which}: {:?}", r.text());
    }
    let m = server.metrics();
    let f = ("function", "saxpy");
    assert_eq!(
        m.sum("gpuhost_requests_total", &[f, ("outcome", "trap")]),
        0.0
    );
    assert_eq!(
        m.sum("gpuhost_requests_total", &[f, ("outcome", "client_error")]),
        3.0
    );
    // A request with its Host is served as before.
    let r = server.post("/saxpy", body);
    assert_eq!(r.status, 200, "{}", r.text());
}

#[test]
fn wrong_methods_and_undecodable_names_get_json_errors_on_both_listeners() {
    let server = bare(&["--control-listen", "127.0.0.1:0"]);
    let control = server.control.clone().expect("a control address");
    for (addr, method, path, status) in [
        (&server.addr, "POST", "/metrics", 405),
        (&server.addr, "DELETE", "/v2/health/live", 405),
        (&server.addr, "GET", "/v2/models/%FF", 400),
        (&server.addr, "GET", "/v2/models/%FF/ready", 400),
        (&control, "GET", "/v2/repository/index", 405),
        (&control, "POST", "/v2/repository/models/%FF/load", 400),
    ] {
        let r = request(addr, method, path, b"");
        assert_eq!(r.status, status, "{method} {path}: {:?}", r.text());
        let error = error_of(&r);
        assert!(!error.is_empty(), "{method} {path}: no message");
        if status == 405 {
            assert!(r.header("allow").is_some(), "{method} {path}: no Allow");
        }
    }
}

#[test]
fn a_body_larger_than_the_whole_buffered_budget_is_413_not_told_to_retry() {
    let server = bare(&["--max-buffered-body-bytes", "1000"]);
    let load = server.load("saxpy");
    assert_eq!(load.status, 200, "{}", load.text());
    let declared = server.post("/saxpy", &[b' '; 2000]);
    let chunked = raw(
        &server.addr,
        &[
            b"POST /saxpy HTTP/1.1\r\nhost: x\r\nconnection: close\r\ntransfer-encoding: chunked\r\n\r\n7d0\r\n".as_slice(),
            &[b' '; 2000],
            b"\r\n0\r\n\r\n",
        ]
        .concat(),
    );
    for (which, r) in [("declared", declared), ("chunked", chunked)] {
        // No retry can succeed: a 503 with Retry-After had clients retry it forever.
        assert_eq!(r.status, 413, "{which}: {:?}", r.text());
        assert_eq!(r.header("retry-after"), None, "{which}");
        let error = error_of(&r);
        assert!(
            error.contains("--max-buffered-body-bytes"),
            "{which}: {error}"
        );
    }
}

#[test]
fn server_durations_too_long_for_the_clock_are_refused_at_start_naming_the_flag() {
    // u64::MAX seconds overflowed `Instant + Duration`: every connection panicked at its first
    // head (--header-read-timeout), a swap, unload or shutdown at its drain (--drain-timeout).
    for flag in ["--header-read-timeout", "--drain-timeout"] {
        let mut child = gpuhost()
            .args([
                "serve",
                "--no-load",
                "--listen",
                "127.0.0.1:0",
                "--repository",
            ])
            .arg(root().join("examples/repository"))
            .args([flag, "18446744073709551615"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawning gpuhost serve");
        let start = Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break Some(status);
            }
            if start.elapsed() > Duration::from_secs(60) {
                break None;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let Some(status) = status else {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{flag} u64::MAX: the server started and kept running");
        };
        let mut stderr = String::new();
        let _ = child.stderr.take().unwrap().read_to_string(&mut stderr);
        assert!(!status.success(), "{flag}: exited 0");
        assert!(stderr.contains(flag), "{flag}: {stderr}");
    }
}

#[test]
fn a_control_listener_bound_beyond_loopback_is_warned_about_at_start() {
    let warned = |server: &Server| {
        // Logged before "serving", which the test reads off stderr a moment after the
        // addresses are printed.
        let serving = || server.logs().contains("serving");
        assert!(
            eventually(Duration::from_secs(20), serving),
            "{}",
            server.logs()
        );
        server
            .logs()
            .lines()
            .any(|l| l.contains("WARN") && l.contains("--control-listen"))
    };
    let open = bare(&["--control-listen", "0.0.0.0:0"]);
    assert!(warned(&open), "no warning:\n{}", open.logs());
    let loopback = bare(&["--control-listen", "127.0.0.1:0"]);
    assert!(!warned(&loopback), "warned:\n{}", loopback.logs());
}

/// A server of the misbehave function (`toml` its function.toml), and its answer to a request
/// whose guest traps: a 500 whose JSON error says so.
fn trapped(tag: &str, toml: &str) -> (super::Repo, Server, Response) {
    let repo = misbehave_repo(tag, toml);
    let server = Server::start(&repo.dir, &[], &[]);
    let r = server.get("/misbehave/trap");
    assert_eq!(r.status, 500, "{}", r.text());
    assert_eq!(r.json()["kind"], "trap", "{}", r.text());
    (repo, server, r)
}

#[test]
fn a_trapping_function_answers_its_error_kind_and_a_request_id_but_not_its_backtrace_or_stderr() {
    let (_repo, server, r) = trapped("trap-private", "");
    let body = r.json();
    assert_eq!(body["function"], "misbehave", "{body}");
    assert_eq!(body["version"], 1, "{body}");
    assert!(error_of(&r).contains("trapped"), "{body}");
    let id = body["request_id"].as_str().unwrap_or_default().to_string();
    assert!(!id.is_empty(), "no request id: {body}");
    assert_eq!(r.header("x-request-id"), Some(id.as_str()));
    // What the guest logged and where it was in its code are the operator's, not the client's.
    for private in ["asked to trap", "backtrace", "stderr", "detail", "panicked"] {
        assert!(
            !r.text().contains(private),
            "{private:?} sent: {}",
            r.text()
        );
    }
    // The operator finds the whole of it in the log under the id the client was given.
    let logged = |server: &Server| {
        server
            .logs()
            .lines()
            .any(|l| l.contains(&id) && l.contains("asked to trap") && l.contains("backtrace"))
    };
    assert!(
        eventually(Duration::from_secs(10), || logged(&server)),
        "no log line holds the request id {id} with the trap's detail and stderr:\n{}",
        server.logs()
    );
    // Each request has its own id, successful ones too.
    let ok = server.get("/misbehave/ok");
    assert_eq!(ok.status, 200);
    let other = ok.header("x-request-id").unwrap_or_default();
    assert!(!other.is_empty() && other != id, "{other:?} after {id:?}");
}

#[test]
fn with_expose_errors_a_trapping_function_answers_its_detail_and_stderr_for_development() {
    let (_repo, _server, r) = trapped("trap-exposed", "[serve]\nexpose_errors = true\n");
    let body = r.json();
    let stderr = body["stderr"].as_str().unwrap_or_default();
    assert!(stderr.contains("asked to trap"), "{body}");
    let detail = body["detail"].as_str().unwrap_or_default();
    assert!(detail.contains("backtrace"), "{body}");
    assert!(
        body["request_id"].as_str().is_some_and(|id| !id.is_empty()),
        "{body}"
    );
}

/// The lines of `server`'s log naming request `id`, waited for (bounded).
fn logged_for(server: &Server, id: &str) -> Vec<String> {
    let lines = || -> Vec<String> {
        let logs = server.logs();
        logs.lines()
            .filter(|l| l.contains(id))
            .map(str::to_string)
            .collect()
    };
    eventually(Duration::from_secs(10), || !lines().is_empty());
    lines()
}

#[test]
fn a_guests_stderr_and_error_code_cannot_forge_lines_in_the_text_log() {
    let repo = misbehave_repo("forge", "");
    let server = Server::start_text_logs(&repo.dir, &[]);
    // What the guest wrote ends its log line's stderr field; then one that the guest wrote
    // whole, which an operator (or a log shipper splitting on line breaks) takes for the
    // server's own.
    let trapped = server.get("/misbehave/forge");
    assert_eq!(trapped.status, 500, "{}", trapped.text());
    let coded = server.get("/misbehave/errorcode?n=0");
    assert_eq!(coded.status, 502, "{}", coded.text());
    for r in [&trapped, &coded] {
        let id = r.header("x-request-id").unwrap_or_default();
        let lines = logged_for(&server, id);
        assert!(
            lines.iter().any(|l| l.contains("FORGED")),
            "the guest's text is not in the log line of {id}:\n{}",
            server.logs()
        );
    }
    let forged: Vec<_> = server
        .logs()
        .lines()
        .filter(|l| l.starts_with("2001-01-01"))
        .map(str::to_string)
        .collect();
    assert!(
        forged.is_empty(),
        "lines made up by the guest:\n{}",
        forged.join("\n")
    );
}

#[test]
fn a_failed_guests_log_line_stays_bounded_whatever_text_the_guest_gives() {
    let (_repo, server, _) = trapped("flood", "");
    // A wasi:http error code carries text of the guest's choosing, of any length: one request
    // logged it whole, 4 MiB a line.
    let coded = server.get("/misbehave/errorcode?n=4194304");
    assert_eq!(coded.status, 502, "{}", coded.text());
    assert!(coded.body.len() < 4096, "{} bytes sent", coded.body.len());
    let id = coded.header("x-request-id").unwrap_or_default();
    let lines = logged_for(&server, id);
    assert!(!lines.is_empty(), "nothing logged for {id}");
    for line in &lines {
        assert!(
            line.len() < 64 << 10,
            "a log line of {} bytes for {id}",
            line.len()
        );
        assert!(line.contains("xxxx"), "the guest's text is gone: {line}");
    }
    // Every line is still one JSON object (--log-json), the guest's line breaks escaped.
    for line in server.logs().lines() {
        let parsed = serde_json::from_str::<serde_json::Value>(line);
        assert!(parsed.is_ok(), "not JSON: {line}");
    }
}

#[test]
fn a_guest_cannot_set_the_request_id_or_version_headers_the_operator_searches_by() {
    let repo = misbehave_repo("spoof", "");
    let server = Server::start(&repo.dir, &[], &[]);
    let r = server.get("/misbehave/spoof");
    assert_eq!(r.status, 200, "{}", r.text());
    let raw = request_raw(&server.addr, "/misbehave/spoof");
    // One of each, the server's: a second, the guest's, would name a request the log never saw.
    for name in ["x-request-id", "x-gpuhost-version"] {
        let count = raw
            .lines()
            .filter(|l| l.to_ascii_lowercase().starts_with(&format!("{name}:")))
            .count();
        assert_eq!(count, 1, "{name} {count} times:\n{raw}");
    }
    assert!(!raw.contains("forged-by-the-guest"), "{raw}");
    assert!(!raw.contains("999"), "{raw}");
    let id = r.header("x-request-id").unwrap_or_default();
    assert_eq!(id.len(), 32, "{id:?}");
    assert_eq!(r.header("x-gpuhost-version"), Some("1"));
}

/// The head of the response to GET `path` on a fresh connection, as sent.
fn request_raw(addr: &str, path: &str) -> String {
    let get = format!("GET {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n");
    let got = exchange(addr, get.as_bytes(), Duration::from_secs(30));
    let got = String::from_utf8_lossy(&got).into_owned();
    got.split("\r\n\r\n").next().unwrap_or_default().to_string()
}

/// A connection from `ip` that its end resets (RST, SO_LINGER 0) rather than closes.
fn resetting_from(ip: &str, server: &Server) -> TcpStream {
    connect_with(ip, server, |socket| {
        // Deprecated for blocking the thread on drop, which a linger of zero does not: the
        // connection is reset at once.
        #[allow(deprecated)]
        socket.set_linger(Some(Duration::ZERO)).unwrap();
    })
}

#[test]
fn a_client_gets_its_connection_place_back_however_its_connection_ends() {
    let repo = misbehave_repo("client-ends", "");
    // A cap of 1: a place not given back leaves the client refused from then on.
    let server = Server::start(
        &repo.dir,
        &[
            "--max-connections-per-client",
            "1",
            "--header-read-timeout",
            "1",
        ],
        &[],
    );
    let client = "127.0.0.7";
    let served_again = |how: &str| {
        // Refused, the connection is closed (or reset: the request unread) unanswered.
        assert!(
            eventually(Duration::from_secs(20), || {
                served_on_a_new_connection(client, &server)
            }),
            "after a connection that {how}, the client was not served again"
        );
        // Its connection's end, seen by the server, before the next way to end one begins.
        let open = || server.metrics().sum("gpuhost_connections_open", &[]);
        assert!(
            eventually(Duration::from_secs(20), || open() == 1.0),
            "gpuhost_connections_open is {}, after one that {how}",
            open()
        );
    };
    let closed_by_server = |mut conn: TcpStream| {
        conn.set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        let mut sink = Vec::new();
        let _ = conn.read_to_end(&mut sink);
    };
    served_again("(none yet)");
    // Closed at once, sending nothing.
    drop(connect_from(client, &server));
    served_again("closed at once");
    // Reset mid-head, and mid-body.
    let reset_after = |sent: &[u8], how: &str| {
        let mut conn = resetting_from(client, &server);
        conn.write_all(sent).unwrap();
        std::thread::sleep(Duration::from_millis(100));
        drop(conn);
        served_again(how);
    };
    reset_after(b"GET /misbehave/ok HTTP/1.1\r\nhos", "was reset mid-head");
    reset_after(
        b"POST /misbehave/ok HTTP/1.1\r\nhost: x\r\ncontent-length: 1000\r\n\r\n0123456789",
        "was reset mid-body",
    );
    // Reset mid-response: the guest drips its body on after the head.
    let mut conn = resetting_from(client, &server);
    conn.write_all(b"GET /misbehave/drip?n=100&ms=50 HTTP/1.1\r\nhost: x\r\n\r\n")
        .unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut first = [0u8; 64];
    assert!(conn.read(&mut first).unwrap_or(0) > 0, "no response began");
    drop(conn);
    served_again("was reset mid-response");
    // Closed by the server: no head within --header-read-timeout, first or after a response.
    closed_by_server(connect_from(client, &server));
    served_again("sent no head in time");
    let mut conn = connect_from(client, &server);
    conn.write_all(b"GET /misbehave/ok HTTP/1.1\r\nhost: x\r\n\r\n")
        .unwrap();
    assert!(read_response(&mut conn, Duration::from_secs(20)).is_some());
    closed_by_server(conn);
    served_again("idled after a response");
    // Its client's half closed mid-request.
    let mut conn = connect_from(client, &server);
    conn.write_all(b"POST /misbehave/ok HTTP/1.1\r\nhost: x\r\ncontent-length: 10\r\n\r\n01")
        .unwrap();
    conn.shutdown(std::net::Shutdown::Write).unwrap();
    closed_by_server(conn);
    served_again("half-closed mid-request");
}

#[test]
fn a_function_writing_over_8_kib_to_stderr_is_served_and_its_trap_logs_its_last_words() {
    let repo = misbehave_repo("chatty", "");
    let server = Server::start(&repo.dir, &[], &[]);
    // Its stderr was a pipe of 8 KiB that closed when full, and a Rust guest's eprint! panics
    // on a closed stderr: the request trapped.
    for n in [100, 8 << 10, 1 << 20] {
        let r = server.get(&format!("/misbehave/chatty?n={n}"));
        assert_eq!((r.status, r.text().as_str()), (200, "chatted"), "{n} bytes");
    }
    // What a trap's log line keeps is the end, where a panic's message is.
    let r = server.get("/misbehave/chatty?n=100000&trap");
    assert_eq!(r.status, 500, "{}", r.text());
    let id = r.header("x-request-id").unwrap_or_default();
    let lines = logged_for(&server, id);
    assert!(
        lines.iter().any(|l| l.contains("trapped after chatting")),
        "the panic's message is not logged for {id}:\n{}",
        lines.join("\n")
    );
}

#[test]
fn a_guests_trailers_cannot_carry_a_request_id_or_version_of_its_own() {
    let repo = misbehave_repo("trailers", "");
    let server = Server::start(&repo.dir, &[], &[]);
    let get =
        b"GET /misbehave/trailers HTTP/1.1\r\nhost: x\r\nte: trailers\r\nconnection: close\r\n\r\n";
    let got = exchange(&server.addr, get, Duration::from_secs(30));
    let got = String::from_utf8_lossy(&got).into_owned();
    assert!(got.starts_with("HTTP/1.1 200"), "{got}");
    // A client that asked for trailers gets the guest's own ones.
    assert!(got.contains("x-mine: kept"), "no trailers sent: {got}");
    // Not a second request id, or version, after the server's: clients merge trailers into
    // the headers.
    assert!(!got.contains("forged-by-the-guest"), "{got}");
    assert!(!got.contains("999"), "{got}");
}

/// A client driving a trapping function as fast as it can: a warning of up to 32 KiB a request
/// (the trap's detail and the guest's stderr) filled the log's disk at the client's rate. Every
/// client still gets its JSON error and request id; the log gets the function's budget of lines
/// (by default 20 at once, then one a second), and /metrics counts each line it did not get.
#[test]
fn a_function_trapping_at_full_rate_logs_within_its_budget_and_counts_every_line_suppressed() {
    let repo = misbehave_repo("log-flood", "");
    let server = Server::start(&repo.dir, &[], &[]);
    const CLIENTS: usize = 4;
    const EACH: usize = 30;
    let started = Instant::now();
    let answers: Vec<Response> = std::thread::scope(|s| {
        let clients: Vec<_> = (0..CLIENTS)
            .map(|_| s.spawn(|| (0..EACH).map(|_| server.get("/misbehave/trap")).collect()))
            .collect();
        let answers = clients.into_iter().map(|c| c.join().unwrap());
        answers.flat_map(|a: Vec<Response>| a).collect()
    });
    let took = started.elapsed();
    for r in &answers {
        assert_eq!(r.status, 500, "{}", r.text());
        let body = r.json();
        assert_eq!(body["kind"], "trap", "{body}");
        let id = body["request_id"].as_str().unwrap_or_default();
        assert!(!id.is_empty(), "no request id: {body}");
        assert_eq!(r.header("x-request-id"), Some(id), "{body}");
    }
    let requests = answers.len();
    let suppressed = server.metrics().sum(
        "gpuhost_log_lines_suppressed_total",
        &[("function", "misbehave")],
    ) as usize;
    // Each line is written before its response is sent, and read off the server's stderr by a
    // thread of the test's: counted once they are all there.
    let lines = || {
        let logs = server.logs();
        logs.lines().filter(|l| l.contains("guest trapped")).count()
    };
    assert!(
        eventually(Duration::from_secs(10), || lines() + suppressed == requests),
        "{} lines logged and {suppressed} counted suppressed, for {requests} traps",
        lines()
    );
    let budget = 20 + took.as_secs() as usize;
    assert!(
        lines() <= budget,
        "{} lines logged for {requests} traps in {took:?}: over the budget of {budget}",
        lines()
    );
}

#[test]
fn a_guest_giving_a_streams_read_end_to_cancel_write_traps_and_the_server_goes_on() {
    let built = component_from_wat("stream_end_confusion");
    let repo = Repo::new("stream-end-confusion");
    let exposed = "route = \"/confused\"\n[serve]\nexpose_errors = true\n";
    repo.function("confused", &built, None, exposed);
    repo.function("misbehave", &test_guest("http-misbehave"), None, "");
    let _ = std::fs::remove_file(&built);
    let server = Server::start(&repo.dir, &[], &[]);
    // Each time, in a fresh Store. With wasmtime 48.0.8 the cancel went through and the client
    // got a 502 `no_response` (the handler returned without setting one).
    for _ in 0..3 {
        let r = server.get("/confused");
        assert_eq!(r.status, 500, "{}", r.text());
        assert_eq!(r.json()["kind"], "trap", "{}", r.text());
        let detail = r.json()["detail"].as_str().unwrap_or_default().to_string();
        assert!(
            detail.contains("passed read end to `{stream|future}.cancel-write`"),
            "{detail}"
        );
    }
    let ok = server.get("/misbehave/ok");
    assert_eq!(ok.status, 200, "{}", ok.text());
}

/// A component of this folder, compiled from its WAT into a temporary file (removed once the
/// repository has its copy).
fn component_from_wat(name: &str) -> std::path::PathBuf {
    let wat = root().join(format!("crates/gpuhost-cli/tests/all/serve/{name}.wat"));
    let wasm = wat::parse_file(&wat).unwrap_or_else(|e| panic!("{name}.wat: {e}"));
    let built = std::env::temp_dir().join(format!("{name}-{}.wasm", std::process::id()));
    std::fs::write(&built, wasm).unwrap();
    built
}

#[test]
fn a_function_whose_start_code_never_ends_is_published_within_seconds_and_its_requests_time_out() {
    let built = component_from_wat("endless_start");
    let repo = Repo::new("endless-start");
    repo.function(
        "endless",
        &built,
        None,
        "route = \"/endless\"\n[serve]\ntimeout_ms = 5000\n",
    );
    repo.function("misbehave", &test_guest("http-misbehave"), None, "");
    let _ = std::fs::remove_file(&built);
    let server = Server::start(&repo.dir, &[], &[]);
    // Its new version's Stores never finish: the load waits a second for them at most (not the
    // function's 5 s time limit), then publishes it with none made.
    let start = Instant::now();
    let r = server.load("endless");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["warmed"], 0, "{}", r.text());
    assert!(
        start.elapsed() < Duration::from_secs(4),
        "the load took {:?}",
        start.elapsed()
    );
    // Each request's own Store runs the start code too, until the function's time limit.
    let r = server.get("/endless");
    assert_eq!(r.status, 504, "{}", r.text());
    assert!(error_of(&r).contains("time limit"), "{}", r.text());
    assert_eq!(server.get("/misbehave/ok").text(), "ok");
    // Every Store being made ahead gave up at the time limit too: none is left holding its slot.
    let making = |server: &Server| {
        let m = server.metrics();
        let f = [("function", "endless")];
        (
            m.sum("gpuhost_function_warm_stores_making", &f),
            m.sum("gpuhost_function_warm_stores", &f),
        )
    };
    assert!(
        eventually(Duration::from_secs(20), || making(&server) == (0.0, 0.0)),
        "warm Stores of the endless function still being made, and made: {:?}",
        making(&server)
    );
    assert_eq!(server.get("/v2/health/ready").status, 200);
}
