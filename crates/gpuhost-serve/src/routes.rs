//! The HTTP surface: KServe v2 health, Triton's repository extension, Prometheus `/metrics`,
//! the status page at `/`, and every other path routed to the function whose route holds it.
//! The repository extension (index, load, unload) changes what the server runs, so it can be
//! served apart, on a control listener that only operators reach ([`control_router`]); the
//! public router then refuses it with a 403 that says where it went ([`public_router`]).

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::{FromRequestParts, Path, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{any, get, post};
use serde_json::json;

use crate::error::Error;
use crate::invoke::{invoke, json_error};
use crate::server::Server;

type Shared = State<Arc<Server>>;

/// The paths of the repository extension: they change what the server runs.
const CONTROL_PATHS: [&str; 3] = [
    "/v2/repository/index",
    "/v2/repository/models/{name}/load",
    "/v2/repository/models/{name}/unload",
];

/// The server's router with every endpoint, the repository extension included: for a server
/// with one listener.
pub fn router(server: Arc<Server>) -> Router {
    served(Router::new())
        .merge(control_routes())
        .method_not_allowed_fallback(wrong_method)
        .with_state(server)
}

/// The router of a server's public listener when the repository extension is served on a
/// control listener of its own ([`control_router`]): every endpoint but those, which answer 403
/// naming where they are served, so a client that can reach the functions cannot unload them.
pub fn public_router(server: Arc<Server>) -> Router {
    let mut r = Router::new();
    for path in CONTROL_PATHS {
        r = r.route(path, any(control_elsewhere));
    }
    served(r)
        .method_not_allowed_fallback(wrong_method)
        .with_state(server)
}

/// The router of a server's control listener: the repository extension and the health
/// endpoints (so a probe can tell the listener is up); any other path is a 404 that says this
/// listener serves only those.
pub fn control_router(server: Arc<Server>) -> Router {
    control_routes()
        .route("/v2/health/live", get(live))
        .route("/v2/health/ready", get(ready))
        .fallback(not_control)
        .method_not_allowed_fallback(wrong_method)
        .with_state(server)
}

/// The endpoints every public listener serves, and the functions behind the fallback.
fn served(r: Router<Arc<Server>>) -> Router<Arc<Server>> {
    r.route("/", get(status_page))
        .route("/metrics", get(metrics))
        .route("/v2/health/live", get(live))
        .route("/v2/health/ready", get(ready))
        .route("/v2/models/{name}/ready", get(model_ready))
        .route("/v2/models/{name}", get(model_metadata))
        .fallback(dispatch)
}

fn control_routes() -> Router<Arc<Server>> {
    let [index_path, load_path, unload_path] = CONTROL_PATHS;
    Router::new()
        .route(index_path, post(index))
        .route(load_path, post(load))
        .route(unload_path, post(unload))
}

/// A route's `{name}`. One that does not decode (percent-encoded bytes that are not UTF-8) is
/// a 400 with a JSON body, where axum's own rejection was plain text.
struct Name(String);

impl<S: Send + Sync> FromRequestParts<S> for Name {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Response> {
        match Path::<String>::from_request_parts(parts, state).await {
            Ok(Path(name)) => Ok(Self(name)),
            Err(e) => Err(json_error(
                StatusCode::BAD_REQUEST,
                &format!(
                    "the function name in the path could not be read ({e}): a name is a folder name of the repository (letters, digits, - _ .)"
                ),
                json!({ "path": parts.uri.path() }),
            )),
        }
    }
}

/// A path served, with a method it does not take: axum's own 405 had no body.
async fn wrong_method(req: Request) -> Response {
    json_error(
        StatusCode::METHOD_NOT_ALLOWED,
        "this path does not take this method: the Allow header lists those it takes",
        json!({ "path": req.uri().path(), "method": req.method().as_str() }),
    )
}

async fn control_elsewhere() -> Response {
    json_error(
        StatusCode::FORBIDDEN,
        "the repository endpoints (index, load, unload) are served on the server's control \
         listener only (gpuhost serve --control-listen ADDR), not on this one",
        json!({}),
    )
}

async fn not_control(req: Request) -> Response {
    json_error(
        StatusCode::NOT_FOUND,
        "this is the control listener: it serves the repository endpoints \
         (POST /v2/repository/index, /v2/repository/models/NAME/load and /unload) and health; \
         functions, /metrics and the status page are on the public listener",
        json!({ "path": req.uri().path() }),
    )
}

fn status_only(ok: bool) -> StatusCode {
    if ok {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    }
}

async fn live(State(s): Shared) -> StatusCode {
    status_only(s.live())
}

async fn ready(State(s): Shared) -> StatusCode {
    let ready = s.ready();
    if !ready {
        // A context loss it noticed: reloading begins now, not at the next request.
        s.recover_lost_in_background();
    }
    status_only(ready)
}

async fn model_ready(State(s): Shared, Name(name): Name) -> Response {
    match s.function(&name) {
        None => json_error(
            StatusCode::NOT_FOUND,
            &Error::UnknownFunction { name }.to_string(),
            json!({}),
        ),
        Some(f) => status_only(!s.draining() && f.current().is_some()).into_response(),
    }
}

async fn model_metadata(State(s): Shared, Name(name): Name) -> Response {
    let Some(f) = s.function(&name) else {
        return json_error(
            StatusCode::NOT_FOUND,
            &Error::UnknownFunction { name }.to_string(),
            json!({}),
        );
    };
    let current = f.current();
    let body = json!({
        "name": name,
        "versions": current.iter().map(|v| v.number.to_string()).collect::<Vec<_>>(),
        "platform": "gpuhost_wasi_http",
        "route": current.as_ref().map(|v| v.config.route.clone()),
        "devices": current.as_ref().map(|v| v.devices.iter().map(|d| d.host.ordinal()).collect::<Vec<_>>()),
        "sandbox": current.as_ref().map(|v| v.config.sandbox),
        "bundle_bytes": current.as_ref().map(|v| v.bundle_bytes),
    });
    axum::Json(body).into_response()
}

async fn index(State(s): Shared) -> Response {
    axum::Json(s.index()).into_response()
}

async fn load(State(s): Shared, Name(name): Name) -> Response {
    match s.load(&name).await {
        Ok(r) => axum::Json(json!({
            "name": name,
            "version": r.version.to_string(),
            "load_ms": r.load_time.as_secs_f64() * 1e3,
            "compile_cached": r.compile_cached,
            "warmed": r.warmed,
            "warm_ms": r.warm_time.as_secs_f64() * 1e3,
            "previous": r.released.map(|p| json!({
                "drain_ms": p.took.as_secs_f64() * 1e3,
                "released": p.refused.is_empty(),
                "refused": p.refused,
            })),
        }))
        .into_response(),
        Err(e) => {
            let status = match e {
                Error::UnknownFunction { .. } => StatusCode::NOT_FOUND,
                _ => StatusCode::BAD_REQUEST,
            };
            let serving = s
                .function(&name)
                .and_then(|f| f.current())
                .map(|v| v.number.to_string());
            json_error(
                status,
                &e.to_string(),
                json!({ "name": name, "serving_version": serving }),
            )
        }
    }
}

async fn unload(State(s): Shared, Name(name): Name) -> Response {
    match s.unload(&name).await {
        Ok(r) => axum::Json(json!({
            "name": name,
            "released": r.as_ref().map(|p| p.refused.is_empty()),
            "drain_ms": r.map(|p| p.took.as_secs_f64() * 1e3),
        }))
        .into_response(),
        Err(e) => json_error(
            StatusCode::NOT_FOUND,
            &e.to_string(),
            json!({ "name": name }),
        ),
    }
}

async fn metrics(State(s): Shared) -> Response {
    let text = tokio::task::spawn_blocking(move || s.render_metrics())
        .await
        .unwrap_or_default();
    let mut resp = Response::new(Body::from(text));
    resp.headers_mut().insert(
        "content-type",
        HeaderValue::from_static("application/openmetrics-text; version=1.0.0; charset=utf-8"),
    );
    resp
}

async fn status_page() -> Html<&'static str> {
    Html(include_str!("status.html"))
}

