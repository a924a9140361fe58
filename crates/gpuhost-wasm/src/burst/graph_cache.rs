//! A guest's cache of instantiated graphs for its batched bursts (see the parent module's
//! header): a batch whose shape matches a cached graph replays it, updating only the nodes whose
//! launch changed since their last replay; a new shape instantiates a graph, evicting the least
//! recently used past `Limits::max_cached_graphs`. Each cached graph keeps the launches its
//! nodes ran last — to tell an unchanged launch by comparing it with them, and holding its
//! kernels' module quota shares through them until it is evicted.

use std::sync::Arc;

use gpuhost::KernelGraph;
use smallvec::SmallVec;

use super::{Collected, Hidden, Launches, args_room, lay_out};
use crate::limits::Usage;
use crate::stream::InFlight;

/// A cached graph: when it was last used, and what its nodes ran last.
struct Cached {
    used: u64,
    graph: KernelGraph,
    /// Per node, the launch it last ran (whose charges keep its kernel's module counted).
    last: Vec<Collected>,
    /// The hidden arguments its sandboxed nodes last ran with.
    hidden: HiddenKey,
}

/// What tells a batch's hidden arguments apart (the confinement, by its arena, which it keeps
/// for its life; the bytes mapped; the epoch): the rest of them is fixed by the confinement and
/// by each launch's kernel.
type HiddenKey = Option<(usize, u64, u32)>;

fn hidden_key(hidden: Hidden<'_>) -> HiddenKey {
    hidden.map(|(c, epoch)| (Arc::as_ptr(&c.arena) as usize, c.arena.mapped(), epoch))
}

/// A guest's instantiated graphs, least recently used evicted past `Limits::max_cached_graphs`.
pub(crate) struct GraphCache {
    cap: usize,
    graphs: Vec<Cached>,
    clock: u64,
    /// Launches replayed through graphs.
    launches: u64,
    /// Building or replaying a graph failed other than by a lost context: graphs are off.
    pub(super) broken: bool,
}

impl GraphCache {
    pub(crate) fn new(cap: u32) -> Self {
        Self {
            cap: cap as usize,
            graphs: Vec::new(),
            clock: 0,
            launches: 0,
            broken: false,
        }
    }

    /// Launches replayed through graphs so far.
    pub(crate) fn launches(&self) -> u64 {
        self.launches
    }

    /// Whether a flush may use graphs at all.
    pub(crate) fn usable(&self) -> bool {
        self.cap > 0 && !self.broken
    }

    /// Drops cached graph `i`, giving its quota shares back to `usage`.
    fn evict(&mut self, i: usize, usage: &mut Usage) {
        let c = self.graphs.swap_remove(i);
        usage.cached_graphs = usage.cached_graphs.saturating_sub(1);
        for d in c.last {
            d.release(usage);
        }
    }

    /// Drops every cached graph.
    pub(super) fn clear(&mut self, usage: &mut Usage) {
        while !self.graphs.is_empty() {
            self.evict(0, usage);
        }
    }

    /// Replays `batch` (with `hidden`'s arguments) through the cached graph of its shape, or a
    /// new one (cached, evicting the least recently used); one Completion for them all. On
    /// success the graph keeps the batch, and `batch` holds what it kept before (for the caller
    /// to release).
    pub(super) fn replay(
        &mut self,
        stream: &gpuhost::Stream,
        batch: &mut Vec<Collected>,
        usage: &mut Usage,
        hidden: Hidden<'_>,
    ) -> gpuhost::Result<InFlight> {
        self.clock += 1;
        // Read with the arguments (laid out just below): a Store's data is used by one thread
        // at a time, so the bytes mapped cannot change in between.
        let key = hidden_key(hidden);
        let n = batch.len();
        let shapes = || batch.iter().map(|d| (&*d.kernel, d.cfg));
        if let Some(i) = self
            .graphs
            .iter()
            .position(|c| c.graph.fits_shapes(shapes()))
        {
            let c = &mut self.graphs[i];
            c.used = self.clock;
            // A node whose launch is what it ran last holds its arguments: neither checked,
            // laid out nor compared again.
            let unchanged: SmallVec<[bool; 32]> = batch
                .iter()
                .zip(&c.last)
                .map(|(d, last)| d.same(last) && (d.sandbox.is_none() || c.hidden == key))
                .collect();
            let mut args = args_room(batch, &unchanged);
            let mut launches = Launches::new();
            lay_out(batch, hidden, &unchanged, &mut args, &mut launches);
            let replayed = stream.replay_graph(&mut c.graph, &launches, &unchanged);
            // It borrows the batch, which the graph keeps below.
            drop(launches);
            match replayed {
                Ok(done) => {
                    std::mem::swap(&mut c.last, batch);
                    c.hidden = key;
                    self.launches += n as u64;
                    return Ok(InFlight::replay(done, n));
                }
                Err(e) => {
                    self.evict(i, usage);
                    return Err(e);
                }
            }
        }
        let mut args = args_room(batch, &[]);
        let mut launches = Launches::new();
        lay_out(batch, hidden, &[], &mut args, &mut launches);
        let mut graph = KernelGraph::new(stream, &launches)?;
        // Its nodes hold these launches' arguments, checked by `new`.
        let all: SmallVec<[bool; 32]> = SmallVec::from_elem(true, n);
        let done = stream.replay_graph(&mut graph, &launches, &all)?;
        drop(launches);
        self.launches += n as u64;
        if self.graphs.len() >= self.cap
            && let Some(oldest) = (0..self.graphs.len()).min_by_key(|&i| self.graphs[i].used)
        {
            self.evict(oldest, usage);
        }
        if self.cap > 0 {
            self.graphs.push(Cached {
                used: self.clock,
                graph,
                last: std::mem::take(batch),
                hidden: key,
            });
            usage.cached_graphs += 1;
        }
        Ok(InFlight::replay(done, n))
    }
}
