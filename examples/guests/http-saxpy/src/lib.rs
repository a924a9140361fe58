//! HTTP function (examples/repository/saxpy): `POST {"a": 2, "x": [..], "y": [..]}` answers
//! `{"y": [a*x + y, ...]}` computed on the GPU by the `saxpy` kernel of the function's bundle.

use gpuhost_guest::http::exports::wasi::http::incoming_handler::Guest;
use gpuhost_guest::http::wasi::http::types::{IncomingRequest, ResponseOutparam};
use gpuhost_guest::{DeviceBuffer, Launch, Stream, bundle_kernel, http};
use serde_json::{Value, json};

/// Elements one request may send (the host caps the body as well).
const MAX_ELEMENTS: usize = 1 << 20;

struct Saxpy;

fn floats(v: &Value, key: &str) -> Result<Vec<f32>, String> {
    let list = v[key]
        .as_array()
        .ok_or_else(|| format!("`{key}` must be an array of numbers"))?;
    list.iter()
        .map(|n| n.as_f64().map(|f| f as f32))
        .collect::<Option<Vec<_>>>()
        .ok_or_else(|| format!("`{key}` must hold only numbers"))
}

fn compute(body: &[u8]) -> Result<Value, (u16, String)> {
    let bad = |m: String| (400, m);
    let v: Value = serde_json::from_slice(body).map_err(|e| bad(format!("the body is not JSON: {e}")))?;
    let a = v["a"].as_f64().ok_or_else(|| bad("`a` must be a number".into()))? as f32;
    let x = floats(&v, "x").map_err(bad)?;
    let y = floats(&v, "y").map_err(bad)?;
    if x.len() != y.len() || x.len() > MAX_ELEMENTS {
        return Err(bad(format!(
            "`x` and `y` must have the same length, at most {MAX_ELEMENTS} (got {} and {})",
            x.len(),
            y.len()
        )));
    }
    let gpu = |e: gpuhost_guest::Error| (500, format!("GPU error: {e:?}"));
    let n = x.len();
    let mut out = y.clone();
    if n > 0 {
        let saxpy = bundle_kernel("saxpy").map_err(gpu)?;
        let dx = DeviceBuffer::from_slice(&x).map_err(gpu)?;
        let dy = DeviceBuffer::from_slice(&y).map_err(gpu)?;
        let stream = Stream::create().map_err(gpu)?;
        Launch::new(&saxpy)
            .grid1((n as u32).div_ceil(256))
            .block1(256)
            .scalar(a)
            .buffer(&dx)
            .buffer(&dy)
            .scalar(n as u32)
            .enqueue(&stream)
            .map_err(gpu)?;
        // One host call and one wait: the read is queued behind the launch.
        out = dy.download_after(&stream).map_err(gpu)?;
    }
    Ok(json!({ "y": out }))
}

impl Guest for Saxpy {
    fn handle(req: IncomingRequest, out: ResponseOutparam) {
        let (status, body) = match http::read_body(&req, 64 << 20) {
            Err(e) => (400, json!({ "error": e })),
            Ok(body) => match compute(&body) {
                Ok(v) => (200, v),
                Err((status, e)) => (status, json!({ "error": e })),
            },
        };
        http::respond(out, status, "application/json", body.to_string().as_bytes());
    }
}

gpuhost_guest::http::export!(Saxpy with_types_in gpuhost_guest::http);
