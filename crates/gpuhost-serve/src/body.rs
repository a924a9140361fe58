//! A request's body, read before the request takes a place in its function's admission: a
//! client that declares a body and sends it slowly, or never, then holds no place that another
//! request could run in. The read is bounded three ways: by the function's `max_body_bytes`
//! (413), by the server's body-read timeout (408; never past the function's own time limit), and
//! by the server's budget of body bytes buffered at once over all requests (503 with
//! Retry-After; 413 for a body longer than the whole budget, which no retry could fit). The
//! budget is taken as the body's frames arrive, not from a declared length, so a client that
//! declares a body it never sends holds none of it; a declared length more than the budget has
//! left is refused at once, as it would be once sent. What a body took is held until its
//! request ends: the guest reads the body from memory.

use std::pin::pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::StatusCode;
use bytes::{Bytes, BytesMut};
use http_body_util::BodyExt;
use hyper::body::Body as _;
use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::deadline::Deadlines;
use crate::invoke::GaugeHold;
use crate::metrics::Outcome;

/// The server's budget of request-body bytes buffered at once (`max_buffered_body_bytes`).
pub(crate) struct Budget {
    bytes: Arc<Semaphore>,
    cap: usize,
}

/// The bytes of the [`Budget`] one request's body holds, given back when dropped.
#[derive(Default)]
pub(crate) struct Held(Option<OwnedSemaphorePermit>);

impl Budget {
    /// A budget of `cap` bytes (at most tokio's largest semaphore).
    pub(crate) fn new(cap: u64) -> Self {
        let cap = usize::try_from(cap)
            .unwrap_or(usize::MAX)
            .min(Semaphore::MAX_PERMITS);
        Self {
            bytes: Arc::new(Semaphore::new(cap)),
            cap,
        }
    }

    /// The most bytes bodies may hold at once.
    pub(crate) fn cap(&self) -> usize {
        self.cap
    }

    /// Bytes held by bodies now.
    pub(crate) fn in_use(&self) -> usize {
        self.cap.saturating_sub(self.bytes.available_permits())
    }

    /// Adds `n` bytes to `held`; false when fewer are left (what was added stays in `held`).
    fn take(&self, held: &mut Held, mut n: usize) -> bool {
        // tokio counts one acquisition in u32.
        while n > 0 {
            let step = n.min(u32::MAX as usize);
            let Ok(more) = self.bytes.clone().try_acquire_many_owned(step as u32) else {
                return false;
            };
            match &mut held.0 {
                Some(permit) => permit.merge(more),
                None => held.0 = Some(more),
            }
            n -= step;
        }
        true
    }
}

/// Why a body was not taken.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Refused {
    /// Longer, as declared or as sent, than the function's `max_body_bytes`.
    TooLarge,
    /// The server's budget of buffered body bytes has no room for it now.
    Budget,
    /// Longer, as declared or as sent, than the server's whole budget: no retry could be
    /// taken, so it is no 503 with Retry-After, which a client would retry forever.
    OverBudget,
    /// Not all sent within the body-read timeout.
    TimedOut,
    /// The connection failed mid-body (the client left, mostly).
    Read(String),
}

/// What bounds one body's read.
pub(crate) struct Limits<'a> {
    /// The function's `max_body_bytes`.
    pub(crate) max_bytes: u64,
    /// The last instant the body may finish arriving.
    pub(crate) until: Instant,
    pub(crate) budget: &'a Budget,
    pub(crate) deadlines: &'a Deadlines,
    /// Counts the requests whose body is still arriving.
    pub(crate) reading: &'a Gauge,
}

/// Reads `body` whole within `limits`; its bytes and the budget they hold.
pub(crate) async fn read(body: Body, limits: Limits<'_>) -> Result<(Bytes, Held), Refused> {
    let declared = body.size_hint().lower();
    too_long(declared, limits.max_bytes, limits.budget)?;
    if usize::try_from(declared).unwrap_or(usize::MAX) > limits.budget.bytes.available_permits() {
        return Err(Refused::Budget);
    }
    let mut collecting = pin!(collect(body, limits.max_bytes, limits.budget));
    // An empty body needs no deadline, an entry on the server's list (deadline.rs). Others
    // mostly do: hyper reads a body's bytes off the socket only once the body is polled.
    let first = std::future::poll_fn(|cx| Poll::Ready(collecting.as_mut().poll(cx))).await;
    if let Poll::Ready(read) = first {
        return read;
    }
    let _reading = GaugeHold::new(limits.reading);
    let deadline = limits.deadlines.start(limits.until);
    deadline
        .bound(collecting)
        .await
        .unwrap_or(Err(Refused::TimedOut))
}

