//! Per-guest quotas (set by the embedder, defaults documented here) and the usage counted
//! against them. Every size or count a guest controls is capped by one of these.

use crate::bindings::WitError;

/// Quotas for one guest (one Store). `Limits::default()` documents the defaults; the CLI exposes
/// each as a flag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Total bytes of module images (PTX text or cubin) the guest may have loaded at once.
    /// Default 16 MiB.
    pub max_module_bytes: u64,
    /// Modules loaded at once. Default 16.
    pub max_modules: u32,
    /// Size of one PTX text or cubin image. Default 4 MiB.
    pub max_ptx_bytes: u64,
    /// Live device buffers. Default 1024.
    pub max_buffers: u32,
    /// Bytes across live device buffers. Default 1 GiB.
    pub max_buffer_bytes: u64,
    /// Bytes moved by one `read` (the guest's linear memory receives them). Default 64 MiB.
    pub max_transfer_bytes: u64,
    /// Kernel launches enqueued and not yet observed complete. Default 1024.
    pub max_launches_in_flight: u32,
    /// Arguments of one launch. Default 64.
    pub max_launch_args: u32,
    /// Live streams plus events. Default 256.
    pub max_streams_and_events: u32,
    /// wasmtime fuel for the guest's CPU side (≈ one unit per wasm instruction); None: unmetered.
    /// Default 20 billion.
    pub fuel: Option<u64>,
    /// Linear memory of the guest, in bytes. Default 512 MiB.
    pub max_wasm_memory_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_module_bytes: 16 << 20,
            max_modules: 16,
            max_ptx_bytes: 4 << 20,
            max_buffers: 1024,
            max_buffer_bytes: 1 << 30,
            max_transfer_bytes: 64 << 20,
            max_launches_in_flight: 1024,
            max_launch_args: 64,
            max_streams_and_events: 256,
            fuel: Some(20_000_000_000),
            max_wasm_memory_bytes: 512 << 20,
        }
    }
}

/// What a guest holds now, counted against its [`Limits`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Usage {
    /// Bytes of live module images.
    pub module_bytes: u64,
    /// Live modules.
    pub modules: u32,
    /// Live buffers.
    pub buffers: u32,
    /// Bytes of live buffers.
    pub buffer_bytes: u64,
    /// Launches enqueued, not yet observed complete.
    pub launches_in_flight: u32,
    /// Live streams and events.
    pub streams_and_events: u32,
}

fn over(what: &str, want: u64, limit: u64) -> WitError {
    WitError::QuotaExceeded(format!(
        "{what}: this would make {want}, over the guest's limit of {limit}; free some first or ask the embedder to raise it"
    ))
}

impl Usage {
    /// Reserves one module of `bytes`; refused when over a quota.
    pub fn add_module(&mut self, l: &Limits, bytes: u64) -> Result<(), WitError> {
        if bytes > l.max_ptx_bytes {
            return Err(over("module image size (bytes)", bytes, l.max_ptx_bytes));
        }
        if self.modules >= l.max_modules {
            return Err(over(
                "loaded modules",
                u64::from(self.modules) + 1,
                l.max_modules.into(),
            ));
        }
        let total = self.module_bytes.saturating_add(bytes);
        if total > l.max_module_bytes {
            return Err(over("loaded module bytes", total, l.max_module_bytes));
        }
        self.modules += 1;
        self.module_bytes = total;
        Ok(())
    }

    /// Releases a module reserved by [`Usage::add_module`].
    pub fn remove_module(&mut self, bytes: u64) {
        self.modules = self.modules.saturating_sub(1);
        self.module_bytes = self.module_bytes.saturating_sub(bytes);
    }

    /// Reserves one buffer of `bytes`; refused when over a quota.
    pub fn add_buffer(&mut self, l: &Limits, bytes: u64) -> Result<(), WitError> {
        if self.buffers >= l.max_buffers {
            return Err(over(
                "live buffers",
                u64::from(self.buffers) + 1,
                l.max_buffers.into(),
            ));
        }
        let total = self.buffer_bytes.saturating_add(bytes);
        if total > l.max_buffer_bytes {
            return Err(over("buffer bytes", total, l.max_buffer_bytes));
        }
        self.buffers += 1;
        self.buffer_bytes = total;
        Ok(())
    }

