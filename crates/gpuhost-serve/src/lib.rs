//! `gpuhost serve`: an HTTP server of GPU functions. A repository folder holds one folder per
//! function: `function.wasm`, a component of the `gpuhost:cuda/http-function` world (the
//! standard `wasi:http/proxy` world plus gpuhost:cuda), an optional `bundle/` whose kernels the
//! function gets by name, and an optional `function.toml` (route, devices, quotas, queue).
//!
//! Each request runs in a fresh wasmtime Store instantiated from the version's pre-instantiated
//! component; the component is compiled and the bundle loaded (PTX JIT-compiled) once per
//! version and device, so no request pays either. New versions load beside the serving one and
//! are published atomically; the old one is drained, then its device code released
//! (Triton's repository extension: `POST /v2/repository/models/{name}/load`). KServe v2 health,
//! Prometheus `/metrics`, a status page at `/`, backpressure (429), timeouts and graceful
//! shutdown make it fit for Kubernetes (see deploy/).
#![deny(missing_docs)]

mod body;
mod clients;
mod config;
mod cpu_clock;
mod deadline;
mod engine;
mod error;
mod failure;
mod function;
mod invoke;
mod log_budget;
mod metrics;
mod recover;
mod routes;
mod server;
mod stderr;
mod version;
mod warm;

use std::sync::Arc;
use std::time::Duration;

pub use config::{Devices, FunctionConfig};
pub use error::{Error, Result};
pub use failure::REQUEST_ID_HEADER;
pub use function::{Function, State};
pub use invoke::VERSION_HEADER;
pub use metrics::{Metrics, Outcome};
pub use routes::{control_router, public_router, router};
pub use server::{IndexEntry, LoadReport, ServeOptions, Server};
pub use version::{ReleaseOutcome, Version};

/// Machines with fewer cores than this give every core to tokio's workers (see
/// [`worker_threads`]).
const RESERVE_FROM_CORES: usize = 8;
/// Cores [`worker_threads`] leaves to threads other than tokio's workers.
const RESERVED_CORES: usize = 2;
/// The longest request head (request line and headers) a connection takes: a longer one is
/// refused with 431 and the connection closed. hyper's default bound is its read buffer, 408 KiB,
/// held per connection and counted in no limit: clients sending long heads on the default
/// 10 000 connections held about 4 GB. hyper checks this cap as the head arrives, so a
/// connection holds at most about twice it meanwhile. 64 KiB is more than common defaults allow
/// a head (Node.js 16 KiB, nginx 8 KiB a header line). hyper applies it to a chunked body's
/// trailers too (which the server drops unread; its default there is 16 KiB).
const MAX_HEAD_BYTES: usize = 64 << 10;

/// The tokio worker threads `gpuhost serve` runs on a machine of `cores` cores: two fewer than
/// the cores from [`RESERVE_FROM_CORES`] up, all of them below. Other threads of the process
/// run hot beside the workers under load (each device's completion thread, ~0.9 of a core on
/// the H200; a sandboxed function's resetter and watchdog, ~0.7; in the benchmark the load
/// generator too, ~1.6), so a worker per core oversubscribes the cores, and a worker preempted
/// mid-request holds what other requests wait for (the instance pool's locks, a registry's).
/// On the H200 (16 cores; bench/h200-runs/2026-12-03-serve-cpu2) 14 workers served 4-14% more
/// requests a second than 16 at 16 and 64 connections, with a p99 10-33% lower, in two
/// interleaved A/B runs.
pub fn worker_threads(cores: usize) -> usize {
    if cores >= RESERVE_FROM_CORES {
        cores - RESERVED_CORES
    } else {
        cores.max(1)
    }
}

/// How [`serve`] shuts down.
#[derive(Debug, Clone, Copy)]
pub struct Shutdown {
    /// Time between readiness turning false and the listener closing, so load balancers stop
    /// sending first (Kubernetes' preStop sleep can do this instead).
    pub delay: Duration,
    /// Longest wait for requests in flight once the listener is closed.
    pub drain_timeout: Duration,
}

/// Where [`serve`] listens: the public listener, and optionally a control listener of its own
/// for the repository extension (index, load, unload), which the public one then refuses
/// ([`public_router`]). A bare listener converts into one that serves everything.
#[derive(Debug)]
pub struct Listeners {
    /// Functions, health, metrics and the status page (and, without `control`, everything).
    pub public: tokio::net::TcpListener,
    /// The repository extension and health only ([`control_router`]).
    pub control: Option<tokio::net::TcpListener>,
}

impl From<tokio::net::TcpListener> for Listeners {
    fn from(public: tokio::net::TcpListener) -> Self {
        Self {
            public,
            control: None,
        }
    }
}

