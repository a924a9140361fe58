//! Sandboxed modules shared by the Stores an embedder lets share them ([`ModuleCache`]): a guest
//! that loads the same PTX text as an earlier Store (a serve function whose handler calls
//! `module.from-ptx` on every request, say) gets that Store's rewrite and loaded module instead
//! of rewriting it and JIT-compiling it again.
//!
//! Why sharing is safe: a rewritten module holds no state of its own. Its `.global` and `.const`
//! variables are relocated into a block in each guest's own arena (the per-guest
//! `SandboxModule`), and every launch passes the guest's arena, control block and globals as
//! hidden arguments, so two guests running one shared module's kernels touch only their own
//! memory, as two guests given one bundle do. Trusted loads are never cached: their globals live
//! in the module, and sharing it would share them.
//!
//! What a guest can learn: whether a module it loads was loaded before in the cache's scope, from
//! how long the load took (a timing side channel, docs/ISOLATION.md). The embedder chooses the
//! scope: one cache per tenant (gpuhost serve gives each function version its own).
//!
//! Keys are the full PTX text (compared, not only hashed: two texts never share an entry). The
//! cache is bounded by entries and bytes of text and forgets the least recently used first; an
//! entry of an earlier context generation (the context was lost), or of another device than the
//! loading guest's, is a miss, replaced on load (give each device its own cache).
//! Quotas are charged per guest exactly as without the cache.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use gpuhost::Registry;
use ptxvm::sandbox::{GlobalsLayout, SandboxedKernel};

/// A rewritten, loaded module, as the cache hands it out.
#[derive(Clone)]
pub(crate) struct Shared {
    pub(crate) registry: Arc<Registry>,
    pub(crate) globals: Arc<GlobalsLayout>,
    pub(crate) kernels: Arc<[SandboxedKernel]>,
}

struct Entry {
    module: Shared,
    /// `ModuleCache::clock` when last looked up or inserted.
    used: u64,
}

#[derive(Default)]
struct Inner {
    entries: HashMap<Arc<str>, Entry>,
    /// Bytes of PTX text the keys hold.
    bytes: usize,
    clock: u64,
}

/// Sandboxed modules shared by the Stores given this cache ([`crate::CudaCtx::with_module_cache`]);
/// see the module header for why sharing is safe and how to scope it.
pub struct ModuleCache {
    inner: Mutex<Inner>,
    max_entries: usize,
    max_bytes: usize,
    hits: AtomicU64,
    misses: AtomicU64,
}

/// What a [`ModuleCache`] has done so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModuleCacheStats {
    /// Loads served from the cache: no rewrite, no driver load.
    pub hits: u64,
    /// Loads that did not find their text (or found it from a lost context): rewritten and
    /// loaded, then kept unless refused or over the bounds.
    pub misses: u64,
    /// Modules held now.
    pub entries: usize,
    /// Bytes of PTX text held now.
    pub bytes: usize,
}

impl ModuleCache {
    /// Entries kept by [`ModuleCache::default`].
    pub const DEFAULT_ENTRIES: usize = 64;
    /// Bytes of PTX text kept by [`ModuleCache::default`].
    pub const DEFAULT_BYTES: usize = 64 << 20;

    /// A cache holding at most `max_entries` modules and `max_bytes` of their PTX text. A text
    /// larger than `max_bytes` is loaded but not kept.
    pub fn new(max_entries: usize, max_bytes: usize) -> Self {
        Self {
            inner: Mutex::default(),
            max_entries,
            max_bytes,
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    /// Counts so far.
    pub fn stats(&self) -> ModuleCacheStats {
        let inner = self.lock();
        ModuleCacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            entries: inner.entries.len(),
            bytes: inner.bytes,
        }
    }

    /// Forgets every module (their holders keep theirs loaded until they let go); the counts
    /// stay.
    pub fn clear(&self) {
        let mut inner = self.lock();
        inner.entries.clear();
        inner.bytes = 0;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A panic while holding the lock leaves only a consistent map (every update is one
        // insert or remove), so a poisoned lock is still usable.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The module loaded from `ptx` on `host` in context generation `generation` (the caller
    /// entered the context first, so a loss is noticed and the generation moved on before an
    /// entry of the lost one is handed out), if kept. Counts a hit or a miss.
    pub(crate) fn get(
        &self,
        ptx: &str,
        host: &Arc<gpuhost::Host>,
        generation: u64,
    ) -> Option<Shared> {
        let mut inner = self.lock();
        inner.clock += 1;
        let now = inner.clock;
        let found = match inner.entries.get_mut(ptx) {
            // Another device's module (a cache given to Stores of several hosts) is a miss, as
            // is one of a lost context: its handles mean nothing here.
            Some(e)
                if Arc::ptr_eq(e.module.registry.host(), host)
                    && e.module.registry.generation() == generation =>
            {
                e.used = now;
                Some(e.module.clone())
            }
            _ => None,
        };
        let counter = if found.is_some() {
            &self.hits
        } else {
            &self.misses
        };
        counter.fetch_add(1, Ordering::Relaxed);
        found
    }

    /// Keeps `module`, loaded from `ptx`, replacing an entry of the same text (one of an earlier
    /// generation, or a racing load's), and forgets the least recently used past the bounds.
    pub(crate) fn insert(&self, ptx: &str, module: Shared) {
        if ptx.len() > self.max_bytes || self.max_entries == 0 {
            return;
        }
        let mut inner = self.lock();
        inner.clock += 1;
        let used = inner.clock;
        let key: Arc<str> = Arc::from(ptx);
        // A replaced entry keeps its key, so the bytes held change only for a new text.
        if inner.entries.insert(key, Entry { module, used }).is_none() {
            inner.bytes += ptx.len();
        }
        while inner.entries.len() > self.max_entries || inner.bytes > self.max_bytes {
            let Some(oldest) = inner
                .entries
                .iter()
                .min_by_key(|(_, e)| e.used)
                .map(|(k, _)| k.clone())
            else {
                break;
            };
            inner.entries.remove(&oldest);
            inner.bytes -= oldest.len();
        }
    }
}

impl Default for ModuleCache {
    fn default() -> Self {
        Self::new(Self::DEFAULT_ENTRIES, Self::DEFAULT_BYTES)
    }
}

impl std::fmt::Debug for ModuleCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModuleCache")
            .field("max_entries", &self.max_entries)
            .field("max_bytes", &self.max_bytes)
            .field("stats", &self.stats())
            .finish()
    }
}
