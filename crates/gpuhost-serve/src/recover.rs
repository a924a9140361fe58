//! Recovery from a lost CUDA context. Another part of the process may reset a device's primary
//! context (`cuDevicePrimaryCtxReset`): gpuhost re-retains it as a new generation, but every
//! version loaded before holds dead device code there (its bundle, its warm Stores). Left
//! alone, every later request of those functions would fail while the server still said it was
//! ready. Instead the first request (or readiness probe) that finds its function's version
//! stale reloads the function from the repository, once for everyone waiting, and is served by
//! the new version; the dead one is drained and dropped in the background, since its requests
//! fail fast anyway. A request already running on the device when its context went may fail
//! with its guest's error: no request is retried, as a guest's side effects are its own. A
//! reload that fails (the function's folder broken meanwhile) is tried again at most once per
//! [`RETRY_AFTER`]: until then requests are refused at once, instead of each compiling and
//! loading the function again (the reason, which names the repository's files, goes to the log
//! under the request's id: crate::failure::recovery_failed).

use std::sync::{Arc, PoisonError};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::function::Function;
use crate::server::Server;

/// How long after a failed reload the next is tried.
pub(crate) const RETRY_AFTER: Duration = Duration::from_secs(1);

/// The reason of a reload that failed less than [`RETRY_AFTER`] ago, as the error to answer.
fn failed_recently(function: &Function) -> Option<Error> {
    let failed = function
        .recovery_failed
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    let (at, reason) = failed.as_ref()?;
    (at.elapsed() < RETRY_AFTER).then(|| recovery_failed(function, reason.clone()))
}

fn recovery_failed(function: &Function, reason: String) -> Error {
    Error::RecoveryFailed {
        function: function.name.clone(),
        reason,
        retry_ms: RETRY_AFTER.as_millis() as u64,
    }
}

