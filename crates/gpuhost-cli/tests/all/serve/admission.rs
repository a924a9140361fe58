//! Clients that hold the server's resources without using them: bodies declared and never
//! sent take no place in a function's queue, bodies partly sent count against the server's
//! budget of buffered body bytes (refused with 503 and Retry-After past it), at the
//! connection cap the next connection waits in the kernel's backlog until one closes, and a
//! client at its own cap (--max-connections-per-client) has its next connection closed while
//! other clients are served.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use super::{Response, Server, eventually, misbehave_repo, parse_response};

/// A connection that has sent `head` (and `body`, which may be part of what `head` declares).
fn send(server: &Server, head: &str, body: &[u8]) -> TcpStream {
    let mut conn = TcpStream::connect(&server.addr).unwrap();
    conn.write_all(head.as_bytes()).unwrap();
    conn.write_all(body).unwrap();
    conn
}

/// The head of a POST to the misbehave function declaring `length` body bytes.
fn post_head(length: usize) -> String {
    format!("POST /misbehave/ok HTTP/1.1\r\nhost: x\r\ncontent-length: {length}\r\n\r\n")
}

/// Reads one response off `conn` (its body by content-length, as every response here has),
/// leaving the connection open; None when none came within `limit`.
pub(super) fn read_response(conn: &mut TcpStream, limit: Duration) -> Option<Response> {
    conn.set_read_timeout(Some(limit)).unwrap();
    let mut raw = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        if let Some(at) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = parse_response(&raw[..at + 4])?;
            let length: usize = head.header("content-length")?.parse().ok()?;
            if raw.len() >= at + 4 + length {
                return parse_response(&raw[..at + 4 + length]);
            }
        }
        match conn.read(&mut buf) {
            Ok(0) => return None,
            Ok(n) => raw.extend_from_slice(&buf[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return None;
            }
            Err(e) => panic!("reading a response failed: {e}"),
        }
    }
}

/// The message of a JSON error response.
fn error_of(r: &Response) -> String {
    let json = r.json();
    json["error"].as_str().unwrap_or_default().to_string()
}

const F: (&str, &str) = ("function", "misbehave");

#[test]
fn clients_that_never_send_their_declared_body_take_no_place_and_others_are_served() {
    let repo = misbehave_repo(
        "stalled-bodies",
        "[serve]\nmax_concurrency = 1\nmax_queue = 1\n",
    );
    let server = Server::start(&repo.dir, &["--body-read-timeout", "8"], &[]);
    // Room for two requests (one running, one queued); four declare a body, send a few bytes
    // of it and never the rest.
    let mut stalled: Vec<_> = (0..4)
        .map(|_| send(&server, &post_head(1000), b"a few bytes"))
        .collect();
    let mut most = 0.0f64;
    assert!(
        eventually(Duration::from_secs(20), || {
            let reading = server.metrics().sum("gpuhost_requests_reading_body", &[F]);
            most = most.max(reading);
            reading == 4.0
        }),
        "the server waited for the bodies of {most} of the 4 clients at most, not all (the others refused?)"
    );
    // Meanwhile whole requests are served: the stalled ones hold no place.
    for i in 0..3 {
        let r = server.post("/misbehave/ok", b"a whole body");
        assert_eq!((r.status, r.text().as_str()), (200, "ok"), "request {i}");
    }
    // Past the body-read timeout each stalled client gets a 408 with a JSON error.
    for conn in &mut stalled {
        let r = read_response(conn, Duration::from_secs(60)).expect("a response to a stalled body");
        assert_eq!(r.status, 408, "{}", r.text());
        let error = error_of(&r);
        assert!(error.contains("--body-read-timeout"), "{error}");
    }
    let m = server.metrics();
    assert_eq!(m.sum("gpuhost_requests_reading_body", &[F]), 0.0);
    let timeout = [F, ("outcome", "timeout")];
    assert_eq!(m.sum("gpuhost_requests_total", &timeout), 4.0);
    let overload = [F, ("outcome", "overload")];
    assert_eq!(m.sum("gpuhost_requests_total", &overload), 0.0);
}

