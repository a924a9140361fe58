//! Test function that misbehaves on request, by path: `/trap` panics (a wasm trap), `/spin`
//! loops forever on the CPU, `/leak` allocates device buffers and never frees them before
//! trapping, `/noanswer` returns without setting a response, `/slow?ms=N` sleeps N ms (for
//! queueing and drain tests) then answers `slept`, `/kernel?name=K` asks the granted bundle for
//! kernel K and answers what it got (the error when it has none), `/count` answers how many
//! requests this instance has handled (1 in a fresh one), `/stamp?n=N` launches the granted
//! bundle's `stamp` (which writes N words) on a 32-word buffer and answers `ok` or the error;
//! `/drip?n=N&ms=M` sets its response head first, then writes N lines `0\n`, `1\n`, … one M ms
//! apart (a body that goes on after the head); `/globals` loads tests/guests/kernels/globals.ptx
//! itself (module.from-ptx, on every request) and answers what its `bump` kernel counted in the
//! module's global word over three launches (`bumped [1, 2, 3]` when the request's globals
//! started at zero); `/fault` loads and runs a kernel that stores to address 0x100 (fenced when
//! sandboxed; run trusted, it faults and poisons the device) and answers what it got; `/forge`
//! writes a line break and a made-up log line to stderr, then traps (what a guest could do to
//! forge the server's log); `/errorcode?n=N` answers with a wasi:http error code whose text is N
//! bytes, a made-up log line after a line break among them; `/chatty?n=N` writes N bytes to
//! stderr, then answers `chatted` (`/chatty?n=N&trap`: then traps); `/trailers` answers `body`
//! with trailers (declared in its `trailer` header) `x-request-id`, `x-gpuhost-version` and
//! `x-mine`; `/spoof` answers 200 setting the
//! `x-request-id` and `x-gpuhost-version` headers itself; anything else answers `ok`.

use gpuhost_guest::http::exports::wasi::http::incoming_handler::Guest;
use gpuhost_guest::http::wasi::clocks::monotonic_clock;
use gpuhost_guest::http::wasi::http::types::{
    ErrorCode, Fields, IncomingRequest, OutgoingBody, OutgoingResponse, ResponseOutparam,
};
use gpuhost_guest::{DeviceBuffer, Launch, Module, Stream, bundle_kernel, bundle_kernel_names, http};

/// 64 KiB of module globals and a kernel counting launches in them.
const GLOBALS: &str = include_str!("../../kernels/globals.ptx");

struct Misbehave;

/// The bundle's `stamp` over `n` words of a 32-word buffer: past 32 it writes outside the guest's
/// buffer, which the sandbox must fence.
fn stamp(n: u32) -> gpuhost_guest::Result<u32> {
    let kernel = bundle_kernel("stamp")?;
    let out = DeviceBuffer::<u32>::zeroed(32)?;
    let stream = Stream::create()?;
    Launch::new(&kernel).grid1(n.div_ceil(256)).block1(256).buffer(&out).scalar(n).enqueue(&stream)?;
    stream.synchronize()?;
    Ok(out.download()?[31])
}

/// A kernel storing to address 0x100, where no allocation lives on either driver.
const FAULT: &str = ".version 7.0\n.target sm_50\n.address_size 64\n\
.visible .entry fault()\n{\n.reg .b64 %rd<2>;\nmov.u64 %rd1, 256;\nst.global.u32 [%rd1], 1;\nret;\n}\n";

/// Loads and runs the faulting kernel.
fn fault() -> gpuhost_guest::Result<()> {
    let module = Module::from_ptx(FAULT)?;
    let kernel = module.kernel("fault")?;
    let stream = Stream::create()?;
    Launch::new(&kernel).enqueue(&stream)?;
    stream.synchronize()
}

/// Loads the globals module and counts three launches of `bump` in its global word.
fn bump_globals() -> gpuhost_guest::Result<Vec<u32>> {
    let module = Module::from_ptx(GLOBALS)?;
    let bump = module.kernel("bump")?;
    let out = DeviceBuffer::<u32>::zeroed(2)?;
    let stream = Stream::create()?;
    let mut counted = Vec::new();
    for _ in 0..3 {
        Launch::new(&bump).buffer(&out).enqueue(&stream)?;
        stream.synchronize()?;
        counted.push(out.download()?[0]);
    }
    Ok(counted)
}

/// Answers 200 with `headers`, `body` (none when empty) and, when given, `trailers`.
fn respond_with(
    out: ResponseOutparam,
    headers: &[(&str, &str)],
    body: &[u8],
    trailers: Option<&[(&str, &str)]>,
) {
    let fields = |list: &[(&str, &str)]| {
        let list: Vec<_> = list.iter().map(|(n, v)| (n.to_string(), v.as_bytes().to_vec())).collect();
        Fields::from_list(&list).ok()
    };
    let Some(headers) = fields(headers) else { return };
    let resp = OutgoingResponse::new(headers);
    let Ok(outgoing) = resp.body() else { return };
    ResponseOutparam::set(out, Ok(resp));
    if !body.is_empty()
        && let Ok(stream) = outgoing.write()
    {
        let _ = stream.blocking_write_and_flush(body);
    }
    let _ = OutgoingBody::finish(outgoing, trailers.and_then(fields));
}