/// Serves `server` on `listeners` until `signal` completes, then shuts down gracefully:
/// readiness turns false, after `delay` no new connection is accepted, requests in flight
/// finish (up to `drain_timeout`), and every function's version is drained and released.
///
/// Each connection is hyper's HTTP/1.1 with a timer, so its header read timeout
/// ([`ServeOptions::header_read_timeout`]) applies: `axum::serve` gives hyper no timer, and a
/// connection that never finished its head, or idled after a response, was kept forever.
pub async fn serve(
    server: Arc<Server>,
    listeners: impl Into<Listeners>,
    signal: impl Future<Output = ()> + Send + 'static,
    shutdown: Shutdown,
) -> Result<()> {
    let Listeners { public, control } = listeners.into();
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(server.header_read_timeout)
        .max_header_size(MAX_HEAD_BYTES);
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let app = match control {
        Some(_) => public_router(server.clone()),
        None => router(server.clone()),
    };
    let per_client = server.max_connections_per_client;
    let public = accept(public, app, http.clone(), &server, per_client, &graceful);
    // The control listener's connections have a cap of their own, so operators still reach it
    // while the public one is full; and no cap per client: every operator tool on its loopback
    // is the one client 127.0.0.1, and whoever reaches it can unload every function anyway.
    let control = async {
        match control {
            Some(l) => {
                let app = control_router(server.clone());
                accept(l, app, http, &server, None, &graceful).await
            }
            None => std::future::pending().await,
        }
    };
    // Boxed so that dropping it closes the listeners and ends their borrow of `graceful`.
    let mut accepting = Box::pin(async {
        let (never, _) = tokio::join!(public, control);
        never
    });
    tokio::select! {
        never = &mut accepting => match never {},
        () = signal => {}
    }
    tracing::info!(delay = ?shutdown.delay, "shutting down: not ready");
    server.start_draining();
    // Keep serving (readiness false) while load balancers take the endpoint out.
    let _ = tokio::time::timeout(shutdown.delay, &mut accepting).await;
    drop(accepting);
    tracing::info!("no new connections; draining requests in flight");
    let drain_timeout = shutdown.drain_timeout;
    if tokio::time::timeout(drain_timeout, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!(
            ?drain_timeout,
            "requests still in flight after the drain timeout"
        );
    }
    server.unload_all().await;
    tracing::info!("shut down");
    Ok(())
}

/// Accepts connections on `listener` and serves each with `app` on a task of its own, watched
/// by `graceful`; ends only when dropped. An accept error is logged and, unless it concerns
/// only the connection refused (as `axum::serve` does), waited out for a second: out of file
/// descriptors, say, where retrying at once would spin. Each connection gets the server's send
/// timeout as its TCP_USER_TIMEOUT (Linux): hyper has no write timeout, so a client that never
/// read its response held the connection, and the response, for as long as it stayed
/// connected. At [`ServeOptions::max_connections`] open it accepts none until one closes: the
/// kernel's listen backlog holds the next ones meanwhile, where accepting and dropping them
/// would end connections that could have been served a moment later. A client (peer IPv4
/// address, or IPv6 /64 prefix: crate::clients) with `per_client` open
/// ([`ServeOptions::max_connections_per_client`] on the public listener) has its next one
/// closed at once (crate::clients says why).
async fn accept(
    listener: tokio::net::TcpListener,
    app: axum::Router,
    http: hyper::server::conn::http1::Builder,
    server: &Server,
    per_client: Option<usize>,
    graceful: &hyper_util::server::graceful::GracefulShutdown,
) -> std::convert::Infallible {
    use std::io::ErrorKind;
    let send_timeout = server.send_timeout;
    let open = Arc::new(tokio::sync::Semaphore::new(
        server
            .max_connections
            .min(tokio::sync::Semaphore::MAX_PERMITS),
    ));
    let per_client = per_client.map(clients::PerClient::new);
    loop {
        // Never closed, so never an error.
        let Ok(place) = open.clone().acquire_owned().await else {
            return std::future::pending().await;
        };
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                let theirs = matches!(
                    e.kind(),
                    ErrorKind::ConnectionRefused
                        | ErrorKind::ConnectionAborted
                        | ErrorKind::ConnectionReset
                );
                if !theirs {
                    tracing::warn!(error = %e, "accepting a connection failed; retrying in 1 s");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
                continue;
            }
        };
        let client = match &per_client {
            Some(clients) => match clients.admit(peer.ip()) {
                Some(hold) => Some(hold),
                None => {
                    // Debug, not warn: a client past its cap could otherwise fill the log.
                    tracing::debug!(%peer, "closing a connection: its client is at --max-connections-per-client");
                    server.metrics.connections_refused_per_client.inc();
                    continue;
                }
            },
            None => None,
        };
        #[cfg(target_os = "linux")]
        if let Err(e) = socket2::SockRef::from(&stream).set_tcp_user_timeout(Some(send_timeout)) {
            tracing::warn!(error = %e, "setting a connection's send timeout (TCP_USER_TIMEOUT) failed");
        }
        #[cfg(not(target_os = "linux"))]
        let _ = send_timeout;
        let service = hyper_util::service::TowerToHyperService::new(app.clone());
        let conn =
            graceful.watch(http.serve_connection(hyper_util::rt::TokioIo::new(stream), service));
        let counted = invoke::GaugeHold::new(&server.metrics.connections_open);
        let metrics = server.metrics.clone();
        tokio::spawn(async move {
            // Given back as the connection ends, however it ends.
            let _open = (place, client, counted);
            if let Err(e) = conn.await {
                metrics.connection_error(&e);
                tracing::debug!(error = %e, "connection ended with an error");
            }
        });
    }
}

/// Completes on SIGTERM (Kubernetes' stop signal) or Ctrl-C.
pub async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_worker_count_leaves_two_cores_to_other_threads_from_eight_cores_up() {
        assert_eq!(super::worker_threads(16), 14);
        assert_eq!(super::worker_threads(8), 6);
        assert_eq!(super::worker_threads(7), 7);
        assert_eq!(super::worker_threads(2), 2);
        assert_eq!(super::worker_threads(0), 1);
    }
}
