//! deploy/: the Kubernetes manifests pass a strict schema validation (kubernetes-validate from
//! PyPI, installed by .ci/run), a broken copy fails it, the pod's grace period covers its drain,
//! and the probes' paths are ones the server answers.

use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;

use axum::body::Body;
use axum::http::Request;
use tower::ServiceExt;

fn root() -> PathBuf {
    PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("run under cargo")).join("../..")
}

fn manifests() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(root().join("deploy/k8s"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    assert!(files.len() >= 3, "deploy/k8s holds the manifests");
    files
}

/// `kubernetes-validate --strict -k 1.30.0 FILES`: (success, output).
fn validate(files: &[PathBuf]) -> (bool, String) {
    let out = Command::new("kubernetes-validate")
        .args(["--strict", "-k", "1.30.0"])
        .args(files)
        .output()
        .expect("kubernetes-validate is needed: pip install kubernetes-validate (.ci/run does)");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

fn deployment() -> String {
    std::fs::read_to_string(root().join("deploy/k8s/deployment.yaml")).unwrap()
}

#[test]
fn the_kubernetes_manifests_pass_strict_schema_validation() {
    let files = manifests();
    let (ok, out) = validate(&files);
    assert!(ok, "{out}");
    for kind in ["deployment", "service", "horizontalpodautoscaler"] {
        assert!(
            out.contains(&format!("passed for resource {kind}/")),
            "{kind}: {out}"
        );
    }
}

#[test]
fn a_manifest_with_a_misspelt_field_fails_the_same_validation() {
    let broken = std::env::temp_dir().join(format!("gpuhost-broken-{}.yaml", std::process::id()));
    std::fs::write(
        &broken,
        deployment().replace("readinessProbe:", "readynessProbe:"),
    )
    .unwrap();
    let (ok, out) = validate(std::slice::from_ref(&broken));
    std::fs::remove_file(&broken).unwrap();
    assert!(!ok, "the validator accepted a misspelt field: {out}");
}

/// The integer after `key` on its line (first occurrence).
fn number_after(text: &str, key: &str) -> u64 {
    let at = text
        .find(key)
        .unwrap_or_else(|| panic!("{key} in deployment.yaml"));
    text[at + key.len()..]
        .trim_start_matches(|c: char| !c.is_ascii_digit())
        .chars()
        .take_while(char::is_ascii_digit)
        .collect::<String>()
        .parse()
        .unwrap()
}

#[test]
fn the_pods_grace_period_covers_the_prestop_sleep_the_shutdown_delay_and_the_drain() {
    let d = deployment();
    let grace = number_after(&d, "terminationGracePeriodSeconds:");
    let pre_stop = number_after(&d, "command: [\"sleep\", \"");
    let drain = number_after(&d, "\"--drain-timeout\", \"");
    let delay = number_after(&d, "\"--shutdown-delay\", \"");
    assert!(
        grace > pre_stop + delay + drain,
        "grace {grace}s must exceed preStop {pre_stop}s + delay {delay}s + drain {drain}s"
    );
    assert!(d.contains("nvidia.com/gpu: 1"));
}

#[test]
fn the_deployment_serves_the_repository_endpoints_on_the_pods_loopback_only() {
    let d = deployment();
    let at = d
        .split("\"--control-listen\", \"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("the deployment passes --control-listen");
    assert!(at.starts_with("127.0.0.1:"), "--control-listen {at}");
}

#[tokio::test]
async fn the_probe_paths_of_the_deployment_are_answered_by_the_server() {
    let d = deployment();
    let paths: Vec<&str> = d
        .lines()
        .filter_map(|l| l.trim().strip_prefix("path: "))
        .collect();
    assert!(paths.contains(&"/v2/health/ready") && paths.contains(&"/v2/health/live"));
    let opts = gpuhost_serve::ServeOptions::new(root().join("examples/repository"));
    let server = gpuhost_serve::Server::new(&opts).unwrap();
    server.load("saxpy").await.unwrap();
    // The pod's public port: the deployment serves the repository endpoints apart.
    let app = gpuhost_serve::public_router(Arc::clone(&server));
    for path in paths {
        let req = Request::get(path).body(Body::empty()).unwrap();
        let resp = app.clone().oneshot(req).await.unwrap();
        assert_eq!(resp.status(), 200, "{path}");
    }
    server.start_draining();
    let req = Request::get("/v2/health/ready")
        .body(Body::empty())
        .unwrap();
    assert_eq!(
        app.oneshot(req).await.unwrap().status(),
        503,
        "draining is not ready"
    );
}
