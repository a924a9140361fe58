//! Test function: launches its bundle's `stamp` kernel (crates/gpuhost/bundles/stamp-a or -b:
//! out[i] = TAG + i) and answers the first value in hex, so a test can tell which bundle — which
//! version — computed the response.

use gpuhost_guest::http::exports::wasi::http::incoming_handler::Guest;
use gpuhost_guest::http::wasi::http::types::{IncomingRequest, ResponseOutparam};
use gpuhost_guest::{DeviceBuffer, Launch, Stream, bundle_kernel, http};

struct Stamp;

fn stamp() -> gpuhost_guest::Result<u32> {
    let kernel = bundle_kernel("stamp")?;
    let out = DeviceBuffer::<u32>::zeroed(32)?;
    let stream = Stream::create()?;
    Launch::new(&kernel).grid1(1).block1(32).buffer(&out).scalar(32u32).enqueue(&stream)?;
    // The launch's end and the first word, with one wait (synchronize, then download, took two).
    Ok(out.download_range_after(&stream, 0, 1)?[0])
}

impl Guest for Stamp {
    fn handle(_req: IncomingRequest, out: ResponseOutparam) {
        match stamp() {
            Ok(v) => http::respond(out, 200, "text/plain", format!("{v:08x}").as_bytes()),
            Err(e) => http::respond(out, 500, "text/plain", format!("{e:?}").as_bytes()),
        }
    }
}

gpuhost_guest::http::export!(Stamp with_types_in gpuhost_guest::http);