impl Server {
    /// Reloads `function` if its serving version lost its device code to a context loss;
    /// returns whether it did. Concurrent callers wait for the one reload.
    pub async fn recover(self: &Arc<Self>, function: &Arc<Function>) -> Result<bool> {
        if !function.stale() {
            return Ok(false);
        }
        if let Some(e) = failed_recently(function) {
            return Err(e);
        }
        let one_at_a_time = function.loading.lock().await;
        // Reloaded (or unloaded) by whoever held the lock before, or failed to be just now.
        if !function.stale() {
            return Ok(false);
        }
        if let Some(e) = failed_recently(function) {
            return Err(e);
        }
        let name = function.name.clone();
        tracing::warn!(function = %name, "a device's CUDA context was lost: reloading the function");
        let dir = self.repository.join(&name);
        let loaded = self.load_and_publish(function, &dir).await;
        let mut failed = function
            .recovery_failed
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let (report, old) = match loaded {
            Ok(loaded) => {
                *failed = None;
                loaded
            }
            Err(e) => {
                *failed = Some((Instant::now(), e.to_string()));
                return Err(recovery_failed(function, e.to_string()));
            }
        };
        drop(failed);
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
    use std::path::PathBuf;
    use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

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

    /// Runs `test` in a child process of its own (the reset would break the other tests of this
    /// process), on a runtime like the server's.
    fn in_child(name: &str, test: impl std::future::Future<Output = ()>) {
        testkit::in_child(&format!("recover::tests::{name}"), || {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap()
                .block_on(test)
        });
    }

    #[test]
    fn after_a_foreign_context_reset_requests_are_served_by_a_reloaded_version() {
        in_child(
            "after_a_foreign_context_reset_requests_are_served_by_a_reloaded_version",
            served_by_a_reloaded_version(),
        );
    }

    async fn served_by_a_reloaded_version() {
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

    /// A copy of examples/repository/saxpy in a repository of its own, removed on drop.
    struct Repo(PathBuf);

    impl Repo {
        fn saxpy() -> Self {
            let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
            let from = root.join("../../examples/repository/saxpy");
            let nanos = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap()
                .as_nanos();
            let dir = std::env::temp_dir().join(format!("gpuhost-recover-{nanos}"));
            std::fs::create_dir_all(dir.join("saxpy/bundle")).unwrap();
            for f in [
                "function.wasm",
                "function.toml",
                "bundle/manifest.toml",
                "bundle/saxpy.ptx",
            ] {
                std::fs::copy(from.join(f), dir.join("saxpy").join(f)).unwrap();
            }
            Self(dir)
        }
    }

    impl Drop for Repo {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn failed_loads(server: &crate::Server) -> usize {
        let text = server.render_metrics();
        let line = text
            .lines()
            .find(|l| l.starts_with("gpuhost_swaps_total{") && l.contains(r#"outcome="failed""#));
        line.and_then(|l| l.rsplit(' ').next()?.parse().ok())
            .unwrap_or(0)
    }

    #[test]
    fn a_reload_that_fails_after_a_context_loss_is_refused_its_reason_logged_not_sent_and_retried_later()
     {
        in_child(
            "a_reload_that_fails_after_a_context_loss_is_refused_its_reason_logged_not_sent_and_retried_later",
            refused_then_tried_again(),
        );
    }

    async fn refused_then_tried_again() {
        let repo = Repo::saxpy();
        let server = crate::Server::new(&crate::ServeOptions::new(&repo.0)).unwrap();
        server.load("saxpy").await.unwrap();
        let router = crate::router(server.clone());
        assert_eq!(saxpy(&router).await.0, StatusCode::OK);

        let toml = repo.0.join("saxpy/function.toml");
        let good = std::fs::read_to_string(&toml).unwrap();
        std::fs::write(&toml, "route = 5\n").unwrap();
        foreign_reset();
        assert_eq!(ready(&router).await, StatusCode::SERVICE_UNAVAILABLE);
        let req = Request::post("http://localhost/saxpy")
            .body(Body::empty())
            .unwrap();
        let resp = router.clone().oneshot(req).await.unwrap();
        assert_eq!(resp.status(), StatusCode::SERVICE_UNAVAILABLE);
        let id = resp.headers().get(crate::REQUEST_ID_HEADER).cloned();
        let body = resp.into_body().collect().await.unwrap().to_bytes();
        let body = String::from_utf8_lossy(&body).into_owned();
        assert!(body.contains("reloading it failed"), "{body}");
        // The reason names the server's files and what is wrong in them: the operator's, in the
        // log under the request's id, not whoever called the function's.
        for private in ["function.toml", &repo.0.display().to_string(), "route"] {
            assert!(!body.contains(private), "{private:?} sent: {body}");
        }
        let json: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(json["kind"], "recovery_failed", "{body}");
        let sent = json["request_id"].as_str().unwrap_or_default();
        assert_eq!(id.as_ref().and_then(|v| v.to_str().ok()), Some(sent));
        assert_eq!(sent.len(), 32, "{body}");
        let tried = failed_loads(&server);
        assert!(tried >= 1, "no failed reload counted");
        // Refused at once from now on, without loading again, until the retry time.
        let since = Instant::now();
        let mut seen = Vec::new();
        for _ in 0..20 {
            let (status, _, body) = saxpy(&router).await;
            assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
            seen.push(format!(
                "{:?} {} {body}",
                since.elapsed(),
                failed_loads(&server)
            ));
        }
        assert_eq!(
            failed_loads(&server),
            tried,
            "a refused request loaded again:\n{}",
            seen.join("\n")
        );

        std::fs::write(&toml, good).unwrap();
        tokio::time::sleep(super::RETRY_AFTER).await;
        let (status, version, body) = saxpy(&router).await;
        assert_eq!((status, version.as_str()), (StatusCode::OK, "2"), "{body}");
        assert_eq!(ready(&router).await, StatusCode::OK);
        server.unload_all().await;
    }
}
