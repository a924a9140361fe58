//! serve's cost ladder (scripts/probes/serve-floor.sh, targets ladder0 … ladder5): http-stamp's
//! request cut after step N of `?steps=N`, so each gpuhost:cuda call's share of a request is
//! measured under load: 0 answers only (http-hello's work); 1 also takes the bundle's kernel;
//! 2 also makes a zeroed buffer; 3 also makes a stream; 4 also launches and synchronizes; 5
//! launches and reads the first word behind the launch instead (http-stamp's request). Every
//! step answers what http-stamp answers with the stamp-a bundle (`a0000000`).

use gpuhost_guest::http::exports::wasi::http::incoming_handler::Guest;
use gpuhost_guest::http::wasi::http::types::{IncomingRequest, ResponseOutparam};
use gpuhost_guest::{DeviceBuffer, Launch, Stream, bundle_kernel, http};

struct Ladder;

/// N of `?steps=N` (5, the whole request, without one).
fn steps(req: &IncomingRequest) -> u32 {
    req.path_with_query()
        .and_then(|p| p.split_once("steps=").and_then(|(_, n)| n.parse().ok()))
        .unwrap_or(5)
}

fn run(steps: u32) -> gpuhost_guest::Result<u32> {
    const ANSWER: u32 = 0xa000_0000;
    if steps == 0 {
        return Ok(ANSWER);
    }
    let kernel = bundle_kernel("stamp")?;
    if steps == 1 {
        return Ok(ANSWER);
    }
    let out = DeviceBuffer::<u32>::zeroed(32)?;
    if steps == 2 {
        return Ok(ANSWER);
    }
    let stream = Stream::create()?;
    if steps == 3 {
        return Ok(ANSWER);
    }
    Launch::new(&kernel)
        .grid1(1)
        .block1(32)
        .buffer(&out)
        .scalar(32u32)
        .enqueue(&stream)?;
    if steps == 4 {
        stream.synchronize()?;
        return Ok(ANSWER);
    }
    Ok(out.download_range_after(&stream, 0, 1)?[0])
}

impl Guest for Ladder {
    fn handle(req: IncomingRequest, out: ResponseOutparam) {
        match run(steps(&req)) {
            Ok(v) => http::respond(out, 200, "text/plain", format!("{v:08x}").as_bytes()),
            Err(e) => http::respond(out, 500, "text/plain", format!("{e:?}").as_bytes()),
        }
    }
}

gpuhost_guest::http::export!(Ladder with_types_in gpuhost_guest::http);
