//! A guest's cache of instantiated graphs for its batched bursts (see the parent module's
//! header): a batch whose shape matches a cached graph replays it, updating only the nodes whose
//! launch changed since their last replay; a new shape instantiates a graph, evicting the least
//! recently used past `Limits::max_cached_graphs`. Each cached graph holds the module quota
//! shares of its kernels until it is evicted.

use std::sync::Arc;

use gpuhost::{GraphLaunch, KernelGraph};
use smallvec::SmallVec;

use super::{Collected, Hidden};
use crate::limits::{Charge, Usage};
use crate::stream::InFlight;

/// A cached graph: when it was last used, the module quota shares of its kernels, and what its
/// nodes ran last.
struct Cached {
    used: u64,
    graph: KernelGraph,
    charges: Vec<Charge>,
    /// Per node, the [`Deferred::id`] of the launch it last ran.
    ids: Vec<u64>,
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
        for charge in c.charges {
            charge.release(usage);
        }
    }

    /// Drops every cached graph.
    pub(super) fn clear(&mut self, usage: &mut Usage) {
        while !self.graphs.is_empty() {
            self.evict(0, usage);
        }
    }

    /// Replays `launches` (made of `batch`, with `hidden`'s arguments) through the cached graph
    /// of their shape, or a new one (cached, evicting the least recently used); one Completion
    /// for them all.
    pub(super) fn replay(
        &mut self,
        stream: &gpuhost::Stream,
        batch: &[Collected],
        launches: &[GraphLaunch<'_>],
        usage: &mut Usage,
        hidden: Hidden<'_>,
    ) -> gpuhost::Result<InFlight> {
        self.clock += 1;
        // Read with the arguments (laid out just before): a Store's data is used by one thread
        // at a time, so the bytes mapped cannot change in between.
        let key = hidden_key(hidden);
        let n = launches.len();
        if let Some(i) = self.graphs.iter().position(|c| c.graph.fits(launches)) {
            let c = &mut self.graphs[i];
            c.used = self.clock;
            // A node whose launch is the collected form it ran last holds its arguments.
            let unchanged: SmallVec<[bool; 32]> = batch
                .iter()
                .zip(&c.ids)
                .map(|(d, &id)| d.id == id && (d.sandbox.is_none() || c.hidden == key))
                .collect();
            match stream.replay_graph(&mut c.graph, launches, &unchanged) {
                Ok(done) => {
                    c.ids.clear();
                    c.ids.extend(batch.iter().map(|d| d.id));
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
        let mut graph = KernelGraph::new(stream, launches)?;
        // Its nodes hold these launches' arguments, checked by `new`.
        let all: SmallVec<[bool; 32]> = SmallVec::from_elem(true, n);
        let done = stream.replay_graph(&mut graph, launches, &all)?;
        self.launches += n as u64;
        if self.graphs.len() >= self.cap
            && let Some(oldest) = (0..self.graphs.len()).min_by_key(|&i| self.graphs[i].used)
        {
            self.evict(oldest, usage);
        }
        if self.cap > 0 {
            let mut charges: Vec<Charge> = Vec::new();
            for d in batch {
                if !charges.iter().any(|c| c.same(&d.charge)) {
                    charges.push(d.charge.clone());
                }
            }
            self.graphs.push(Cached {
                used: self.clock,
                graph,
                charges,
                ids: batch.iter().map(|d| d.id).collect(),
                hidden: key,
            });
            usage.cached_graphs += 1;
        }
        Ok(InFlight::replay(done, n))
    }
}
