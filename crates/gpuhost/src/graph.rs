//! CUDA graphs of kernel launches: a [`KernelGraph`] is a fixed sequence of launches (kernels,
//! grids, blocks, dynamic shared memory), instantiated once and replayed on a [`Stream`] with
//! one `cuGraphLaunch`. Between replays only arguments change: a node whose argument bytes
//! differ from its last replay is updated in place (`cuGraphExecKernelNodeSetParams`), the
//! others cost nothing. Replaying `n` launches this way costs the driver one submission instead
//! of `n`, which is what pays on a GPU where a stream launch costs about three times a graph
//! node.
//!
//! A graph is bound to its host's context generation like every gpuhost handle: it refuses with
//! [`Error::ContextLost`] after a reset, and a replay is checked exactly as [`Stream::launch`]
//! checks each of its launches. The nodes run one after the other (each depends on the one
//! before), as launches on one stream do.
//!
//! Two ways to replay. [`Stream::launch_graph`] checks, packs and compares every launch and
//! returns one [`Completion`] per launch, as that many `Stream::launch` calls would.
//! [`Stream::replay_graph`] is for a caller that knows which launches are the ones the graph
//! ran last time (a guest relaunching the same bound launches): it checks and compares only
//! the others, and returns one Completion for the whole replay — its launches end together, as
//! one graph launch on one stream — still counting `n` launches in the host's stats. A node
//! left out replays the arguments it holds, which were checked when it got them, but only while
//! every buffer they point into is alive.
//!
//! **Buffers.** A graph does not keep the buffers its nodes last ran alive: it holds them weakly
//! ([`WeakBuffer`]), so a buffer its owner drops is freed even while a graph that used it
//! exists (a cache of graphs would otherwise hold device memory no one can reach). A replay
//! takes a strong handle on every buffer it runs — a node left out only if each of its buffers
//! is still alive, the others from their launch's arguments — and its Completion keeps them
//! until the replay has run. A node left out whose buffers were freed is checked and re-set
//! from its launch's arguments if they were given, and the replay is refused if not. So a wrong
//! hint from the caller replays old, valid arguments of live buffers, or is refused: never
//! freed memory.

use std::ptr;
use std::sync::{Arc, OnceLock};

use cudarc::driver::sys::{
    self, CUDA_KERNEL_NODE_PARAMS, CUfunction, CUgraph, CUgraphExec, CUgraphNode,
};
use smallvec::SmallVec;

use crate::buffer::{DeviceBuffer, WeakBuffer, keep_once, recently_kept};
use crate::completion::Completion;
use crate::error::{Error, Result};
use crate::host::Host;
use crate::launch::{Arg, LaunchConfig, PackedArgs};
use crate::registry::Kernel;
use crate::result::{self, has_symbol};
use crate::stream::Stream;

/// One launch of a graph: what [`Stream::launch`] takes.
#[derive(Debug, Clone, Copy)]
pub struct GraphLaunch<'a> {
    /// The kernel.
    pub kernel: &'a Kernel,
    /// Its geometry.
    pub cfg: LaunchConfig,
    /// Its arguments.
    pub args: &'a [Arg<'a>],
}

/// An instantiated graph of kernel launches in stream order (see the module header).
pub struct KernelGraph {
    host: Arc<Host>,
    generation: u64,
    graph: CUgraph,
    exec: CUgraphExec,
    nodes: Vec<Node>,
    /// One kernel handle per kernel the graph launches: its modules stay loaded while the graph
    /// exists, and a release names the graph's holders.
    holds: Vec<Kernel>,
}

/// A node of the graph: its launch shape, the argument bytes its executable node holds now, and
/// the buffers those point into, held weakly (see the module header).
struct Node {
    raw: CUgraphNode,
    func: CUfunction,
    cfg: LaunchConfig,
    args: Vec<u8>,
    buffers: Vec<WeakBuffer>,
}

/// The buffers one replay runs, each at most a few times (see `keep_once`): what its
/// Completion keeps alive (inline for a burst's usual few).
type Kept = SmallVec<[DeviceBuffer; 16]>;