#[test]
fn bodies_past_the_servers_buffered_bytes_budget_get_503_with_retry_after_and_the_rest_complete() {
    let repo = misbehave_repo("body-budget", "");
    let server = Server::start(&repo.dir, &["--max-buffered-body-bytes", "10000"], &[]);
    let buffered = |server: &Server| {
        server
            .metrics()
            .sum("gpuhost_request_body_bytes_buffered", &[])
    };
    // Two bodies of 4000 bytes, 3000 of each sent: 6000 of the 10000 buffered.
    let mut partial: Vec<_> = (0..2)
        .map(|_| send(&server, &post_head(4000), &[b'x'; 3000]))
        .collect();
    assert!(
        eventually(Duration::from_secs(20), || buffered(&server) == 6000.0),
        "{} body bytes buffered, not the 6000 sent",
        buffered(&server)
    );
    let refused = |r: Option<Response>, which: &str| {
        let r = r.unwrap_or_else(|| panic!("no response to the {which} body"));
        assert_eq!(r.status, 503, "{which}: {}", r.text());
        assert_eq!(r.header("retry-after"), Some("1"), "{which}");
        let error = error_of(&r);
        assert!(error.contains("--max-buffered-body-bytes"), "{error}");
    };
    // Declared as more than the 4000 left: refused at its head, before its body is sent.
    let mut declared = send(&server, &post_head(6000), b"");
    refused(
        read_response(&mut declared, Duration::from_secs(20)),
        "declared",
    );
    // Chunked, its length unknown: refused once its bytes pass the budget (the chunk is sent
    // whole, the body's last chunk never, so nothing of it is left unread by the server).
    let chunked_head =
        "POST /misbehave/ok HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\n\r\n";
    let chunk = [format!("{:x}\r\n", 6000).as_bytes(), &[b'y'; 6000], b"\r\n"].concat();
    let mut chunked = send(&server, chunked_head, &chunk);
    refused(
        read_response(&mut chunked, Duration::from_secs(20)),
        "chunked",
    );
    // The two partial bodies are finished and served.
    for (i, conn) in partial.iter_mut().enumerate() {
        conn.write_all(&[b'x'; 1000]).unwrap();
        let r = read_response(conn, Duration::from_secs(60));
        let r = r.unwrap_or_else(|| panic!("no response to finished body {i}"));
        assert_eq!((r.status, r.text().as_str()), (200, "ok"), "body {i}");
    }
    drop(partial);
    // The bytes are given back as their requests end.
    assert!(
        eventually(Duration::from_secs(20), || buffered(&server) == 0.0),
        "{} body bytes still buffered after every request ended",
        buffered(&server)
    );
    let overload = [F, ("outcome", "overload")];
    assert_eq!(
        server.metrics().sum("gpuhost_requests_total", &overload),
        2.0
    );
}

#[test]
fn at_the_connection_cap_the_next_connection_is_not_served_until_one_closes_then_it_is() {
    let repo = misbehave_repo("connection-cap", "");
    let server = Server::start(&repo.dir, &["--max-connections", "3"], &[]);
    let get = "GET /misbehave/ok HTTP/1.1\r\nhost: x\r\n\r\n";
    // Three connections, each served once (so accepted) and kept open, idle.
    let mut open: Vec<_> = (0..3)
        .map(|i| {
            let mut conn = send(&server, get, b"");
            let r = read_response(&mut conn, Duration::from_secs(20));
            let r = r.unwrap_or_else(|| panic!("connection {i} was not served"));
            assert_eq!(r.status, 200, "connection {i}");
            conn
        })
        .collect();
    // A fourth connects (the kernel's backlog takes it) and sends its request: no answer while
    // the three stay open.
    let mut fourth = send(&server, get, b"");
    if let Some(r) = read_response(&mut fourth, Duration::from_secs(3)) {
        panic!(
            "a fourth connection was served at a cap of 3 open connections: {} {}",
            r.status,
            r.text()
        );
    }
    // One closes: the fourth is served, and the others still can be.
    drop(open.pop());
    let r = read_response(&mut fourth, Duration::from_secs(60));
    let r = r.expect("the fourth connection was not served once one of the three closed");
    assert_eq!((r.status, r.text().as_str()), (200, "ok"));
    drop(fourth);
    for (i, conn) in open.iter_mut().enumerate() {
        conn.write_all(get.as_bytes()).unwrap();
        let r = read_response(conn, Duration::from_secs(20));
        assert_eq!(r.map(|r| r.status), Some(200), "kept connection {i}");
    }
    // Two kept open and the one reading /metrics.
    let open_now = |server: &Server| server.metrics().sum("gpuhost_connections_open", &[]);
    assert!(
        eventually(Duration::from_secs(20), || open_now(&server) == 3.0),
        "gpuhost_connections_open is {}, not 3",
        open_now(&server)
    );
}