    /// Releases a buffer reserved by [`Usage::add_buffer`].
    pub fn remove_buffer(&mut self, bytes: u64) {
        self.buffers = self.buffers.saturating_sub(1);
        self.buffer_bytes = self.buffer_bytes.saturating_sub(bytes);
    }

    /// Reserves one stream or event.
    pub fn add_stream_or_event(&mut self, l: &Limits) -> Result<(), WitError> {
        if self.streams_and_events >= l.max_streams_and_events {
            let want = u64::from(self.streams_and_events) + 1;
            return Err(over(
                "live streams and events",
                want,
                l.max_streams_and_events.into(),
            ));
        }
        self.streams_and_events += 1;
        Ok(())
    }

    /// Releases a stream or event.
    pub fn remove_stream_or_event(&mut self) {
        self.streams_and_events = self.streams_and_events.saturating_sub(1);
    }

    /// Checks that one more launch fits.
    pub fn check_launch(&self, l: &Limits) -> Result<(), WitError> {
        if self.launches_in_flight >= l.max_launches_in_flight {
            let want = u64::from(self.launches_in_flight) + 1;
            return Err(over(
                "launches in flight (synchronize a stream)",
                want,
                l.max_launches_in_flight.into(),
            ));
        }
        Ok(())
    }
}

/// Checks that `[offset, offset + len)` lies inside `size` bytes and converts it for gpuhost.
pub fn check_range(
    what: &str,
    offset: u64,
    len: u64,
    size: usize,
) -> Result<(usize, usize), WitError> {
    let size = size as u64;
    match offset.checked_add(len) {
        Some(end) if end <= size => Ok((offset as usize, len as usize)),
        _ => Err(WitError::OutOfBounds(format!(
            "{what}: bytes [{offset}, {offset} + {len}) do not fit in a buffer of {size} bytes"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffer_count_quota_refuses_one_past_the_limit_and_frees_on_remove() {
        let l = Limits {
            max_buffers: 2,
            ..Limits::default()
        };
        let mut u = Usage::default();
        u.add_buffer(&l, 8).unwrap();
        u.add_buffer(&l, 8).unwrap();
        assert!(matches!(
            u.add_buffer(&l, 8),
            Err(WitError::QuotaExceeded(_))
        ));
        u.remove_buffer(8);
        u.add_buffer(&l, 8).unwrap();
        assert_eq!(u.buffer_bytes, 16);
    }

    #[test]
    fn buffer_byte_quota_counts_the_total() {
        let l = Limits {
            max_buffer_bytes: 100,
            ..Limits::default()
        };
        let mut u = Usage::default();
        u.add_buffer(&l, 60).unwrap();
        assert!(
            matches!(u.add_buffer(&l, 41), Err(WitError::QuotaExceeded(m)) if m.contains("101"))
        );
        u.add_buffer(&l, 40).unwrap();
    }

    #[test]
    fn module_quota_checks_image_size_count_and_total() {
        let l = Limits {
            max_ptx_bytes: 10,
            max_modules: 2,
            max_module_bytes: 15,
            ..Limits::default()
        };
        let mut u = Usage::default();
        assert!(u.add_module(&l, 11).is_err());
        u.add_module(&l, 10).unwrap();
        assert!(u.add_module(&l, 6).is_err());
        u.add_module(&l, 5).unwrap();
        assert!(u.add_module(&l, 0).is_err());
        u.remove_module(5);
        assert_eq!((u.modules, u.module_bytes), (1, 10));
    }

    #[test]
    fn range_check_rejects_overflow_and_accepts_exact_end() {
        assert_eq!(check_range("r", 60, 4, 64).unwrap(), (60, 4));
        assert!(check_range("r", 61, 4, 64).is_err());
        assert!(check_range("r", u64::MAX, 2, 64).is_err());
        assert_eq!(check_range("r", 64, 0, 64).unwrap(), (64, 0));
    }
}
