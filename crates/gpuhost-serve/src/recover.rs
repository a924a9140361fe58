//! Recovery from a lost CUDA context. Another part of the process may reset a device's primary
//! context (`cuDevicePrimaryCtxReset`): gpuhost re-retains it as a new generation, but every
//! version loaded before holds dead device code there (its bundle, its warm Stores). Left
//! alone, every later request of those functions would fail while the server still said it was
//! ready. Instead the first request (or readiness probe) that finds its function's version
//! stale reloads the function from the repository, once for everyone waiting, and is served by
//! the new version; the dead one is drained and dropped in the background, since its requests
//! fail fast anyway. A request already running on the device when its context went may fail
//! with its guest's error: no request is retried, as a guest's side effects are its own.

use std::sync::Arc;

use crate::error::Result;
use crate::function::Function;
use crate::server::Server;

impl Server {
    /// Reloads `function` if its serving version lost its device code to a context loss;
    /// returns whether it did. Concurrent callers wait for the one reload.
    pub async fn recover(self: &Arc<Self>, function: &Arc<Function>) -> Result<bool> {
        if !function.stale() {
            return Ok(false);
        }
        let one_at_a_time = function.loading.lock().await;
        // Reloaded (or unloaded) by whoever held the lock before.
        if !function.stale() {
            return Ok(false);
        }
        let name = function.name.clone();
        tracing::warn!(function = %name, "a device's CUDA context was lost: reloading the function");
        let dir = self.repository.join(&name);
        let (report, old) = self.load_and_publish(function, &dir).await?;
        drop(one_at_a_time);
        tracing::info!(function = %name, version = report.version, "recovered from the context loss");
        if let Some(old) = old {
            let server = self.clone();
            tokio::spawn(async move {
                let released = old.drain_and_release(server.drain_timeout).await;
                server.note_release(&name, Some(&released));
            });
        }
        Ok(true)
    }

    /// Starts the recovery of every function whose version a context loss left stale, without
    /// waiting for it (a readiness probe's: it answers at once, and is ready again once done).
    pub(crate) fn recover_lost_in_background(self: &Arc<Self>) {
        for function in self.lost_functions() {
            let server = self.clone();
            tokio::spawn(async move {
                if let Err(e) = server.recover(&function).await {
                    tracing::error!(function = %function.name, error = %e, "recovery from the context loss failed");
                }
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use axum::body::Body;
    use axum::http::{Request, StatusCode};
    use http_body_util::BodyExt as _;
    use tower::ServiceExt as _;

    use gpuhost::sys;

    /// What another part of the process might do: reset device 0's primary context, destroying
    /// everything in it.
    fn foreign_reset() {
        let mut dev = 0;
        // SAFETY: valid out pointer; the driver is initialised (the server's host exists).
        let r = unsafe { sys::cuDeviceGet(&mut dev, 0) };
        assert_eq!(r, sys::CUresult::CUDA_SUCCESS);
        // SAFETY: on purpose; the server must notice and recover.
        let r = unsafe { sys::cuDevicePrimaryCtxReset_v2(dev) };
        assert_eq!(r, sys::CUresult::CUDA_SUCCESS);
    }

    async fn saxpy(router: &axum::Router) -> (StatusCode, String, String) {
        let req = Request::post("http://localhost/saxpy")
            .body(Body::from(r#"{"a": 2, "x": [1, 2], "y": [10, 20]}"#))
            .unwrap();
        let resp = router.clone().oneshot(req).await.unwrap();
        let status = resp.status();
        let version = resp
            .headers()
            .get(crate::VERSION_HEADER)
            .map(|v| v.to_str().unwrap().to_string())
            .unwrap_or_default();
        let body = resp.into_body().collect().await.unwrap().to_bytes();
        (status, version, String::from_utf8_lossy(&body).into_owned())
    }

    async fn ready(router: &axum::Router) -> StatusCode {
        let req = Request::get("/v2/health/ready")
            .body(Body::empty())
            .unwrap();
        router.clone().oneshot(req).await.unwrap().status()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn after_a_foreign_context_reset_requests_are_served_by_a_reloaded_version() {
        let root = std::path::PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
        let opts = crate::ServeOptions::new(root.join("../../examples/repository"));
        let server = crate::Server::new(&opts).unwrap();
        server.load("saxpy").await.unwrap();
        let router = crate::router(server.clone());
        let (status, version, body) = saxpy(&router).await;
        assert_eq!((status, version.as_str()), (StatusCode::OK, "1"), "{body}");
        assert!(body.contains("[12.0,24.0]"), "{body}");

        foreign_reset();
        // No request has touched the device since: the probe notices, answers not ready, and
        // starts the reload; it is ready again once the new version serves.
        assert_eq!(ready(&router).await, StatusCode::SERVICE_UNAVAILABLE);
        let deadline = Instant::now() + Duration::from_secs(30);
        while ready(&router).await != StatusCode::OK {
            assert!(
                Instant::now() < deadline,
                "never ready again after the reset"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let (status, version, body) = saxpy(&router).await;
        assert_eq!((status, version.as_str()), (StatusCode::OK, "2"), "{body}");
        assert!(body.contains("[12.0,24.0]"), "{body}");

        // A reset the probe does not see: the request that meets it first may fail (its guest
        // met the dead context), and every one after it is served by a reloaded version.
        foreign_reset();
        let (status, version, body) = saxpy(&router).await;
        if status != StatusCode::OK {
            assert_eq!(version, "2", "{status} {body}");
        }
        for _ in 0..4 {
            let (status, version, body) = saxpy(&router).await;
            assert_eq!((status, version.as_str()), (StatusCode::OK, "3"), "{body}");
            assert!(body.contains("[12.0,24.0]"), "{body}");
        }
        assert_eq!(ready(&router).await, StatusCode::OK);
        server.unload_all().await;
    }
}