impl Node {
    /// Keeps every buffer the node's arguments point into in `kept` (noted as used by a kernel,
    /// as `Stream::prepare` notes a launch's); false when one was freed, so the node must not
    /// replay its arguments.
    fn keep_alive(&self, kept: &mut Kept) -> bool {
        for w in &self.buffers {
            if recently_kept(kept, w) {
                continue;
            }
            let Some(b) = w.upgrade() else {
                return false;
            };
            b.note_kernel();
            kept.push(b);
        }
        true
    }
}

// SAFETY: graph handles are driver objects usable from any thread with their context bound,
// which every method does through Host::enter_for; `&mut self` serialises updates and launches.
unsafe impl Send for KernelGraph {}
// SAFETY: as above; `&self` methods only read the Rust-side description.
unsafe impl Sync for KernelGraph {}

/// Label of the kernel handles a graph holds (what a refused release names).
const HOLDER_LABEL: &str = "kernel graph";

/// The argument bytes of a launch as the kernel sees them (to tell whether a node changed).
fn encode(args: &[Arg<'_>], out: &mut Vec<u8>) {
    out.clear();
    for a in args {
        match a {
            Arg::Bytes(b) => out.extend_from_slice(b),
            _ => out.extend_from_slice(&a.scalar().unwrap_or(0).to_le_bytes()[..a.size()]),
        }
    }
}

/// The buffer arguments of a launch, in order.
fn buffer_args<'a>(args: &'a [Arg<'a>]) -> impl Iterator<Item = &'a DeviceBuffer> {
    args.iter().filter_map(|a| match a {
        Arg::Buffer(b, _) => Some(*b),
        _ => None,
    })
}

/// Whether `held` are exactly the buffers of `args`, in order (the same buffers, not only the
/// same addresses: a zero-length anchor shares its address with the buffer at its base, and a
/// buffer allocated after one was freed may get its address).
fn holds_buffers_of(held: &[WeakBuffer], args: &[Arg<'_>]) -> bool {
    let mut held = held.iter();
    buffer_args(args).all(|b| held.next().is_some_and(|h| h.is(b))) && held.next().is_none()
}

/// The driver's description of a launch (`packed` must outlive its use; the driver copies the
/// parameters at the call).
fn node_params(
    func: CUfunction,
    cfg: &LaunchConfig,
    packed: &mut PackedArgs,
) -> CUDA_KERNEL_NODE_PARAMS {
    CUDA_KERNEL_NODE_PARAMS {
        func,
        gridDimX: cfg.grid[0],
        gridDimY: cfg.grid[1],
        gridDimZ: cfg.grid[2],
        blockDimX: cfg.block[0],
        blockDimY: cfg.block[1],
        blockDimZ: cfg.block[2],
        sharedMemBytes: cfg.shared_mem_bytes,
        kernelParams: packed.as_params(),
        extra: ptr::null_mut(),
        // Unused when `func` is set.
        kern: ptr::null_mut(),
        ctx: ptr::null_mut(),
    }
}

/// The entry points a graph uses that an older driver may lack (calling a missing one through
/// cudarc would panic); CUDA 12.0 drivers export them all.
const ENTRY_POINTS: [&str; 4] = [
    "cuGraphAddKernelNode_v2",
    "cuGraphExecKernelNodeSetParams_v2",
    "cuGraphInstantiateWithFlags",
    "cuGraphLaunch",
];

/// The first of [`ENTRY_POINTS`] the loaded driver lacks, looked up once.
fn missing_entry_point() -> Option<&'static str> {
    static MISSING: OnceLock<Option<&'static str>> = OnceLock::new();
    *MISSING.get_or_init(|| ENTRY_POINTS.into_iter().find(|s| !has_symbol(s)))
}

impl KernelGraph {
    /// Builds and instantiates a graph replaying `launches` in order on a stream of `stream`'s
    /// host and generation. Each launch is checked as [`Stream::launch`] checks it; the arguments
    /// given here are the nodes' first ones.
    pub fn new(stream: &Stream, launches: &[GraphLaunch<'_>]) -> Result<Self> {
        let Some(first) = launches.first() else {
            return Err(Error::InvalidLaunch {
                kernel: "(none)".into(),
                reason: "a kernel graph needs at least one launch".into(),
            });
        };
        let mut packed = launches
            .iter()
            .map(|l| stream.prepare(l.kernel, l.cfg, l.args))
            .collect::<Result<Vec<_>>>()?;
        if let Some(call) = missing_entry_point() {
            return Err(Error::Driver {
                call,
                code: sys::CUresult::CUDA_ERROR_NOT_FOUND,
                name: "not exported by this driver: kernel graphs need a CUDA 12.0 or newer driver; launch on a stream instead".into(),
            });
        }
        let host = stream.host().clone();
        let generation = host.enter_for(stream.generation())?;
        if launches.iter().any(|l| l.kernel.generation() != generation) {
            return Err(Error::ContextLost { generation });
        }
        let mut holds: Vec<Kernel> = Vec::new();
        for l in launches {
            let held = holds.iter().any(|h| {
                Arc::ptr_eq(h.registry(), l.kernel.registry()) && h.name() == l.kernel.name()
            });
            if !held {
                holds.push(
                    l.kernel
                        .registry()
                        .kernel_labeled(l.kernel.name(), HOLDER_LABEL)?,
                );
            }
        }
        // SAFETY: the context is bound and current-generation; the graph is destroyed by Drop.
        let graph = host.check_at(unsafe { result::graph::create() }, generation)?;
        // From here on the graph is destroyed by Drop, whatever fails.
        let mut this = Self {
            host,
            generation,
            graph,
            exec: ptr::null_mut(),
            nodes: Vec::with_capacity(launches.len()),
            holds,
        };
        let mut prev: Option<CUgraphNode> = None;
        for (l, p) in launches.iter().zip(packed.iter_mut()) {
            let params = node_params(l.kernel.raw(), &l.cfg, p);
            // SAFETY: the graph is live in the bound context; `prev` is a node of this graph or
            // none; `params` points at one parameter per kernel parameter (checked by prepare),
            // alive for the call, which copies them.
            let r = unsafe { result::graph::add_kernel_node(this.graph, prev, &params) };
            let node = this.host.check_at(r, generation)?;
            let mut args = Vec::new();
            encode(l.args, &mut args);
            this.nodes.push(Node {
                raw: node,
                func: l.kernel.raw(),
                cfg: l.cfg,
                args,
                buffers: buffer_args(l.args).map(DeviceBuffer::downgrade).collect(),
            });
            prev = Some(node);
        }
        // SAFETY: the graph is complete and live in the bound context; Drop destroys the
        // executable graph once.
        let r = unsafe { result::graph::instantiate(this.graph) };
        this.exec = this
            .host
            .check_at(r, generation)
            .map_err(|e| with_kernel(e, first.kernel))?;
        Ok(this)
    }

    /// Launches in the graph.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Never true: a graph has at least one launch.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// The context generation the graph was built in.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// True when `launches` have this graph's shape: the same kernels with the same grids,
    /// blocks and shared memory, in the same order (arguments may differ).
    pub fn fits(&self, launches: &[GraphLaunch<'_>]) -> bool {
        self.fits_shapes(launches.iter().map(|l| (l.kernel, l.cfg)))
    }

    /// [`KernelGraph::fits`] for launches given by their kernels and geometries alone (a caller
    /// that looks for its graph before it lays out any arguments).
    pub fn fits_shapes<'k>(
        &self,
        shapes: impl ExactSizeIterator<Item = (&'k Kernel, LaunchConfig)>,
    ) -> bool {
        shapes.len() == self.nodes.len()
            && shapes
                .zip(&self.nodes)
                .all(|((k, cfg), n)| k.raw() == n.func && cfg == n.cfg)
    }
}

/// A driver refusal of a graph names no kernel; say which graph it was.
fn with_kernel(e: Error, first: &Kernel) -> Error {
    match e {
        Error::Driver { call, code, name } => Error::Driver {
            call,
            code,
            name: format!("{name} (a graph starting with kernel '{}')", first.name()),
        },
        e => e,
    }
}

impl Stream {
    /// Replays `graph` on this stream with `launches` (which must [fit](KernelGraph::fits) it)
    /// and returns one Completion per launch, as that many [`Stream::launch`] calls would.
    /// Every launch is checked first, as `launch` checks it; then the nodes whose arguments
    /// changed since the graph's last replay are updated, and the graph is launched once.
    pub fn launch_graph(
        &self,
        graph: &mut KernelGraph,
        launches: &[GraphLaunch<'_>],
    ) -> Result<Vec<Completion>> {
        self.replay(graph, launches, None, &mut Kept::new())?;
        Ok(launches
            .iter()
            .map(|l| self.issued(l.kernel, l.args))
            .collect())
    }

    /// Replays `graph` on this stream with `launches` (which must [fit](KernelGraph::fits) it)
    /// and returns ONE Completion for the whole replay (its launches end together: they are one
    /// graph launch on this stream), counting `launches.len()` launches in the host's stats.
    ///
    /// `unchanged[i]` says that launch `i` is the one node `i` ran at the graph's last replay
    /// (or was built with): the same arguments. Those launches are neither checked, packed nor
    /// compared — their `args` are not read, so a caller may leave them empty —: their nodes
    /// replay the arguments they hold, which were checked when they got them, as long as every
    /// buffer those point into is alive (the graph holds them weakly: see the module header).
    /// A flagged launch whose node's buffers were freed is checked and its node re-set like an
    /// unflagged one if its `args` are given, and refused with [`Error::InvalidLaunch`] if they
    /// are empty. Every other launch is checked exactly as [`Stream::launch_graph`] checks it,
    /// and its node updated if its arguments differ. The shape, device and context generation
    /// are checked for the whole graph, as there. The Completion keeps every buffer the replay
    /// runs alive until it has run.
    pub fn replay_graph(
        &self,
        graph: &mut KernelGraph,
        launches: &[GraphLaunch<'_>],
        unchanged: &[bool],
    ) -> Result<Completion> {
        if unchanged.len() != launches.len() {
            return Err(invalid_replay(
                launches,
                format!(
                    "{} launches given with {} unchanged-flags; give one flag per launch",
                    launches.len(),
                    unchanged.len()
                ),
            ));
        }
        let mut kept = Kept::new();
        self.replay(graph, launches, Some(unchanged), &mut kept)?;
        Ok(self.issued_graph(&graph.holds, kept.drain(..), launches.len()))
    }

    /// Checks `launches` against `graph` (all of them, or those not flagged `unchanged` whose
    /// nodes' buffers are all alive), updates the nodes whose arguments changed and launches the
    /// graph once. With `unchanged`, puts a handle on every buffer the replay runs in `kept`
    /// (without, none: the caller keeps each launch's arguments).
    fn replay(
        &self,
        graph: &mut KernelGraph,
        launches: &[GraphLaunch<'_>],
        unchanged: Option<&[bool]>,
        kept: &mut Kept,
    ) -> Result<()> {
        if !Arc::ptr_eq(&graph.host, self.host()) {
            return Err(Error::DeviceMismatch {
                what: "kernel graph",
                expected: self.host().ordinal(),
                found: graph.host.ordinal(),
            });
        }
        if !graph.fits(launches) {
            return Err(invalid_replay(
                launches,
                format!(
                    "these {} launches do not have the shape of the graph's {} (kernels, grids, blocks and shared memory, in order); build a graph for them",
                    launches.len(),
                    graph.len()
                ),
            ));
        }
        let skip = |i: usize| unchanged.is_some_and(|u| u[i]);
        // Every launch that may have changed is checked before anything reaches the driver.
        let mut packed = Vec::new();
        for (i, l) in launches.iter().enumerate() {
            // A node replays what it holds only with every buffer of it held until it ran.
            if skip(i) && graph.nodes[i].keep_alive(kept) {
                debug_assert!(
                    l.args.is_empty() || {
                        let mut bytes = Vec::new();
                        encode(l.args, &mut bytes);
                        bytes == graph.nodes[i].args
                    },
                    "launch {i} flagged unchanged has other arguments than its node"
                );
                continue;
            }
            if skip(i) && l.args.is_empty() {
                return Err(Error::InvalidLaunch {
                    kernel: l.kernel.name().to_string(),
                    reason: format!(
                        "launch {i} of the graph was flagged unchanged, but a buffer its node last ran with was freed; give its arguments or flag it changed"
                    ),
                });
            }
            packed.push((i, self.prepare(l.kernel, l.cfg, l.args)?));
            if unchanged.is_some() {
                for b in buffer_args(l.args) {
                    keep_once(kept, b);
                }
            }
        }
        let generation = self.host().enter_for(self.generation())?;
        if graph.generation != generation {
            return Err(Error::ContextLost { generation });
        }
        update_nodes(graph, launches, &mut packed, generation)?;
        // Every node now holds arguments whose buffers are alive, held by `kept` or by the
        // caller's launches (`prepare` and `keep_alive` noted them as used by a kernel, which
        // arena.rs zeroes on, before this driver call).
        // SAFETY: exec and stream belong to the bound current-generation context.
        let r = unsafe { result::graph::launch(graph.exec, self.raw()) };
        self.host().check_at(r, generation)
    }
}

/// A replay refused for `reason`, named after its first launch's kernel.
fn invalid_replay(launches: &[GraphLaunch<'_>], reason: String) -> Error {
    let kernel = launches.first().map_or("(none)", |l| l.kernel.name());
    Error::InvalidLaunch {
        kernel: kernel.to_string(),
        reason,
    }
}

/// Updates the nodes of `packed` (index, checked arguments) whose argument bytes differ from
/// what they hold, and the buffers each holds (weakly) to its launch's.
fn update_nodes(
    graph: &mut KernelGraph,
    launches: &[GraphLaunch<'_>],
    packed: &mut [(usize, PackedArgs)],
    generation: u64,
) -> Result<()> {
    let mut bytes = Vec::new();
    for (i, p) in packed {
        let (l, node) = (&launches[*i], &mut graph.nodes[*i]);
        encode(l.args, &mut bytes);
        if bytes != node.args {
            let params = node_params(node.func, &node.cfg, p);
            // SAFETY: exec and node belong to this graph, live in the bound current-generation
            // context; `params` holds one pointer per kernel parameter (checked by prepare),
            // alive for the call, which copies them. Launches already queued keep their own.
            let r = unsafe { result::graph::set_kernel_node_params(graph.exec, node.raw, &params) };
            graph.host.check_at(r, generation)?;
            // Only after the driver took them: on failure the node keeps its old arguments.
            std::mem::swap(&mut node.args, &mut bytes);
        } else if holds_buffers_of(&node.buffers, l.args) {
            continue;
        }
        // The same bytes into other buffers (one freed, another at its address): the driver
        // holds the right parameters already.
        node.buffers.clear();
        node.buffers
            .extend(buffer_args(l.args).map(DeviceBuffer::downgrade));
    }
    Ok(())
}

impl Drop for KernelGraph {
    fn drop(&mut self) {
        let (graph, exec, host) = (self.graph, self.exec, self.host.clone());
        self.host
            .release_in(self.generation, "destroy a kernel graph", || {
                if !exec.is_null() {
                    // SAFETY: exec was instantiated in this (bound, current) generation and is
                    // destroyed once; replays in flight finish first (the driver frees it after).
                    let r = unsafe { result::graph::destroy_exec(exec) };
                    if let Err(e) = host.check(r) {
                        host.drop_error("destroying a kernel graph's executable graph", &e);
                    }
                }
                // SAFETY: graph was created in this generation and is destroyed once, after the
                // executable graph made from it.
                let r = unsafe { result::graph::destroy(graph) };
                if let Err(e) = host.check(r) {
                    host.drop_error("destroying a kernel graph", &e);
                }
            });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encode_gives_each_argument_its_own_size_little_endian() {
        let mut out = vec![0xff; 3];
        encode(
            &[
                Arg::U16(0x0102),
                Arg::I8(-1),
                Arg::Bytes(&[7, 8]),
                Arg::F32(1.0),
            ],
            &mut out,
        );
        assert_eq!(out, [0x02, 0x01, 0xff, 7, 8, 0, 0, 0x80, 0x3f]);
    }
}
