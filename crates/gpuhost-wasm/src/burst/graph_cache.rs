//! A guest's cache of instantiated graphs for its batched bursts (see the parent module's
//! header): a batch whose shape matches a cached graph replays it, updating only the nodes whose
//! launch changed since their last replay; a new shape instantiates a graph, evicting the least
//! recently used past `Limits::max_cached_graphs`. Each cached graph remembers what its nodes
//! ran last, to tell an unchanged launch by comparing it with that, and holds its kernels'
//! module quota shares until it is evicted (it keeps their modules loaded).
//!
//! **No buffer kept alive.** What a node ran last is remembered without a strong handle on any
//! buffer: a bound launch's shared form weakly, an argument-list launch's arguments with weak
//! buffers. gpuhost's graph holds its nodes' buffers weakly too, and a replay holds each
//! buffer it runs until it completes. So a buffer the guest drops is freed once no launch in
//! flight uses it, even while graphs that ran it stay cached — device memory beyond the
//! guest's buffer quota otherwise (up to `max_cached_graphs` x batch x buffers per launch).
//! A launch is judged unchanged only when the batch holds the very buffers its node ran last
//! (a weak handle compares exactly: it keeps the handle's allocation, so no new buffer can take
//! its address), so a node is only ever told to replay arguments whose buffers are alive.

use std::ptr;
use std::sync::{Arc, Weak};

use gpuhost::KernelGraph;
use smallvec::SmallVec;

use super::{Collected, Deferred, Hidden, Launches, Ran, args_room, lay_out};
use crate::limits::{Charge, Usage};
use crate::stream::InFlight;
use crate::watchdog::Stamp;

/// A cached graph: when it was last used, and what its nodes ran last.
struct Cached {
    used: u64,
    graph: KernelGraph,
    /// Per node, the launch it last ran.
    last: Vec<Last>,
    /// Its nodes' kernels' module quota shares (its kernels never change: they are its shape).
    charges: Vec<Charge>,
    /// The hidden arguments its sandboxed nodes last ran with.
    hidden: HiddenKey,
}

/// What a node ran last, keeping no buffer alive (see the module header).
enum Last {
    /// A bound launch's shared form: the very form again is the same launch.
    Shared(Weak<Deferred>),
    /// An argument-list launch.
    Own(Ran),
}

impl Last {
    /// What a node that ran `d` remembers of it (the batch keeps `d`: moving launches out of
    /// it cost more than this).
    fn of(d: &Collected) -> Self {
        match d {
            Collected::Own(d) => Last::Own(d.ran()),
            Collected::Shared(d) => Last::Shared(Arc::downgrade(d)),
        }
    }

    /// Whether `d` is the very launch remembered: the same shared form (an argument-list
    /// launch found the same is remembered as well by what is kept already).
    fn is(&self, d: &Collected) -> bool {
        match (self, d) {
            (Last::Shared(w), Collected::Shared(d)) => ptr::eq(w.as_ptr(), Arc::as_ptr(d)),
            (Last::Own(_), Collected::Own(_)) => true,
            _ => false,
        }
    }

    /// Whether `d` launches what the node ran last (see `Deferred::same`; the kernel and
    /// geometry are the graph's shape). A shared form no longer alive is not compared: the
    /// launch is taken as changed, and gpuhost checks and compares it.
    fn same(&self, d: &Collected, usage: &mut Usage) -> bool {
        match self {
            Last::Own(ran) => d.same_as_ran(ran),
            Last::Shared(w) => {
                if let Collected::Shared(a) = d
                    && ptr::eq(w.as_ptr(), Arc::as_ptr(a))
                {
                    return true;
                }
                let Some(last) = w.upgrade() else {
                    return false;
                };
                let same = Deferred::same(d, &last);
                Collected::Shared(last).release(usage);
                same
            }
        }
    }
}

/// What tells a batch's hidden arguments apart (the confinement, by its arena, which it keeps
/// for its life; the bytes mapped; the epoch and the stream's start counter): the rest of them
/// is fixed by the confinement and by each launch's kernel.
type HiddenKey = Option<(usize, u64, Stamp)>;

fn hidden_key(hidden: Hidden<'_>) -> HiddenKey {
    hidden.map(|(c, stamp)| (Arc::as_ptr(&c.arena) as usize, c.arena.mapped(), stamp))
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

    /// Replays `batch` (with `hidden`'s arguments) through the cached graph of its shape, or a
    /// new one (cached, evicting the least recently used); one Completion for them all. On
    /// success a cached graph remembers the batch's launches (holding none of their buffers);
    /// `batch` is left for the caller to release.
    pub(super) fn replay(
        &mut self,
        stream: &gpuhost::Stream,
        batch: &[Collected],
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
                .map(|(d, last)| {
                    (d.sandbox.is_none() || c.hidden == key) && last.same(d, &mut *usage)
                })
                .collect();
            let mut args = args_room(batch, &unchanged);
            let mut launches = Launches::new();
            lay_out(batch, hidden, &unchanged, &mut args, &mut launches);
            let replayed = stream.replay_graph(&mut c.graph, &launches, &unchanged);
            // It borrows the batch, which the graph keeps below.
            drop(launches);
            match replayed {
                Ok(done) => {
                    // A node that ran the very launch again remembers it already.
                    let ran = batch.iter().zip(c.last.iter_mut()).zip(&unchanged);
                    for ((d, last), &same) in ran {
                        if !(same && last.is(d)) {
                            *last = Last::of(d);
                        }
                    }
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
            let charges = batch.iter().map(|d| d.charge.clone()).collect();
            let last = batch.iter().map(Last::of).collect();
            self.graphs.push(Cached {
                used: self.clock,
                graph,
                last,
                charges,
                hidden: key,
            });
            usage.cached_graphs += 1;
        }
        Ok(InFlight::replay(done, n))
    }
}