/// A connection to `server` from local address `ip` (any of 127.0.0.0/8 on Linux's loopback), so
/// one test can be several clients.
pub(super) fn connect_from(ip: &str, server: &Server) -> TcpStream {
    connect_with(ip, server, |_| {})
}

/// [`connect_from`], with `prepare` given the socket before it connects.
pub(super) fn connect_with(
    ip: &str,
    server: &Server,
    prepare: impl FnOnce(&tokio::net::TcpSocket),
) -> TcpStream {
    connect_to(ip, server.addr.parse().unwrap(), prepare)
}

/// The misbehave function's plain answer, on a connection kept open.
const GET_OK: &str = "GET /misbehave/ok HTTP/1.1\r\nhost: x\r\n\r\n";

/// Asserts that `conn` is served: GET_OK on it is answered 200 (`which` names it if not).
fn served(conn: &mut TcpStream, which: &str) {
    conn.write_all(GET_OK.as_bytes()).unwrap();
    let r = read_response(conn, Duration::from_secs(20));
    assert_eq!(r.map(|r| r.status), Some(200), "{which}");
}

/// Whether a new connection from `ip` is served (200) now. A client at its cap has it closed,
/// or reset where the request was already sent (which read_response takes as a failure): either
/// is "not yet" here, for a caller that waits for the server to see a connection of its close.
pub(super) fn served_on_a_new_connection(ip: &str, server: &Server) -> bool {
    let mut conn = connect_from(ip, server);
    let get = "GET /misbehave/ok HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n";
    let mut raw = Vec::new();
    conn.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    conn.write_all(get.as_bytes()).is_ok()
        && conn.read_to_end(&mut raw).is_ok()
        && raw.starts_with(b"HTTP/1.1 200")
}

/// A connection to `to` from local address `ip` (IPv4 or IPv6), `prepare` given the socket
/// before it connects.
fn connect_to(
    ip: &str,
    to: std::net::SocketAddr,
    prepare: impl FnOnce(&tokio::net::TcpSocket),
) -> TcpStream {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
        .unwrap();
    rt.block_on(async {
        let from: std::net::IpAddr = ip.parse().unwrap();
        let socket = match from {
            std::net::IpAddr::V4(_) => tokio::net::TcpSocket::new_v4(),
            std::net::IpAddr::V6(_) => tokio::net::TcpSocket::new_v6(),
        }
        .unwrap();
        socket.bind((from, 0).into()).unwrap();
        prepare(&socket);
        let conn = socket.connect(to).await.unwrap();
        let conn = conn.into_std().unwrap();
        conn.set_nonblocking(false).unwrap();
        conn
    })
}

#[test]
fn a_client_at_its_connection_cap_has_its_next_connection_closed_and_other_clients_are_served() {
    let repo = misbehave_repo("client-cap", "");
    let server = Server::start(&repo.dir, &["--max-connections-per-client", "2"], &[]);
    // One client (127.0.0.1) holds two connections open.
    let mut held: Vec<_> = (0..2)
        .map(|i| {
            let mut conn = connect_from("127.0.0.1", &server);
            served(&mut conn, &format!("127.0.0.1's connection {i}"));
            conn
        })
        .collect();
    // Its third is closed at once, unanswered: its own excess, which no other client waits for.
    closed_unanswered(connect_from("127.0.0.1", &server), "127.0.0.1's third");
    // Another client is served meanwhile, and sees the refusal counted.
    let mut other = connect_from("127.0.0.2", &server);
    served(&mut other, "127.0.0.2's connection");
    drop(other);
    assert_eq!(refused_per_client(connect_from("127.0.0.2", &server)), 1.0);
    // Once one of its connections closes, the first client connects again.
    drop(held.pop());
    // Until the server has seen that connection close, the client is still at its cap.
    assert!(
        eventually(Duration::from_secs(20), || {
            served_on_a_new_connection("127.0.0.1", &server)
        }),
        "127.0.0.1 was not served again once it held one connection"
    );
}

