//! The serve benchmark's floor: a wasi:http function that answers what http-stamp answers with
//! the stamp-a bundle (`a0000000`) without touching the GPU. Served beside http-stamp and the
//! native handler (scripts/probes/serve-floor.sh), it tells how much of a request's cost is the
//! fresh Store, the component call and wasi:http, and how much is gpuhost:cuda.

use gpuhost_guest::http;
use gpuhost_guest::http::exports::wasi::http::incoming_handler::Guest;
use gpuhost_guest::http::wasi::http::types::{IncomingRequest, ResponseOutparam};

struct Hello;

impl Guest for Hello {
    fn handle(_req: IncomingRequest, out: ResponseOutparam) {
        http::respond(
            out,
            200,
            "text/plain",
            format!("{:08x}", 0xa000_0000u32).as_bytes(),
        );
    }
}

gpuhost_guest::http::export!(Hello with_types_in gpuhost_guest::http);
