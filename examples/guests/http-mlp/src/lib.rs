//! HTTP function (examples/repository/mlp): a small classifier, 4 features → 8 ReLU → 3 classes,
//! whose weights live in the function's bundle (loaded once per version, so a new version is a
//! new model). `POST {"inputs": [[f0, f1, f2, f3], ...]}` answers
//! `{"classes": [..], "probabilities": [[p0, p1, p2], ...], "model": "<bundle kernels>"}`.

use gpuhost_guest::http::exports::wasi::http::incoming_handler::Guest;
use gpuhost_guest::http::wasi::http::types::{IncomingRequest, ResponseOutparam};
use gpuhost_guest::{DeviceBuffer, Launch, Stream, bundle_kernel, http};
use serde_json::{Value, json};

const FEATURES: usize = 4;
const HIDDEN: usize = 8;
const CLASSES: usize = 3;
/// Samples one request may send.
const MAX_BATCH: usize = 65_536;

struct Mlp;

fn inputs(body: &[u8]) -> Result<Vec<f32>, String> {
    let v: Value = serde_json::from_slice(body).map_err(|e| format!("the body is not JSON: {e}"))?;
    let rows = v["inputs"]
        .as_array()
        .ok_or("`inputs` must be an array of 4-number arrays")?;
    if rows.is_empty() || rows.len() > MAX_BATCH {
        return Err(format!("send 1 to {MAX_BATCH} samples (got {})", rows.len()));
    }
    let mut flat = Vec::with_capacity(rows.len() * FEATURES);
    for (i, row) in rows.iter().enumerate() {
        let row = row.as_array().filter(|r| r.len() == FEATURES);
        let row = row.ok_or_else(|| format!("sample {i} must be an array of {FEATURES} numbers"))?;
        for f in row {
            flat.push(f.as_f64().ok_or_else(|| format!("sample {i} holds a non-number"))? as f32);
        }
    }
    Ok(flat)
}

fn softmax(logits: &[f32]) -> Vec<f32> {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let exp: Vec<f32> = logits.iter().map(|l| (l - max).exp()).collect();
    let sum: f32 = exp.iter().sum();
    exp.iter().map(|e| e / sum).collect()
}

fn infer(x: &[f32]) -> gpuhost_guest::Result<Vec<f32>> {
    let batch = x.len() / FEATURES;
    let layer1 = bundle_kernel("layer1")?;
    let layer2 = bundle_kernel("layer2")?;
    let dx = DeviceBuffer::from_slice(x)?;
    let dh = DeviceBuffer::<f32>::zeroed(batch * HIDDEN)?;
    let dy = DeviceBuffer::<f32>::zeroed(batch * CLASSES)?;
    let stream = Stream::create()?;
    let threads = |units: usize| ((batch * units) as u32).div_ceil(128);
    Launch::new(&layer1).grid1(threads(HIDDEN)).block1(128).buffer(&dx).buffer(&dh)
        .scalar(batch as u32).enqueue(&stream)?;
    Launch::new(&layer2).grid1(threads(CLASSES)).block1(128).buffer(&dh).buffer(&dy)
        .scalar(batch as u32).enqueue(&stream)?;
    // One host call and one wait: the read is queued behind both launches.
    dy.download_after(&stream)
}

impl Guest for Mlp {
    fn handle(req: IncomingRequest, out: ResponseOutparam) {
        let result = http::read_body(&req, 16 << 20)
            .and_then(|b| inputs(&b))
            .map_err(|e| (400, e))
            .and_then(|x| infer(&x).map_err(|e| (500, format!("GPU error: {e:?}"))));
        let (status, body) = match result {
            Err((status, e)) => (status, json!({ "error": e })),
            Ok(logits) => {
                let probs: Vec<Vec<f32>> = logits.chunks(CLASSES).map(softmax).collect();
                let classes: Vec<usize> = probs
                    .iter()
                    .map(|p| (0..CLASSES).fold(0, |best, c| if p[c] > p[best] { c } else { best }))
                    .collect();
                (200, json!({ "classes": classes, "probabilities": probs }))
            }
        };
        http::respond(out, status, "application/json", body.to_string().as_bytes());
    }
}

gpuhost_guest::http::export!(Mlp with_types_in gpuhost_guest::http);
