//! The device `printf` FIFO of a context, as NVIDIA's driver keeps it: kernels append records
//! (their formatted text) while the FIFO has room (`CU_LIMIT_PRINTF_FIFO_SIZE`, 1 MiB by
//! default; a record that does not fit is lost), and the host prints and empties it at the
//! points NVIDIA documents: context, stream and event synchronisation, blocking copies, module
//! load and unload, context destruction. printf output goes to stdout; a failed device
//! `assert`'s message goes to stderr at the same points (the CUDA programming guide: "the
//! message is sent to stderr once a host synchronization function is called").

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};

/// A context's printf FIFO.
#[derive(Debug, Default)]
pub(crate) struct Fifo {
    inner: Mutex<Pending>,
    /// Whether anything is pending: lets the flush at every launch skip the lock.
    pending: AtomicBool,
}

#[derive(Debug, Default)]
struct Pending {
    /// FIFO bytes used by the records not yet printed.
    used: u64,
    text: Vec<u8>,
    /// Failed-assert messages, for stderr.
    asserts: Vec<u8>,
}

impl Fifo {
    fn lock(&self) -> std::sync::MutexGuard<'_, Pending> {
        // Updates are appends and additions; a panic cannot tear them.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Room left for a launch's records, of a FIFO of `limit` bytes.
    pub(crate) fn room(&self, limit: u64) -> u64 {
        limit.saturating_sub(self.lock().used)
    }

    /// Adds a finished launch's records (`used` FIFO bytes).
    pub(crate) fn append(&self, text: &[u8], used: u64) {
        let mut p = self.lock();
        p.used = p.used.saturating_add(used);
        p.text.extend_from_slice(text);
        self.pending.store(true, Ordering::Release);
    }

    /// Adds a failed assert's message (for stderr; it costs no FIFO room).
    pub(crate) fn append_assert(&self, line: &str) {
        let mut p = self.lock();
        p.asserts.extend_from_slice(line.as_bytes());
        p.asserts.push(b'\n');
        self.pending.store(true, Ordering::Release);
    }

    /// Prints what is pending (printf to stdout, assert messages to stderr) and empties the FIFO.
    pub(crate) fn flush(&self) {
        if !self.pending.swap(false, Ordering::AcqRel) {
            return;
        }
        let (text, asserts) = {
            let mut p = self.lock();
            p.used = 0;
            (std::mem::take(&mut p.text), std::mem::take(&mut p.asserts))
        };
        // Like a C program's printf: a closed or full stream loses the output, nothing else.
        if !text.is_empty() {
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(&text);
            let _ = out.flush();
        }
        if !asserts.is_empty() {
            let _ = std::io::stderr().lock().write_all(&asserts);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn room_shrinks_with_pending_records_and_flush_frees_it() {
        let f = Fifo::default();
        assert_eq!(f.room(100), 100);
        f.append(b"a\n", 40);
        assert_eq!(f.room(100), 60);
        f.append(b"b\n", 70);
        assert_eq!(f.room(100), 0);
        f.flush();
        assert_eq!(f.room(100), 100);
    }
}