async fn dispatch(State(s): Shared, req: Request) -> Response {
    // The path is copied only for a 404's body: a function's request allocates nothing here.
    match s.route(req.uri().path()) {
        Some(function) => {
            // A context loss left its version's device code dead: reload it before serving.
            if function.stale()
                && let Err(e) = s.recover(&function).await
            {
                return crate::failure::recovery_failed(&function, &e);
            }
            invoke(function, &s, req).await
        }
        None => json_error(
            StatusCode::NOT_FOUND,
            "no function answers this path (GET /v2/models/NAME gives a function's route; POST /v2/repository/index lists the functions, on the control listener where the server has one)",
            json!({ "path": req.uri().path() }),
        ),
    }
}

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use axum::http::{Request, StatusCode};
    use http_body_util::BodyExt as _;
    use tower::ServiceExt as _;

    #[tokio::test]
    async fn a_path_no_function_answers_gets_a_404_that_names_the_path() {
        let root = std::path::PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
        let opts = crate::ServeOptions::new(root.join("../../examples/repository"));
        let server = crate::Server::new(&opts).unwrap();
        let req = Request::get("/no/such/function")
            .body(Body::empty())
            .unwrap();
        let resp = super::router(server).oneshot(req).await.unwrap();
        assert_eq!(resp.status(), StatusCode::NOT_FOUND);
        let body = resp.into_body().collect().await.unwrap().to_bytes();
        let json: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(json["path"], "/no/such/function", "{json}");
    }
}