async fn collect(
    mut body: Body,
    max_bytes: u64,
    budget: &Budget,
) -> Result<(Bytes, Held), Refused> {
    let mut held = Held::default();
    let mut arrived = Arrived::Nothing;
    let mut total = 0u64;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| Refused::Read(e.to_string()))?;
        // Trailers: nothing the guest is given.
        let Ok(data) = frame.into_data() else {
            continue;
        };
        total = total.saturating_add(data.len() as u64);
        too_long(total, max_bytes, budget)?;
        if !budget.take(&mut held, data.len()) {
            return Err(Refused::Budget);
        }
        arrived.push(data);
    }
    Ok((arrived.whole(), held))
}

/// Whether a body of `len` bytes (declared, or sent so far) is longer than the function's
/// `max_bytes` or the server's whole budget allow.
fn too_long(len: u64, max_bytes: u64, budget: &Budget) -> Result<(), Refused> {
    if len > max_bytes {
        Err(Refused::TooLarge)
    } else if len > budget.cap as u64 {
        Err(Refused::OverBudget)
    } else {
        Ok(())
    }
}

/// What has arrived of a body: its one frame as hyper gave it (most bodies are one frame: no
/// copy), or from the second frame on every byte copied into one buffer. Never a list of the
/// frames: each frame's handle is 32 bytes and keeps alive the connection's read buffer it
/// points into, so a chunked body of one-byte chunks (six bytes each on the wire) held dozens of
/// times its length in memory while the budget counted its length.
enum Arrived {
    Nothing,
    One(Bytes),
    Copied(BytesMut),
}

impl Arrived {
    fn push(&mut self, data: Bytes) {
        match self {
            Self::Nothing => *self = Self::One(data),
            Self::One(first) => {
                let mut all = BytesMut::with_capacity(first.len() + data.len());
                all.extend_from_slice(first);
                all.extend_from_slice(&data);
                *self = Self::Copied(all);
            }
            Self::Copied(all) => all.extend_from_slice(&data),
        }
    }

    fn whole(self) -> Bytes {
        match self {
            Self::Nothing => Bytes::new(),
            Self::One(data) => data,
            Self::Copied(all) => all.freeze(),
        }
    }
}

