//! `gpuhost bench --native-http ADDR`: the baseline of the serve benchmark (scripts/bench-serve.sh).
//! An axum server answering `GET /stamp` with the same GPU work as the `http-stamp` function of
//! `gpuhost serve`, done natively in process: the stamp bundle loaded once, then per request a
//! 32-word buffer allocated and zeroed, `stamp` launched on a fresh stream, its first word
//! downloaded, answered in hex. The fill, the launch and the download are queued in stream order
//! and only the download is awaited: one wait per request, as the guest's `read-after` (a
//! launch awaited and then a download would be two, a handicap the guest does not have). The
//! difference between the two is the cost of the wasm Store, the component call and the
//! wasi:http plumbing.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result};
use axum::extract::State;
use axum::http::StatusCode;
use gpuhost::{Arg, LaunchConfig, Registry};

struct Native {
    host: Arc<gpuhost::Host>,
    registry: Arc<Registry>,
}

async fn stamp(State(n): State<Arc<Native>>) -> (StatusCode, String) {
    match stamp_once(&n).await {
        Ok(v) => (StatusCode::OK, format!("{v:08x}")),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

async fn stamp_once(n: &Native) -> gpuhost::Result<u32> {
    let kernel = n.registry.kernel("stamp")?;
    let out = n.host.alloc(32 * 4)?;
    let stream = n.host.stream()?;
    // Fill, launch and download in stream order; the download, awaited, ends after both (a
    // failed fill or launch fails it too), so their own completions are not awaited.
    drop(stream.fill(&out, 0, 32 * 4, 0)?);
    let args = [Arg::Buffer(&out, 0), Arg::U32(32)];
    drop(stream.launch(&kernel, LaunchConfig::for_elements(32, 32), &args)?);
    let mut bytes = [0u8; 4];
    stream.download(&out, 0, &mut bytes).await?;
    Ok(u32::from_le_bytes(bytes))
}

/// Serves until SIGTERM or Ctrl-C.
pub fn run(addr: &str, bundle: PathBuf, device: usize) -> Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the tokio runtime")?;
    runtime.block_on(async move {
        let host = gpuhost::host(device)?;
        let registry = Registry::load(&host, &bundle)
            .with_context(|| format!("loading the bundle {}", bundle.display()))?;
        let state = Arc::new(Native { host, registry });
        let app = axum::Router::new()
            .route("/stamp", axum::routing::get(stamp))
            .with_state(state);
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .with_context(|| format!("cannot listen on {addr}"))?;
        println!("listening on http://{}", listener.local_addr()?);
        axum::serve(listener, app)
            .with_graceful_shutdown(gpuhost_serve::shutdown_signal())
            .await?;
        Ok(())
    })
}