/// A log line of the server's text format, made up by a guest.
const FORGED: &str = "2001-01-01T00:00:00.000000Z  INFO gpuhost_serve: FORGED by the guest";

/// Requests this instance has handled.
static HANDLED: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

impl Guest for Misbehave {
    fn handle(req: IncomingRequest, out: ResponseOutparam) {
        let path = req.path_with_query().unwrap_or_default();
        let (path, query) = path.split_once('?').unwrap_or((&path, ""));
        let handled = HANDLED.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        match path.rsplit('/').next().unwrap_or("") {
            "trap" => panic!("misbehave: asked to trap"),
            "spin" => {
                let mut x = 0u64;
                loop {
                    x = std::hint::black_box(x.wrapping_add(1));
                }
            }
            "leak" => {
                let held: Vec<_> = (0..8).map(|_| DeviceBuffer::<u8>::zeroed(256 << 10)).collect();
                std::mem::forget(held);
                panic!("misbehave: trapped holding 2 MiB of device buffers");
            }
            "noanswer" => drop(out),
            "chatty" => {
                let (n, then) = query.split_once('&').unwrap_or((query, ""));
                let n: usize = n.strip_prefix("n=").and_then(|v| v.parse().ok()).unwrap_or(0);
                eprint!("{}", "e".repeat(n));
                if then == "trap" {
                    panic!("misbehave: trapped after chatting");
                }
                http::respond(out, 200, "text/plain", b"chatted");
            }
            "forge" => {
                eprint!("\n{FORGED}\n");
                panic!("misbehave: forging a log line");
            }
            "errorcode" => {
                let n: usize = query.strip_prefix("n=").and_then(|v| v.parse().ok()).unwrap_or(0);
                let mut text = format!("\n{FORGED}\n");
                text.push_str(&"x".repeat(n.saturating_sub(text.len())));
                ResponseOutparam::set(out, Err(ErrorCode::InternalError(Some(text))));
            }
            "trailers" => {
                let declared = [("trailer", "x-request-id, x-gpuhost-version, x-mine")];
                let trailers = [
                    ("x-request-id", "forged-by-the-guest"),
                    ("x-gpuhost-version", "999"),
                    ("x-mine", "kept"),
                ];
                respond_with(out, &declared, b"body", Some(&trailers));
            }
            "spoof" => {
                let headers = [("x-request-id", "forged-by-the-guest"), ("x-gpuhost-version", "999")];
                respond_with(out, &headers, b"", None);
            }
            "stamp" => {
                let n = query.strip_prefix("n=").and_then(|v| v.parse().ok()).unwrap_or(32);
                let text = match stamp(n) {
                    Ok(v) => format!("ok {v:08x}"),
                    Err(e) => format!("{e:?}"),
                };
                http::respond(out, 200, "text/plain", text.as_bytes());
            }
            "globals" => {
                let text = match bump_globals() {
                    Ok(v) => format!("bumped {v:?}"),
                    Err(e) => format!("{e:?}"),
                };
                http::respond(out, 200, "text/plain", text.as_bytes());
            }
            "fault" => {
                let text = format!("{:?}", fault());
                http::respond(out, 200, "text/plain", text.as_bytes());
            }
            "count" => http::respond(out, 200, "text/plain", handled.to_string().as_bytes()),
            "drip" => {
                let arg = |k: &str| -> u64 {
                    query.split('&').find_map(|kv| kv.strip_prefix(k)?.strip_prefix('=')?.parse().ok())
                        .unwrap_or(0)
                };
                let resp = OutgoingResponse::new(Fields::new());
                let Ok(body) = resp.body() else { return };
                ResponseOutparam::set(out, Ok(resp));
                if let Ok(stream) = body.write() {
                    for i in 0..arg("n") {
                        monotonic_clock::subscribe_duration(arg("ms") * 1_000_000).block();
                        let _ = stream.blocking_write_and_flush(format!("{i}\n").as_bytes());
                    }
                }
                let _ = OutgoingBody::finish(body, None);
            }
            "slow" => {
                let ms: u64 = query.strip_prefix("ms=").and_then(|v| v.parse().ok()).unwrap_or(100);
                monotonic_clock::subscribe_duration(ms * 1_000_000).block();
                http::respond(out, 200, "text/plain", b"slept");
            }
            "kernel" => {
                let name = query.strip_prefix("name=").unwrap_or("");
                let text = match bundle_kernel(name) {
                    Ok(k) => format!("granted {} of {:?}", k.name(), bundle_kernel_names()),
                    Err(e) => format!("{e:?}"),
                };
                http::respond(out, 200, "text/plain", text.as_bytes());
            }
            _ => http::respond(out, 200, "text/plain", b"ok"),
        }
    }
}

gpuhost_guest::http::export!(Misbehave with_types_in gpuhost_guest::http);
