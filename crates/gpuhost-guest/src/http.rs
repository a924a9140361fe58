//! HTTP functions for `gpuhost serve` (feature `http`): bindings of the `gpuhost:cuda/http-function`
//! world — the standard `wasi:http/proxy` world plus gpuhost:cuda — generated from `wit/`, and two
//! helpers for the common case (read the whole request body, answer with one body).
//!
//! A function implements `exports::wasi::http::incoming_handler::Guest` and exports it:
//!
//! ```ignore
//! use gpuhost_guest::http::{self, exports::wasi::http::incoming_handler::Guest};
//! use gpuhost_guest::http::wasi::http::types::{IncomingRequest, ResponseOutparam};
//! struct Echo;
//! impl Guest for Echo {
//!     fn handle(req: IncomingRequest, out: ResponseOutparam) {
//!         let body = http::read_body(&req, 1 << 20).unwrap_or_default();
//!         http::respond(out, 200, "application/octet-stream", &body);
//!     }
//! }
//! gpuhost_guest::http::export!(Echo with_types_in gpuhost_guest::http);
//! ```

// The generated bindings carry the WIT's docs, not rustdoc on every item.
#![allow(missing_docs)]

wit_bindgen::generate!({
    path: "../../wit",
    world: "gpuhost:cuda/http-function",
    with: {
        "gpuhost:cuda/types@0.1.0": crate::raw::types,
        "gpuhost:cuda/device@0.1.0": crate::raw::device,
        "gpuhost:cuda/module@0.1.0": crate::raw::module,
        "gpuhost:cuda/memory@0.1.0": crate::raw::memory,
        "gpuhost:cuda/stream@0.1.0": crate::raw::stream,
        "gpuhost:cuda/bundle@0.1.0": crate::raw::bundle,
    },
    generate_all,
    pub_export_macro: true,
    default_bindings_module: "gpuhost_guest::http",
});

use self::wasi::http::types::{
    Fields, IncomingRequest, OutgoingBody, OutgoingResponse, ResponseOutparam,
};
use self::wasi::io::streams::StreamError;

/// Reads the whole body of `req`, refusing one over `max_bytes` (the host caps it too).
pub fn read_body(req: &IncomingRequest, max_bytes: usize) -> Result<Vec<u8>, String> {
    let body = req
        .consume()
        .map_err(|()| "the request body was already consumed".to_string())?;
    let stream = body
        .stream()
        .map_err(|()| "the request body stream was already taken".to_string())?;
    let mut out = Vec::new();
    loop {
        match stream.blocking_read(64 * 1024) {
            Ok(chunk) => {
                if out.len() + chunk.len() > max_bytes {
                    return Err(format!("the request body is over {max_bytes} bytes"));
                }
                out.extend_from_slice(&chunk);
            }
            Err(StreamError::Closed) => break,
            Err(StreamError::LastOperationFailed(e)) => {
                return Err(format!(
                    "reading the request body failed: {}",
                    e.to_debug_string()
                ));
            }
        }
    }
    drop(stream);
    Ok(out)
}

/// Answers with `status`, a `content-type` header and `body`, written in one go: 8 wasi:http
/// calls for a body of up to 4 KiB (each call is a trip through the component model; the
/// headers are made whole by `from-list` rather than made and appended to, and a 200, the
/// response's default, is not set again).
pub fn respond(out: ResponseOutparam, status: u16, content_type: &str, body: &[u8]) {
    let header = [("content-type".to_string(), content_type.as_bytes().to_vec())];
    // An invalid content type is left out, as an `append` that failed would leave it.
    let headers = Fields::from_list(&header).unwrap_or_else(|_| Fields::new());
    let resp = OutgoingResponse::new(headers);
    if status != 200 {
        let _ = resp.set_status_code(status);
    }
    let Ok(outgoing) = resp.body() else {
        return;
    };
    ResponseOutparam::set(out, Ok(resp));
    if let Ok(stream) = outgoing.write() {
        // `blocking-write-and-flush` takes at most 4096 bytes a call.
        for chunk in body.chunks(4096) {
            if stream.blocking_write_and_flush(chunk).is_err() {
                break;
            }
        }
        drop(stream);
    }
    let _ = OutgoingBody::finish(outgoing, None);
}
