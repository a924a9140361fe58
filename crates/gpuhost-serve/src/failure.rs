//! What a client and the server's log learn of a request whose function failed to answer: it
//! trapped, ran out of fuel, passed its time limit, or returned without a response. A trap's
//! wasmtime error carries the guest's backtrace (its function names and code offsets), and its
//! stderr whatever the guest logged (a panic's message, the data it was working on): the
//! function's author and the operator need both, and whoever can call the function must not be
//! handed them. So by default the client gets a stable `kind`, a short message, the function,
//! its version and the request's id; the log gets the whole of it under the same id, which every
//! response of a function also carries in its `x-request-id` header, unless the function's
//! failures are over its budget of log lines (crate::log_budget: a client driving a failing
//! function must not write the log at its own rate). function.toml's
//! `[serve] expose_errors = true` (for development) sends the detail and stderr to the client too.
//!
//! The detail and stderr are the guest's text (its stderr, an error code's message, the function
//! names of its backtrace), so the log gets them bounded and on one line ([`loggable`]).

use std::fmt::Write as _;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderValue, Response, StatusCode};

use crate::function::Function;
use crate::invoke::json_error;
use crate::log_budget::LogBudget;
use crate::metrics::Outcome;

/// The header carrying a request's id, on every response of a function.
pub const REQUEST_ID_HEADER: &str = "x-request-id";

/// A request's id: 32 hex digits, a half drawn at random once per process and a counter, so ids
/// do not repeat across the restarts and replicas whose logs an operator searches together. It
/// names a request in the log; it is no secret and grants nothing.
pub(crate) struct RequestId([u8; 32]);

impl RequestId {
    /// The next request's id.
    pub(crate) fn next() -> Self {
        static PROCESS: OnceLock<u64> = OnceLock::new();
        static COUNT: AtomicU64 = AtomicU64::new(0);
        let process = *PROCESS.get_or_init(|| {
            use std::hash::{BuildHasher, Hasher};
            // RandomState's keys come from the OS's randomness: no dependency for 64 bits.
            let mut h = std::collections::hash_map::RandomState::new().build_hasher();
            h.write_u32(std::process::id());
            h.finish()
        });
        let mut id = [0u8; 32];
        hex(process, &mut id[..16]);
        hex(COUNT.fetch_add(1, Ordering::Relaxed), &mut id[16..]);
        Self(id)
    }

    pub(crate) fn as_str(&self) -> &str {
        // Hex digits only, so always UTF-8.
        std::str::from_utf8(&self.0).unwrap_or_default()
    }

    pub(crate) fn header(&self) -> HeaderValue {
        HeaderValue::from_bytes(&self.0).unwrap_or_else(|_| HeaderValue::from_static(""))
    }
}

/// `n`'s 16 hex digits into `out`.
fn hex(n: u64, out: &mut [u8]) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for (i, digit) in out.iter_mut().enumerate().take(16) {
        *digit = DIGITS[((n >> (60 - 4 * i)) & 0xf) as usize];
    }
}

/// Bytes of a failure's detail, and of its stderr, that its log line keeps: a wasi:http error
/// code carries a message of the guest's choosing of any length (a line of 4 MiB a request
/// otherwise), and a backtrace's function names are the guest's too.
const LOGGED: usize = 16 << 10;

