//! A request's stderr as the server keeps it, for a failure's log line (crate::failure): its
//! last bytes, however much the guest writes. wasmtime's `MemoryOutputPipe` closed its stream
//! once full, and a Rust guest's `eprint!` panics on a closed stderr: a function that wrote 8 KiB
//! to stderr in one request trapped, and the end a trap's log line is for (a panic's message
//! comes last) was the part not kept.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use bytes::Bytes;
use tokio::io::AsyncWrite;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamError};

/// Bytes a guest may write in one call (wasi:io's check-write permit): a guest's larger write is
/// made in pieces of this, so the host never copies more of its memory at once.
const PERMIT: usize = 64 << 10;

/// The last `cap` bytes a guest wrote to stderr; every write succeeds. Clones share them.
#[derive(Clone)]
pub(crate) struct StderrTail(Arc<Mutex<Tail>>);

struct Tail {
    kept: VecDeque<u8>,
    cap: usize,
    /// Bytes written before those kept.
    dropped: u64,
}

impl StderrTail {
    pub(crate) fn new(cap: usize) -> Self {
        Self(Arc::new(Mutex::new(Tail {
            // Nothing allocated until the guest writes: most requests write nothing.
            kept: VecDeque::new(),
            cap,
            dropped: 0,
        })))
    }

    fn push(&self, mut data: &[u8]) {
        // A panic elsewhere while holding the lock leaves bytes that are still bytes.
        let mut tail = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if data.len() > tail.cap {
            tail.dropped += (data.len() - tail.cap) as u64;
            data = &data[data.len() - tail.cap..];
        }
        let over = (tail.kept.len() + data.len()).saturating_sub(tail.cap);
        tail.kept.drain(..over);
        tail.dropped += over as u64;
        tail.kept.extend(data);
    }

    /// What is kept, as text, after how many bytes came before it, if any did.
    pub(crate) fn contents(&self) -> String {
        let tail = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let (a, b) = tail.kept.as_slices();
        let text = String::from_utf8_lossy(&[a, b].concat()).into_owned();
        match tail.dropped {
            0 => text,
            n => format!("({n} bytes before these left out) {text}"),
        }
    }
}

impl OutputStream for StderrTail {
    fn write(&mut self, bytes: Bytes) -> Result<(), StreamError> {
        self.push(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> Result<(), StreamError> {
        Ok(())
    }

    fn check_write(&mut self) -> Result<usize, StreamError> {
        Ok(PERMIT)
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for StderrTail {
    /// Always ready: a write never waits.
    async fn ready(&mut self) {}
}

impl AsyncWrite for StderrTail {
    fn poll_write(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.push(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

impl IsTerminal for StderrTail {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for StderrTail {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tail_keeps_the_last_cap_bytes_and_counts_those_before() {
        let tail = StderrTail::new(4);
        tail.push(b"ab");
        assert_eq!(tail.contents(), "ab");
        tail.push(b"cde");
        assert_eq!(tail.contents(), "(1 bytes before these left out) bcde");
        tail.push(b"0123456789");
        assert_eq!(tail.contents(), "(11 bytes before these left out) 6789");
    }
}