/// `gpuhost_connections_refused_per_client_total`, read on `conn`: a connection of a client
/// under its cap (the tests' own default client may not be).
fn refused_per_client(mut conn: TcpStream) -> f64 {
    conn.write_all(b"GET /metrics HTTP/1.1\r\nhost: x\r\n\r\n")
        .unwrap();
    let metrics = read_response(&mut conn, Duration::from_secs(20)).expect("/metrics");
    super::Metrics::parse(&metrics.text()).sum("gpuhost_connections_refused_per_client_total", &[])
}

/// Asserts that the server closes `conn`, a connection past its client's cap, without
/// answering the request sent on it.
fn closed_unanswered(mut conn: TcpStream, which: &str) {
    let _ = conn.write_all(GET_OK.as_bytes());
    conn.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut got = Vec::new();
    match conn.read_to_end(&mut got) {
        Ok(_) => assert!(
            got.is_empty(),
            "{which} was answered: {:?}",
            String::from_utf8_lossy(&got)
        ),
        Err(e) => assert!(
            !matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut),
            "{which} was left open, not closed at once"
        ),
    }
}

/// A dual-stack listener (`[::]`) sees an IPv4 client as `::ffff:a.b.c.d`, whose /64 prefix,
/// all zeros, every IPv4 client shares: each must still be a client of its own, as on an IPv4
/// listener, while an IPv6 client is its /64 (unit-tested in gpuhost-serve's clients.rs: this
/// machine's loopback has one IPv6 address, ::1, so no two addresses of a /64 can connect here).
#[test]
fn on_a_dual_stack_listener_each_ipv4_client_and_the_ipv6_loopback_have_a_cap_of_their_own() {
    let repo = misbehave_repo("client-cap-v6", "");
    let server =
        Server::start_listening(&repo.dir, "[::]:0", &["--max-connections-per-client", "1"]);
    let port: u16 = server.addr.rsplit(':').next().unwrap().parse().unwrap();
    let v4: std::net::SocketAddr = ([127, 0, 0, 1], port).into();
    let v6: std::net::SocketAddr = (std::net::Ipv6Addr::LOCALHOST, port).into();
    let served_from = |from: &str, to| {
        let mut conn = connect_to(from, to, |_| {});
        served(&mut conn, &format!("{from}'s first connection"));
        conn
    };
    // Each holds its one connection open, served.
    let _held = [
        served_from("127.0.0.7", v4),
        served_from("127.0.0.8", v4),
        served_from("::1", v6),
    ];
    for (from, to) in [("127.0.0.7", v4), ("::1", v6)] {
        closed_unanswered(connect_to(from, to, |_| {}), &format!("{from}'s second"));
    }
    // Read by a fourth client: the test's own default one, ::1 through [::], is at its cap.
    let reader = connect_to("127.0.0.9", v4, |_| {});
    assert_eq!(refused_per_client(reader), 2.0);
}

/// The most memory the server process has held (Linux's VmHWM), in bytes.
fn peak_memory(server: &Server) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", server.child.id())).unwrap();
    let kib = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().strip_suffix("kB"))
        .and_then(|v| v.trim().parse::<u64>().ok())
        .expect("VmHWM in /proc/PID/status");
    kib << 10
}