/// `text` (a guest's) as one log field: its first [`LOGGED`] bytes, saying how many more there
/// were, with control characters, line separators and bidirectional controls escaped (`\n`,
/// `\u{1b}`, `\u{202e}`). The text log format writes a field's text as it is, so a line break
/// in a guest's stderr began a line of the guest's making, which an operator (or a log shipper
/// splitting lines) took for the server's; tracing-subscriber escapes ANSI sequences but not
/// line breaks. A bidirectional control (an override, an isolate, a mark) makes a terminal or
/// log viewer show the rest of the line in another order than it was written ("Trojan
/// Source"): a guest's text could make the fields after it, the server's, read as something
/// else.
pub(crate) fn loggable(text: &str) -> String {
    let mut end = text.len().min(LOGGED);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let mut out = String::with_capacity(end + 32);
    for c in text[..end].chars() {
        if c.is_control()
            || matches!(c, '\u{2028}' | '\u{2029}')
            || is_bidi_control(c)
            || is_invisible(c)
        {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    if end < text.len() {
        // Writing to a String cannot fail.
        let _ = write!(out, "... ({} bytes more)", text.len() - end);
    }
    out
}

/// Unicode's bidirectional formatting characters (UAX #9): the embeddings and overrides
/// U+202A–U+202E, the isolates U+2066–U+2069, and the implicit marks U+200E, U+200F and U+061C.
/// `char::is_control` is Unicode's Cc only; these are Cf.
fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// Format characters that draw nothing, so a guest could hide text in a log line with them (a
/// reader, or a tool that reads the log, sees words the eye does not): the soft hyphen, the
/// Mongolian vowel separator, the zero-width space, non-joiner and joiner (U+200B–U+200D), the
/// word joiner and invisible operators (U+2060–U+2064), the byte-order mark, the interlinear
/// annotation marks (U+FFF9–U+FFFB) and the tag characters (U+E0000–U+E007F, which spell ASCII
/// invisibly). Escaped like the bidirectional controls (so an emoji sequence joined by U+200D
/// shows its joiners escaped: a log line is for reading what was sent, not for rendering it).
fn is_invisible(c: char) -> bool {
    matches!(c, '\u{ad}' | '\u{180e}' | '\u{200b}'..='\u{200d}' | '\u{2060}'..='\u{2064}'
        | '\u{feff}' | '\u{fff9}'..='\u{fffb}' | '\u{e0000}'..='\u{e007f}')
}

/// An error body's context, beside its `error` message: a stable `kind` to switch on, the
/// function, the version that took the request (once one did), and the request's id, which the
/// log's line for it carries too.
pub(crate) fn context(
    kind: &str,
    function: &str,
    version: Option<u64>,
    id: &RequestId,
) -> serde_json::Value {
    let mut ctx =
        serde_json::json!({ "kind": kind, "function": function, "request_id": id.as_str() });
    if let Some(v) = version {
        ctx["version"] = v.into();
    }
    ctx
}

/// How a function failed to answer a request.
pub(crate) enum GuestFailure {
    Timeout,
    Trap {
        reason: String,
        out_of_fuel: bool,
        /// The end of what the guest wrote to stderr (a Rust panic's message is there):
        /// crate::stderr.
        stderr: String,
    },
    NoResponse(String),
}

/// The request a failure is answered for.
pub(crate) struct Failed<'a> {
    pub(crate) function: &'a str,
    pub(crate) version: u64,
    pub(crate) id: &'a RequestId,
    /// function.toml's `expose_errors`: the client gets the detail and stderr too.
    pub(crate) expose: bool,
    /// The function's time limit, which a timeout's message names.
    pub(crate) timeout: Duration,
    /// The function's budget of log lines, which a failure's warning must fit in.
    pub(crate) log: &'a LogBudget,
}

impl GuestFailure {
    /// The outcome and the client's response; a trap's or a missing response's detail is
    /// logged under the request's id, within the function's budget of log lines.
    pub(crate) fn respond(self, at: &Failed<'_>) -> (Outcome, Response<Body>) {
        let (function, version, id) = (at.function, at.version, at.id.as_str());
        let body = |kind: &str| context(kind, function, Some(version), at.id);
        match self {
            Self::Timeout => {
                let msg = format!(
                    "the function did not answer within its time limit ({:?}); it was stopped",
                    at.timeout
                );
                let resp = json_error(StatusCode::GATEWAY_TIMEOUT, &msg, body("timeout"));
                (Outcome::Timeout, resp)
            }
            Self::Trap {
                reason,
                out_of_fuel,
                stderr,
            } => {
                let (kind, msg) = if out_of_fuel {
                    (
                        "out_of_fuel",
                        "the function ran out of fuel (its CPU quota, limits.fuel in function.toml)",
                    )
                } else {
                    (
                        "trap",
                        "the function trapped; everything it held was released",
                    )
                };
                if let Some(held_back) = at.log.admit() {
                    let (logged, logged_stderr) = (loggable(&reason), loggable(&stderr));
                    tracing::warn!(request_id = id, function, version, kind, reason = %logged, stderr = %logged_stderr, "guest trapped{held_back}");
                }
                let mut extra = body(kind);
                if at.expose {
                    extra["detail"] = reason.into();
                    extra["stderr"] = stderr.into();
                }
                let resp = json_error(StatusCode::INTERNAL_SERVER_ERROR, msg, extra);
                (Outcome::Trap, resp)
            }
            Self::NoResponse(reason) => {
                if let Some(held_back) = at.log.admit() {
                    let logged = loggable(&reason);
                    tracing::warn!(request_id = id, function, version, reason = %logged, "guest set no response{held_back}");
                }
                let mut extra = body("no_response");
                if at.expose {
                    extra["detail"] = reason.into();
                }
                let msg = "the function returned without setting a response";
                (
                    Outcome::Trap,
                    json_error(StatusCode::BAD_GATEWAY, msg, extra),
                )
            }
        }
    }
}

/// The answer to a request of a function whose device code a CUDA context loss took and whose
/// reload failed (crate::recover). `error` names the server's files and what is wrong in them
/// (the repository's path, function.toml's parse error): the operator's to read, so the log gets
/// it under the request's id (within the function's budget of log lines: every request is
/// refused so until a reload works), and the client the kind, the function and the id.
pub(crate) fn recovery_failed(of: &Function, error: &crate::Error) -> Response<Body> {
    let id = RequestId::next();
    let function = of.name.as_str();
    if let Some(held_back) = of.log_budget().admit() {
        tracing::warn!(request_id = id.as_str(), function, %error, "refused a request: its function's reload after a context loss failed{held_back}");
    }
    let msg = "the function lost its device code to a CUDA context loss, and reloading it failed; \
               it is tried again shortly";
    let extra = context("recovery_failed", function, None, &id);
    let mut resp = json_error(StatusCode::SERVICE_UNAVAILABLE, msg, extra);
    resp.headers_mut().insert(REQUEST_ID_HEADER, id.header());
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_ids_are_32_hex_digits_sharing_the_process_half_and_never_repeating() {
        let (a, b) = (RequestId::next(), RequestId::next());
        for id in [a.as_str(), b.as_str()] {
            assert_eq!(id.len(), 32, "{id}");
            assert!(id.bytes().all(|c| c.is_ascii_hexdigit()), "{id}");
        }
        assert_eq!(a.as_str()[..16], b.as_str()[..16]);
        assert_ne!(a.as_str(), b.as_str());
        assert_eq!(a.header().to_str().ok(), Some(a.as_str()));
    }

    /// Each of `chars`, between two letters, is logged as its `\u{…}` escape.
    fn assert_each_escaped(chars: &[char]) {
        for &c in chars {
            let logged = loggable(&format!("a{c}b"));
            let escaped = format!("a\\u{{{:x}}}b", c as u32);
            assert_eq!(logged, escaped, "U+{:04X}", c as u32);
        }
    }

    #[test]
    fn loggable_text_escapes_invisible_characters_so_a_guest_cannot_hide_words_in_the_line() {
        let hidden = [
            '\u{ad}',
            '\u{180e}',
            '\u{200b}',
            '\u{200c}',
            '\u{200d}',
            '\u{2060}',
            '\u{2064}',
            '\u{feff}',
            '\u{fff9}',
            '\u{fffb}',
            '\u{e0000}',
            '\u{e0041}',
            '\u{e007f}',
        ];
        assert_each_escaped(&hidden);
        // Visible neighbours stay text: an em dash, a non-breaking space, emoji.
        assert_eq!(
            loggable("a\u{2014}b\u{a0}c\u{1f600}"),
            "a\u{2014}b\u{a0}c\u{1f600}"
        );
    }

    #[test]
    fn loggable_text_escapes_every_bidirectional_control_so_a_guest_cannot_reorder_the_line() {
        let bidi = [
            '\u{61c}', '\u{200e}', '\u{200f}', '\u{202a}', '\u{202b}', '\u{202c}', '\u{202d}',
            '\u{202e}', '\u{2066}', '\u{2067}', '\u{2068}', '\u{2069}',
        ];
        assert_each_escaped(&bidi);
        // Letters of right-to-left scripts are text, not controls: kept as they are.
        assert_eq!(loggable("\u{5d0}\u{627}"), "\u{5d0}\u{627}");
    }

    #[test]
    fn loggable_text_is_one_line_of_at_most_logged_bytes_cut_at_a_char() {
        assert_eq!(
            loggable("a\nb\r\u{1b}[31mc\u{2028}"),
            "a\\nb\\r\\u{1b}[31mc\\u{2028}"
        );
        let long = "é".repeat(LOGGED);
        let logged = loggable(&long);
        assert!(logged.len() < LOGGED + 32, "{}", logged.len());
        assert!(
            logged.ends_with(&format!("({} bytes more)", LOGGED)),
            "{logged}"
        );
    }
}
