//! `gpuhost serve --repository DIR`: serves the repository's HTTP functions (see gpuhost-serve)
//! until SIGTERM or Ctrl-C, then shuts down gracefully. Prints `listening on http://ADDR` once
//! the socket is bound (with `--listen 127.0.0.1:0` the port the system picked), then
//! `control on http://ADDR` when the repository endpoints are served apart (`--control-listen`).

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use gpuhost_serve::{Devices, ServeOptions, Server};

/// Flags of `gpuhost serve`.
#[derive(clap::Args)]
pub struct Args {
    /// The repository: one folder per function (function.wasm, optional bundle/ and
    /// function.toml). Example: examples/repository.
    #[arg(long)]
    repository: PathBuf,
    /// Address to listen on (port 0: any free port).
    #[arg(long, default_value = "127.0.0.1:8080")]
    listen: String,
    /// Serve the repository endpoints (POST /v2/repository/index, models/NAME/load and
    /// /unload) on this address only, apart from the functions: the public listener then
    /// answers them 403, so clients that can call functions cannot swap or unload them. Bind it
    /// where only operators reach it (127.0.0.1:8081, then `kubectl port-forward`). Without
    /// it, --listen serves them too.
    #[arg(long)]
    control_listen: Option<String>,
    /// Devices to serve on: `all` or ordinals like 0,1.
    #[arg(long, default_value = "all")]
    devices: Devices,
    /// Seconds a swap, an unload or shutdown waits for requests in flight.
    #[arg(long, default_value_t = 30)]
    drain_timeout: u64,
    /// Seconds a connection may take to send a request's head, from its opening or from its
    /// last response; it is closed then (slow or idle clients hold no socket for long).
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..))]
    header_read_timeout: u64,
    /// Seconds sent response data may stay unacknowledged (a client that stopped reading)
    /// before the connection is dropped (Linux's TCP_USER_TIMEOUT).
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..))]
    send_timeout: u64,
    /// Seconds a request's body may take to arrive after its head (never longer than its
    /// function's timeout_ms); past it the request gets 408. The body is read before the
    /// request takes a place in its function's queue, so a slow sender holds none.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    body_read_timeout: u64,
    /// Request-body bytes the server buffers at once, over all requests (each body's from its
    /// first byte to its request's end); a body that would pass it gets 503 with Retry-After,
    /// and one longer than all of it 413.
    #[arg(long, default_value_t = 256 << 20, value_parser = clap::value_parser!(u64).range(1..))]
    max_buffered_body_bytes: u64,
    /// Connections open at once; at the cap no more are accepted until one closes (the
    /// kernel's listen backlog holds them meanwhile).
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u32).range(1..))]
    max_connections: u32,
    /// Connections one client (its IPv4 address, or its IPv6 /64) may hold open on --listen (not on
    /// --control-listen); its next one is closed at once, so one client cannot take
    /// --max-connections from the others. Off by default: behind a
    /// proxy, an ingress or a source-NATed Kubernetes Service every connection comes from a few
    /// addresses, which a cap sized for one client would starve. Set it where clients connect
    /// straight to the server.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    max_connections_per_client: Option<u32>,
    /// Seconds between SIGTERM turning readiness false and the listener closing (requests keep
    /// being served meanwhile), so load balancers stop sending first.
    #[arg(long, default_value_t = 0)]
    shutdown_delay: u64,
    /// Start with nothing loaded (load with POST /v2/repository/models/NAME/load).
    #[arg(long)]
    no_load: bool,
    /// Log lines as JSON objects (one per line) instead of text.
    #[arg(long)]
    log_json: bool,
    /// Log level: error, warn, info, debug, trace.
    #[arg(long, default_value = "info")]
    log_level: tracing::Level,
    /// Tokio worker threads (default: two fewer than the cores from 8 cores up, else one per
    /// core; see gpuhost_serve::worker_threads).
    #[arg(long)]
    worker_threads: Option<usize>,
}