#[test]
fn a_body_sent_in_one_byte_chunks_is_held_at_about_its_length_not_dozens_of_times_it() {
    let repo = misbehave_repo("tiny-chunks", "");
    // Parsing a million chunks takes seconds on a loaded 2-core machine: time enough for it.
    let server = Server::start(&repo.dir, &["--body-read-timeout", "120"], &[]);
    assert_eq!(
        super::request(&server.addr, "GET", "/misbehave/ok", b"").status,
        200
    );
    let before = peak_memory(&server);
    // 1 MiB of body in one-byte chunks: 6 MiB on the wire, within the default 16 MiB
    // max_body_bytes and 256 MiB buffer budget, which count its 1 MiB.
    let chunks = 1 << 20;
    let mut wire = Vec::with_capacity(chunks * 6 + 5);
    for _ in 0..chunks {
        wire.extend_from_slice(b"1\r\nx\r\n");
    }
    wire.extend_from_slice(b"0\r\n\r\n");
    let head = "POST /misbehave/ok HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\n\r\n";
    let mut conn = send(&server, head, b"");
    // Written beside the read: a server that answers early (an error) stops reading.
    let mut writer = conn.try_clone().unwrap();
    let sent = std::thread::spawn(move || writer.write_all(&wire).is_ok());
    let r = read_response(&mut conn, Duration::from_secs(120)).expect("an answer");
    assert_eq!(r.status, 200, "{}", error_of(&r));
    assert!(sent.join().unwrap(), "the body was not all sent");
    // Kept as a list of frames, each chunk held a 32-byte handle and the read buffer it points
    // into: the server's peak grew by tens of MiB for this 1 MiB body.
    let grew = peak_memory(&server).saturating_sub(before);
    assert!(
        grew < 16 << 20,
        "the server's peak memory grew by {} MiB for a 1 MiB body",
        grew >> 20
    );
}

#[test]
fn a_function_allowing_bodies_larger_than_the_server_buffers_is_loaded_with_a_warning() {
    let repo = misbehave_repo("body-over-budget", "[serve]\nmax_body_bytes = 20000\n");
    let server = Server::start(&repo.dir, &["--max-buffered-body-bytes", "10000"], &[]);
    assert_eq!(
        super::request(&server.addr, "GET", "/misbehave/ok", b"").status,
        200
    );
    let logs = server.logs();
    assert!(
        logs.lines()
            .any(|l| l.contains("WARN") && l.contains("--max-buffered-body-bytes")),
        "no warning naming the flag:\n{logs}"
    );
}

/// The soft and hard open-file limits of process `pid` (/proc/PID/limits).
fn open_file_limits(pid: u32) -> (String, String) {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .expect("Max open files in /proc/PID/limits");
    let mut fields = line["Max open files".len()..].split_whitespace();
    let soft = fields.next().unwrap_or_default().to_string();
    let hard = fields.next().unwrap_or_default().to_string();
    (soft, hard)
}

#[test]
fn the_server_raises_its_open_file_soft_limit_and_warns_when_the_hard_one_is_below_its_connection_cap()
 {
    use std::os::unix::process::CommandExt;
    let repo = misbehave_repo("nofile", "");
    // Started with a soft limit of 512 (the hard one as it is), and a cap no limit allows.
    let server = Server::start_with(
        &repo.dir,
        &["--max-connections", "4000000000"],
        &[],
        |cmd| {
            // SAFETY: between fork and exec the closure only calls getrlimit and setrlimit, which
            // are async-signal-safe, on an rlimit of its own stack.
            unsafe {
                cmd.pre_exec(|| {
                    let mut l = libc::rlimit {
                        rlim_cur: 0,
                        rlim_max: 0,
                    };
                    if libc::getrlimit(libc::RLIMIT_NOFILE, &mut l) == 0 && l.rlim_max > 512 {
                        l.rlim_cur = 512;
                        libc::setrlimit(libc::RLIMIT_NOFILE, &l);
                    }
                    Ok(())
                });
            }
        },
    );
    assert_eq!(
        super::request(&server.addr, "GET", "/misbehave/ok", b"").status,
        200
    );
    let (soft, hard) = open_file_limits(server.child.id());
    assert_eq!(
        soft, hard,
        "the soft open-file limit was not raised to the hard one"
    );
    let logs = server.logs();
    assert!(
        logs.lines()
            .any(|l| l.contains("WARN") && l.contains("--max-connections")),
        "no warning that the open-file limit is below the connection cap:\n{logs}"
    );
}