impl Refused {
    /// How a refused body is answered: the outcome it is counted under, the status, and a
    /// message saying what to do; `read_limit` is the time the body had.
    pub(crate) fn answer(
        self,
        max_bytes: u64,
        read_limit: Duration,
        budget: &Budget,
    ) -> (Outcome, StatusCode, String) {
        match self {
            Self::TooLarge => (
                Outcome::TooLarge,
                StatusCode::PAYLOAD_TOO_LARGE,
                format!(
                    "the request body is over the function's limit of {max_bytes} bytes (max_body_bytes in its function.toml): send a smaller one"
                ),
            ),
            Self::OverBudget => (
                Outcome::TooLarge,
                StatusCode::PAYLOAD_TOO_LARGE,
                format!(
                    "the request body is over the {} bytes the server buffers for all requests' bodies at once (--max-buffered-body-bytes): send a smaller one",
                    budget.cap
                ),
            ),
            Self::Budget => (
                Outcome::Overload,
                StatusCode::SERVICE_UNAVAILABLE,
                format!(
                    "the server holds as many request-body bytes as it buffers at once ({} bytes, --max-buffered-body-bytes): retry after the Retry-After seconds, or send a smaller body",
                    budget.cap
                ),
            ),
            Self::TimedOut => (
                Outcome::Timeout,
                StatusCode::REQUEST_TIMEOUT,
                format!(
                    "the request body did not arrive within {read_limit:?} of the request's head (--body-read-timeout, or the function's time limit where shorter): send the whole body at once"
                ),
            ),
            Self::Read(e) => (
                Outcome::ClientError,
                StatusCode::BAD_REQUEST,
                format!("the request body could not be read: {e}"),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Sender = tokio::sync::mpsc::Sender<Result<hyper::body::Frame<Bytes>, std::io::Error>>;

    /// A body whose frames are sent on the returned channel, of `declared` length if given.
    fn channel_body(declared: Option<u64>) -> (Sender, Body) {
        let (tx, rx) = tokio::sync::mpsc::channel(8);
        let stream = Box::pin(futures_util::stream::unfold(rx, |mut rx| async move {
            rx.recv().await.map(|frame| (frame, rx))
        }));
        let body = http_body_util::StreamBody::new(stream);
        let body = match declared {
            Some(n) => Body::new(Declared(body, n)),
            None => Body::new(body),
        };
        (tx, body)
    }

    /// A body that declares its length, as hyper's does from Content-Length.
    struct Declared<B>(B, u64);

    impl<B: hyper::body::Body + Unpin> hyper::body::Body for Declared<B> {
        type Data = B::Data;
        type Error = B::Error;
        fn poll_frame(
            mut self: std::pin::Pin<&mut Self>,
            cx: &mut std::task::Context<'_>,
        ) -> Poll<Option<Result<hyper::body::Frame<B::Data>, B::Error>>> {
            std::pin::Pin::new(&mut self.0).poll_frame(cx)
        }
        fn size_hint(&self) -> hyper::body::SizeHint {
            hyper::body::SizeHint::with_exact(self.1)
        }
    }

    /// A server's budget, deadlines and reading gauge, for bodies of at most 100 bytes.
    struct Server {
        budget: Budget,
        deadlines: Deadlines,
        reading: Gauge,
    }

    impl Server {
        fn new(budget: u64) -> Self {
            Self {
                budget: Budget::new(budget),
                deadlines: Deadlines::default(),
                reading: Gauge::default(),
            }
        }

        /// Sends frames of `sizes` bytes (the body ends after them where `ends`), and reads
        /// the body within `within`.
        async fn read(
            &self,
            declared: Option<u64>,
            sizes: &[usize],
            ends: bool,
            within: Duration,
        ) -> Result<(Bytes, Held), Refused> {
            let (tx, body) = channel_body(declared);
            for &n in sizes {
                let frame = hyper::body::Frame::data(Bytes::from(vec![b'x'; n]));
                tx.send(Ok(frame)).await.unwrap();
            }
            let _open = (!ends).then_some(tx);
            let limits = Limits {
                max_bytes: 100,
                until: Instant::now() + within,
                budget: &self.budget,
                deadlines: &self.deadlines,
                reading: &self.reading,
            };
            read(body, limits).await
        }
    }

    const LONG: Duration = Duration::from_secs(30);

    #[tokio::test]
    async fn a_body_holds_its_bytes_of_the_budget_until_dropped_and_one_past_it_is_refused() {
        let server = Server::new(150);
        let (bytes, held) = server.read(None, &[60, 40], true, LONG).await.unwrap();
        assert_eq!((bytes.len(), server.budget.in_use()), (100, 100));
        // 60 more would pass the 150: refused, and what it took is given back.
        let refused = server.read(None, &[30, 30], false, LONG).await;
        assert_eq!(refused.err(), Some(Refused::Budget));
        assert_eq!(server.budget.in_use(), 100);
        // Declared past what is left: refused before a byte is read.
        let refused = server.read(Some(51), &[], false, LONG).await;
        assert_eq!(refused.err(), Some(Refused::Budget));
        drop((bytes, held));
        assert_eq!(server.budget.in_use(), 0);
    }

    #[tokio::test]
    async fn a_body_over_the_functions_limit_is_refused_declared_or_as_sent() {
        let server = Server::new(1000);
        let refused = server.read(Some(101), &[], false, LONG).await;
        assert_eq!(refused.err(), Some(Refused::TooLarge));
        let refused = server.read(None, &[80, 21], false, LONG).await;
        assert_eq!(refused.err(), Some(Refused::TooLarge));
        assert_eq!(server.budget.in_use(), 0);
    }

    #[tokio::test]
    async fn a_body_longer_than_the_whole_budget_is_refused_as_such_declared_or_as_sent() {
        let server = Server::new(50);
        let refused = server.read(Some(60), &[], false, LONG).await;
        assert_eq!(refused.err(), Some(Refused::OverBudget));
        let refused = server.read(None, &[30, 30], false, LONG).await;
        assert_eq!(refused.err(), Some(Refused::OverBudget));
        assert_eq!(server.budget.in_use(), 0);
    }

    #[tokio::test]
    async fn a_body_still_arriving_at_its_limit_is_refused_and_counted_reading_until_then() {
        let server = Arc::new(Server::new(1000));
        let reading = server.reading.clone();
        let within = Duration::from_millis(300);
        let reader = tokio::spawn(async move {
            let read = server.read(Some(50), &[10], false, within).await;
            read.err()
        });
        // Counted while it waits (the test's own 30 s bound is no timing claim).
        let counted = tokio::time::timeout(LONG, async {
            while reading.get() != 1 {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        });
        assert!(
            counted.await.is_ok(),
            "a body still arriving was not counted"
        );
        assert_eq!(reader.await.unwrap(), Some(Refused::TimedOut));
        assert_eq!(reading.get(), 0);
    }
}