pub fn run(a: Args) -> anyhow::Result<()> {
    let logs = tracing_subscriber::fmt()
        .with_max_level(a.log_level)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    if a.log_json {
        logs.json().init();
    } else {
        logs.init();
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let workers = a
        .worker_threads
        .unwrap_or_else(|| gpuhost_serve::worker_threads(cores))
        .max(1);
    tracing::info!(workers, cores, "tokio runtime");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .context("starting the tokio runtime")?;
    runtime.block_on(async move {
        let mut opts = ServeOptions::new(&a.repository);
        opts.devices = a.devices;
        opts.drain_timeout = Duration::from_secs(a.drain_timeout);
        opts.header_read_timeout = Duration::from_secs(a.header_read_timeout);
        opts.send_timeout = Duration::from_secs(a.send_timeout);
        opts.body_read_timeout = Duration::from_secs(a.body_read_timeout);
        opts.max_buffered_body_bytes = a.max_buffered_body_bytes;
        opts.max_connections = a.max_connections as usize;
        opts.max_connections_per_client = a.max_connections_per_client.map(|n| n as usize);
        let server = Server::new(&opts)?;
        open_file_room(a.max_connections);
        let listener = tokio::net::TcpListener::bind(&a.listen)
            .await
            .with_context(|| {
                format!(
                    "cannot listen on {} (pick a free address with --listen)",
                    a.listen
                )
            })?;
        let addr = listener.local_addr()?;
        let control = match &a.control_listen {
            Some(at) => Some(tokio::net::TcpListener::bind(at).await.with_context(|| {
                format!("cannot listen on {at} (pick a free address with --control-listen)")
            })?),
            None => None,
        };
        let control_addr = control.as_ref().map(|l| l.local_addr()).transpose()?;
        // Whichever listener serves the repository endpoints, --listen or --control-listen:
        // beyond loopback every client that reaches it can load and unload functions.
        let serving_control = control_addr.unwrap_or(addr);
        if !serving_control.ip().is_loopback() {
            tracing::warn!(%serving_control, "the repository endpoints (load, unload) are served to every client that reaches this address; serve them on a loopback address (--control-listen 127.0.0.1:PORT) unless only operators can reach it");
        }
        if !a.no_load {
            server.load_all().await;
        }
        tracing::info!(%addr, devices = ?server.devices(), "serving");
        println!("listening on http://{addr}");
        if let Some(at) = control_addr {
            tracing::info!(%at, "repository endpoints served here only");
            println!("control on http://{at}");
        }
        std::io::stdout().flush()?;
        let shutdown = gpuhost_serve::Shutdown {
            delay: Duration::from_secs(a.shutdown_delay),
            drain_timeout: opts.drain_timeout,
        };
        let listeners = gpuhost_serve::Listeners {
            public: listener,
            control,
        };
        gpuhost_serve::serve(server, listeners, gpuhost_serve::shutdown_signal(), shutdown)
            .await?;
        Ok(())
    })
}

/// Descriptors the server holds beside its connections: listeners, the driver's, the runtime's,
/// the guests' and the logs'.
const RESERVED_FILES: u64 = 256;

/// Each connection is a file descriptor, and the usual soft limit of 1024 would stop the accept
/// loop long before `--max-connections` (each accept then failing with EMFILE until a connection
/// closes): the soft limit is raised to the hard one, as Go's runtime does, and a hard limit
/// still too low for `max_connections` is warned about.
fn open_file_room(max_connections: u32) {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the rlimit it is given, which lives on this frame.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return;
    }
    if limit.rlim_cur < limit.rlim_max {
        let raised = libc::rlimit {
            rlim_cur: limit.rlim_max,
            rlim_max: limit.rlim_max,
        };
        // SAFETY: setrlimit reads the rlimit it is given, which lives on this frame; raising
        // the soft limit up to the hard one needs no privilege.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            limit = raised;
        }
    }
    let open_files = limit.rlim_cur;
    if open_files < u64::from(max_connections) + RESERVED_FILES {
        tracing::warn!(
            open_files,
            max_connections,
            "the open-file limit leaves fewer descriptors than --max-connections needs: past it, accepting fails until a connection closes; raise the hard limit (ulimit -Hn, a container's nofile) or lower --max-connections"
        );
    }
}
