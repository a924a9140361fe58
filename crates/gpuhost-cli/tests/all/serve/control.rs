//! The repository endpoints served apart (`--control-listen`): clients of the public listener
//! can call functions but cannot load, swap or unload them.

use super::{Server, request, root};

#[test]
fn with_a_control_listener_only_it_loads_and_unloads_and_the_public_one_refuses_with_403() {
    let server = Server::start(
        &root().join("examples/repository"),
        &["--control-listen", "127.0.0.1:0"],
        &[],
    );
    let control = server.control.clone().expect("a control address");
    let saxpy = br#"{"a": 2, "x": [1, 2], "y": [10, 20]}"#;
    let call = || server.post("/saxpy", saxpy);
    let first = call();
    assert_eq!(first.status, 200, "{}", first.text());
    assert_eq!(first.header("x-gpuhost-version"), Some("1"));

    // The public listener: every repository endpoint refused, naming where it is served.
    for path in [
        "/v2/repository/index",
        "/v2/repository/models/saxpy/load",
        "/v2/repository/models/saxpy/unload",
    ] {
        let r = server.post(path, b"");
        assert_eq!(r.status, 403, "{path}: {}", r.text());
        let msg = r.json()["error"].as_str().unwrap_or_default().to_string();
        assert!(msg.contains("--control-listen"), "{path}: {msg}");
    }
    // Nothing was swapped or unloaded by those.
    assert_eq!(call().header("x-gpuhost-version"), Some("1"));

    // The control listener: health and the repository endpoints, nothing else.
    assert_eq!(
        request(&control, "GET", "/v2/health/ready", b"").status,
        200
    );
    assert_eq!(request(&control, "POST", "/saxpy", saxpy).status, 404);
    assert_eq!(request(&control, "GET", "/metrics", b"").status, 404);
    let index = request(&control, "POST", "/v2/repository/index", b"");
    assert_eq!(index.status, 200, "{}", index.text());
    assert!(index.text().contains("saxpy"), "{}", index.text());
    let load = request(&control, "POST", "/v2/repository/models/saxpy/load", b"");
    assert_eq!(load.status, 200, "{}", load.text());
    assert_eq!(load.json()["version"], "2");
    let swapped = call();
    assert_eq!(swapped.status, 200, "{}", swapped.text());
    assert_eq!(swapped.header("x-gpuhost-version"), Some("2"));
    let unload = request(&control, "POST", "/v2/repository/models/saxpy/unload", b"");
    assert_eq!(unload.status, 200, "{}", unload.text());
    // Unloaded: its route answers nothing, and it is not ready.
    assert_eq!(call().status, 404);
    assert_eq!(server.get("/v2/models/saxpy/ready").status, 503);
}

#[test]
fn without_a_control_listener_the_public_one_serves_the_repository_endpoints() {
    let server = Server::start(&root().join("examples/repository"), &[], &[]);
    assert!(server.control.is_none());
    let load = server.load("saxpy");
    assert_eq!(load.status, 200, "{}", load.text());
    assert_eq!(load.json()["version"], "2");
}

/// `--max-connections-per-client` bounds the public listener's clients only: every operator
/// tool on the control listener's loopback is the one client 127.0.0.1, and a cap there would
/// refuse an operator's own parallel probes and loads while protecting nothing (whoever reaches
/// it can unload every function anyway).
#[test]
fn the_per_client_connection_cap_leaves_the_control_listener_alone() {
    use std::io::{Read, Write};
    let server = Server::start(
        &root().join("examples/repository"),
        &[
            "--control-listen",
            "127.0.0.1:0",
            "--max-connections-per-client",
            "1",
        ],
        &[],
    );
    let control = server.control.clone().expect("a control address");
    // Three connections held open to the control listener, then a request on each.
    let mut held: Vec<_> = (0..3)
        .map(|_| std::net::TcpStream::connect(&control).unwrap())
        .collect();
    for conn in &mut held {
        conn.set_read_timeout(Some(std::time::Duration::from_secs(20)))
            .unwrap();
        conn.write_all(b"GET /v2/health/ready HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
            .unwrap();
    }
    for (i, conn) in held.iter_mut().enumerate() {
        let mut raw = Vec::new();
        let _ = conn.read_to_end(&mut raw);
        let text = String::from_utf8_lossy(&raw);
        assert!(text.starts_with("HTTP/1.1 200"), "connection {i}: {text:?}");
    }
    assert_eq!(
        server
            .metrics()
            .sum("gpuhost_connections_refused_per_client_total", &[]),
        0.0
    );
}
