//! CUDA graphs: a graph is nodes with dependencies (built by the `cuGraphAdd*Node` calls or by
//! stream capture), an executable graph is a snapshot of one in a dependency-respecting order,
//! and launching it queues its nodes on a stream in that order. Running the nodes one after the
//! other on one stream is one of the orders NVIDIA's driver may pick; it never runs a node before
//! its dependencies.
//!
//! Kernel nodes hold their parameters packed at launch-buffer offsets, so a parameter update
//! (`cuGraphExecKernelNodeSetParams`) replaces one buffer and later launches use it; launches
//! already queued keep the buffer they were queued with, as on NVIDIA's driver.
//!
//! A child-graph node owns a graph of its own (a clone of the one given, registered so
//! cuGraphChildGraphNodeGetGraph can hand it out and changes to it show in the node);
//! instantiation inlines it where the node stands in the order. A graph holding memory nodes
//! (see `graph_mem`) cannot be cloned, embedded as a child, or instantiated twice at once, and
//! an embedded graph takes no memory nodes: the restrictions cuGraphAddMemAllocNode documents.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use cudarc::driver::sys::CUresult;

use crate::abi::CuResult;
use crate::driver::Tag;
use crate::graph_copy::RawMemcpy3D;
use crate::graph_mem::GraphAlloc;
use crate::handles::Table;
use crate::launch::{self, Packed};

/// A node's work, replayed on a stream each launch.
pub(crate) type Replay = Arc<dyn Fn(u64) -> CuResult<()> + Send + Sync>;

/// What a node does.
#[derive(Clone)]
pub(crate) enum NodeKind {
    /// Nothing: orders its dependents after its dependencies.
    Empty,
    /// A kernel launch.
    Kernel(Packed),
    /// A captured fill, a host function or a stream memory operation, as a replay of the call
    /// on the launch stream; the `CUgraphNodeType` it reports.
    Call(Replay, u32),
    /// `cuEventRecord` of the event.
    EventRecord(u64),
    /// `cuStreamWaitEvent` on the event.
    EventWait(u64),
    /// A graph allocation: no work; the node keeps the memory.
    MemAlloc(Arc<GraphAlloc>),
    /// The free of a graph allocation: no work (the memory stays while any node holds it).
    MemFree(Arc<GraphAlloc>),
    /// A child graph: the handle of the graph the node owns.
    Child(u64),
    /// A copy (cuGraphAddMemcpyNode, or a captured cuMemcpy*Async), as its `CUDA_MEMCPY3D`.
    Memcpy(RawMemcpy3D),
}

/// `CUgraphNodeType` values.
pub(crate) const TYPE_KERNEL: u32 = 0;
pub(crate) const TYPE_MEMCPY: u32 = 1;
pub(crate) const TYPE_MEMSET: u32 = 2;
pub(crate) const TYPE_HOST: u32 = 3;
pub(crate) const TYPE_GRAPH: u32 = 4;
pub(crate) const TYPE_MEM_ALLOC: u32 = 10;
pub(crate) const TYPE_MEM_FREE: u32 = 11;
pub(crate) const TYPE_MEM_OP: u32 = 12;
pub(crate) const TYPE_EMPTY: u32 = 5;
pub(crate) const TYPE_WAIT_EVENT: u32 = 6;
pub(crate) const TYPE_EVENT_RECORD: u32 = 7;

impl NodeKind {
    pub(crate) fn type_code(&self) -> u32 {
        match self {
            NodeKind::Empty => TYPE_EMPTY,
            NodeKind::Kernel(_) => TYPE_KERNEL,
            NodeKind::Call(_, t) => *t,
            NodeKind::EventRecord(_) => TYPE_EVENT_RECORD,
            NodeKind::EventWait(_) => TYPE_WAIT_EVENT,
            NodeKind::MemAlloc(_) => TYPE_MEM_ALLOC,
            NodeKind::MemFree(_) => TYPE_MEM_FREE,
            NodeKind::Child(_) => TYPE_GRAPH,
            NodeKind::Memcpy(_) => TYPE_MEMCPY,
        }
    }

    fn is_memory(&self) -> bool {
        matches!(self, NodeKind::MemAlloc(_) | NodeKind::MemFree(_))
    }

    /// Queues the node's work on `stream` (child graphs were inlined at instantiation).
    fn run(&self, stream: u64) -> CuResult<()> {
        match self {
            NodeKind::Empty | NodeKind::MemAlloc(_) | NodeKind::MemFree(_) | NodeKind::Child(_) => {
                Ok(())
            }
            NodeKind::Memcpy(m) => crate::graph_copy::run(m, Some(stream)),
            NodeKind::Kernel(p) => launch::enqueue(p.clone(), stream),
            NodeKind::Call(f, _) => f(stream),
            NodeKind::EventRecord(e) => crate::event::record(*e, stream),
            NodeKind::EventWait(e) => crate::event::stream_wait(stream, *e, 0),
        }
    }
}

/// One node of a graph.
#[derive(Clone)]
struct Node {
    handle: u64,
    kind: NodeKind,
    deps: Vec<u64>,
}

/// A graph: its nodes in creation order.
#[derive(Default)]
pub(crate) struct Graph {
    nodes: Mutex<Vec<Node>>,
    /// Owned by a child-graph node: memory nodes cannot be added.
    embedded: bool,
    /// Set while an executable graph made from it lives, when it holds memory nodes.
    instantiated: Arc<AtomicBool>,
}

fn has_memory_nodes(nodes: &[Node]) -> bool {
    nodes.iter().any(|n| n.kind.is_memory())
}

/// Held by the one executable graph of a graph with memory nodes; lets the next one be made
/// when it goes.
struct Instance(Arc<AtomicBool>);

impl Drop for Instance {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

/// Which graph a node handle belongs to.
struct Owner {
    graph: u64,
}

/// An executable graph: its nodes in launch order, each with the handle of the graph node it
/// came from (parameter updates name that node).
pub(crate) struct Exec {
    nodes: Mutex<Vec<Node>>,
    /// Each child-graph node inlined (nested ones too): its graph's nodes in creation order,
    /// as instantiated (cuGraphExecChildGraphNodeSetParams matches a new graph against them).
    children: HashMap<u64, Vec<Node>>,
    _instance: Option<Instance>,
}

static GRAPHS: Table<Graph> = Table::new(Tag::Graph);
static NODES: Table<Owner> = Table::new(Tag::GraphNode);
static EXECS: Table<Exec> = Table::new(Tag::GraphExec);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every critical section is a push, a scan or an assignment; a panic cannot tear them.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn graph(handle: u64) -> CuResult<Arc<Graph>> {
    crate::driver::ensure_init()?;
    GRAPHS.get(handle).ok_or(CUresult::CUDA_ERROR_INVALID_VALUE)
}

fn exec(handle: u64) -> CuResult<Arc<Exec>> {
    crate::driver::ensure_init()?;
    EXECS.get(handle).ok_or(CUresult::CUDA_ERROR_INVALID_VALUE)
}

/// cuGraphCreate: an empty graph (`flags` must be 0).
pub(crate) fn create(flags: u32) -> CuResult<u64> {
    crate::driver::ensure_init()?;
    if flags != 0 {
        return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
    }
    Ok(GRAPHS.insert_with(|_| Arc::new(Graph::default())).0)
}

/// cuGraphDestroy: the graph and its nodes (executable graphs made from it live on).
pub(crate) fn destroy(handle: u64) -> CuResult<()> {
    crate::driver::ensure_init()?;
    let g = GRAPHS
        .remove(handle)
        .ok_or(CUresult::CUDA_ERROR_INVALID_VALUE)?;
    forget(&g);
    Ok(())
}

/// Unregisters a removed graph's nodes and the child graphs they own.
fn forget(g: &Graph) {
    for n in lock(&g.nodes).iter() {
        NODES.remove(n.handle);
        if let NodeKind::Child(child) = n.kind
            && let Some(c) = GRAPHS.remove(child)
        {
            forget(&c);
        }
    }
}

/// Adds a node after `deps` (nodes of the same graph, no repeats); returns its handle.
pub(crate) fn add_node(graph_handle: u64, deps: &[u64], kind: NodeKind) -> CuResult<u64> {
    let g = graph(graph_handle)?;
    if g.embedded && kind.is_memory() {
        // cuGraphChildGraphNodeGetGraph: such nodes "cannot be added to the returned graph".
        // NVIDIA's driver 580 answers NOT_SUPPORTED.
        return Err(CUresult::CUDA_ERROR_NOT_SUPPORTED);
    }
    let mut nodes = lock(&g.nodes);
    for (i, d) in deps.iter().enumerate() {
        if !nodes.iter().any(|n| n.handle == *d) || deps[..i].contains(d) {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        }
    }
    let (handle, _) = NODES.insert_with(|_| {
        Arc::new(Owner {
            graph: graph_handle,
        })
    });
    nodes.push(Node {
        handle,
        kind,
        deps: deps.to_vec(),
    });
    Ok(handle)
}

/// The graph holding `node` and the node's index in it.
fn locate(node: u64) -> CuResult<(Arc<Graph>, u64)> {
    crate::driver::ensure_init()?;
    let owner = NODES.get(node).ok_or(CUresult::CUDA_ERROR_INVALID_VALUE)?;
    Ok((graph(owner.graph)?, owner.graph))
}

/// cuGraphNodeGetType.
pub(crate) fn node_type(node: u64) -> CuResult<u32> {
    kind_of(node).map(|k| k.type_code())
}

/// What a node does (for the `cuGraph*NodeGetParams` calls).
pub(crate) fn kind_of(node: u64) -> CuResult<NodeKind> {
    let (g, _) = locate(node)?;
    let nodes = lock(&g.nodes);
    let n = nodes.iter().find(|n| n.handle == node);
    n.map(|n| n.kind.clone())
        .ok_or(CUresult::CUDA_ERROR_INVALID_VALUE)
}

/// cuGraphGetNodes: the node handles in creation order.
pub(crate) fn nodes(graph_handle: u64) -> CuResult<Vec<u64>> {
    let g = graph(graph_handle)?;
    Ok(lock(&g.nodes).iter().map(|n| n.handle).collect())
}

/// cuGraphAddDependencies: `from[i]` before `to[i]`; an edge already there, a node of another
/// graph or a cycle is `CUDA_ERROR_INVALID_VALUE`, and then no edge is added.
pub(crate) fn add_dependencies(graph_handle: u64, from: &[u64], to: &[u64]) -> CuResult<()> {
    let g = graph(graph_handle)?;
    let mut nodes = lock(&g.nodes);
    let mut next = nodes.clone();
    for (&a, &b) in from.iter().zip(to) {
        let known = |h| next.iter().any(|n: &Node| n.handle == h);
        if a == b || !known(a) || !known(b) {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        }
        let target = next
            .iter_mut()
            .find(|n| n.handle == b)
            .ok_or(CUresult::CUDA_ERROR_INVALID_VALUE)?;
        if target.deps.contains(&a) {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        }
        target.deps.push(a);
    }
    order(&next).ok_or(CUresult::CUDA_ERROR_INVALID_VALUE)?;
    *nodes = next;
    Ok(())
}

/// Whether node removal and edge removal are refused: cuGraphDestroyNode and
/// cuGraphRemoveDependencies document that a graph holding allocation or free nodes cannot be
/// edited so (the error is not named; softcuda answers NOT_SUPPORTED, as NVIDIA's driver 580
/// does for the other memory-node restrictions). Keeps `graph_mem`'s pairing of each free
/// node with its allocation intact.
fn check_editable(nodes: &[Node]) -> CuResult<()> {
    if has_memory_nodes(nodes) {
        return Err(CUresult::CUDA_ERROR_NOT_SUPPORTED);
    }
    Ok(())
}

/// cuGraphDestroyNode: removes the node and every edge to or from it; a child-graph node's
/// graph goes with it.
pub(crate) fn destroy_node(node: u64) -> CuResult<()> {
    let (g, _) = locate(node)?;
    let mut nodes = lock(&g.nodes);
    check_editable(&nodes)?;
    let at = nodes
        .iter()
        .position(|n| n.handle == node)
        .ok_or(CUresult::CUDA_ERROR_INVALID_VALUE)?;
    let gone = nodes.remove(at);
    for n in nodes.iter_mut() {
        n.deps.retain(|d| *d != node);
    }
    drop(nodes);
    NODES.remove(node);
    if let NodeKind::Child(child) = gone.kind
        && let Some(c) = GRAPHS.remove(child)
    {
        forget(&c);
    }
    Ok(())
}

/// cuGraphRemoveDependencies: removes the edges `from[i]` → `to[i]`; an edge that is not there
/// (or a node of another graph) is `CUDA_ERROR_INVALID_VALUE`, and then no edge is removed.
pub(crate) fn remove_dependencies(graph_handle: u64, from: &[u64], to: &[u64]) -> CuResult<()> {
    let g = graph(graph_handle)?;
    let mut nodes = lock(&g.nodes);
    if from.is_empty() {
        return Ok(());
    }
    check_editable(&nodes)?;
    let mut next = nodes.clone();
    for (&a, &b) in from.iter().zip(to) {
        let target = next
            .iter_mut()
            .find(|n| n.handle == b)
            .ok_or(CUresult::CUDA_ERROR_INVALID_VALUE)?;
        let at = target
            .deps
            .iter()
            .position(|d| *d == a)
            .ok_or(CUresult::CUDA_ERROR_INVALID_VALUE)?;
        target.deps.remove(at);
    }
    *nodes = next;
    Ok(())
}

/// cuGraphNodeGetDependencies: the nodes `node` depends on, in the order the edges were made.
pub(crate) fn dependencies(node: u64) -> CuResult<Vec<u64>> {
    let (g, _) = locate(node)?;
    let nodes = lock(&g.nodes);
    nodes
        .iter()
        .find(|n| n.handle == node)
        .map(|n| n.deps.clone())
        .ok_or(CUresult::CUDA_ERROR_INVALID_VALUE)
}

/// cuGraphNodeGetDependentNodes: the nodes that depend on `node`, in creation order.
pub(crate) fn dependents(node: u64) -> CuResult<Vec<u64>> {
    let (g, _) = locate(node)?;
    let nodes = lock(&g.nodes);
    Ok(nodes
        .iter()
        .filter(|n| n.deps.contains(&node))
        .map(|n| n.handle)
        .collect())
}

/// cuGraphGetEdges: every edge as (from, to), by the dependent's creation order.
pub(crate) fn edges(graph_handle: u64) -> CuResult<Vec<(u64, u64)>> {
    let g = graph(graph_handle)?;
    let nodes = lock(&g.nodes);
    Ok(nodes
        .iter()
        .flat_map(|n| n.deps.iter().map(|d| (*d, n.handle)))
        .collect())
}

/// cuGraphKernelNodeSetParams, cuGraphMemcpyNodeSetParams: replaces what a node does by work of
/// the same node type.
pub(crate) fn set_params(node: u64, kind: NodeKind) -> CuResult<()> {
    let (g, _) = locate(node)?;
    let mut nodes = lock(&g.nodes);
    match nodes.iter_mut().find(|n| n.handle == node) {
        Some(n) if n.kind.type_code() == kind.type_code() => {
            n.kind = kind;
            Ok(())
        }
        _ => Err(CUresult::CUDA_ERROR_INVALID_VALUE),
    }
}

/// The nodes in an order where every node follows its dependencies (Kahn's algorithm, ties by
/// creation order); `None` for a cycle.
fn order(nodes: &[Node]) -> Option<Vec<Node>> {
    let mut placed: Vec<bool> = vec![false; nodes.len()];
    let mut out: Vec<Node> = Vec::with_capacity(nodes.len());
    while out.len() < nodes.len() {
        let ready = (0..nodes.len()).find(|&i| {
            !placed[i]
                && nodes[i]
                    .deps
                    .iter()
                    .all(|d| out.iter().any(|n| n.handle == *d))
        })?;
        placed[ready] = true;
        out.push(nodes[ready].clone());
    }
    Some(out)
}

/// cuGraphInstantiate(WithFlags): a snapshot of the graph in launch order.
pub(crate) fn instantiate(graph_handle: u64, flags: u64) -> CuResult<u64> {
    // AUTO_FREE_ON_LAUNCH (1), UPLOAD (2), DEVICE_LAUNCH (4), USE_NODE_PRIORITY (8).
    if flags & !0xf != 0 {
        return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
    }
    if flags & 0x4 != 0 {
        // Device-side graph launch needs a device runtime softcuda does not have.
        return Err(CUresult::CUDA_ERROR_NOT_SUPPORTED);
    }
    let g = graph(graph_handle)?;
    let nodes = lock(&g.nodes).clone();
    let mut flat = Vec::with_capacity(nodes.len());
    let mut children = HashMap::new();
    inline(
        order(&nodes).ok_or(CUresult::CUDA_ERROR_INVALID_VALUE)?,
        &mut flat,
        &mut children,
    )?;
    let instance = if has_memory_nodes(&nodes) {
        // "Only one instantiation of the graph may exist at any point in time." The code for
        // the second is not documented; NVIDIA's driver 580 answers NOT_SUPPORTED (H200).
        if g.instantiated.swap(true, Ordering::AcqRel) {
            return Err(CUresult::CUDA_ERROR_NOT_SUPPORTED);
        }
        Some(Instance(Arc::clone(&g.instantiated)))
    } else {
        None
    };
    Ok(EXECS
        .insert_with(|_| {
            Arc::new(Exec {
                nodes: Mutex::new(flat),
                children,
                _instance: instance,
            })
        })
        .0)
}

/// Appends `ordered` to `out`, each child-graph node replaced by its graph's nodes in order
/// (and recorded in `children`).
fn inline(
    ordered: Vec<Node>,
    out: &mut Vec<Node>,
    children: &mut HashMap<u64, Vec<Node>>,
) -> CuResult<()> {
    for n in ordered {
        match n.kind {
            NodeKind::Child(child) => {
                let c = graph(child)?;
                let nodes = lock(&c.nodes).clone();
                inline(
                    order(&nodes).ok_or(CUresult::CUDA_ERROR_INVALID_VALUE)?,
                    out,
                    children,
                )?;
                children.insert(n.handle, nodes);
            }
            _ => out.push(n),
        }
    }
    Ok(())
}

/// A copy of `nodes` as a new registered graph (new node handles, same edges; child graphs
/// copied too); `embedded` when a child-graph node owns it.
fn copy_graph(nodes: &[Node], embedded: bool) -> CuResult<u64> {
    let renamed: HashMap<u64, u64> = nodes
        .iter()
        .map(|n| (n.handle, new_node_handle()))
        .collect();
    let rename = |h: &u64| {
        renamed
            .get(h)
            .copied()
            .ok_or(CUresult::CUDA_ERROR_INVALID_VALUE)
    };
    let mut copies = Vec::with_capacity(nodes.len());
    for n in nodes {
        let kind = match &n.kind {
            NodeKind::Child(child) => {
                let c = graph(*child)?;
                let inner = lock(&c.nodes).clone();
                NodeKind::Child(copy_graph(&inner, true)?)
            }
            k => k.clone(),
        };
        let deps = n.deps.iter().map(rename).collect::<CuResult<Vec<u64>>>()?;
        copies.push((rename(&n.handle)?, kind, deps));
    }
    Ok(register(copies, embedded))
}

/// cuGraphClone: a copy of the graph; one with memory nodes cannot be cloned (the code is not
/// documented; NVIDIA's driver 580 answers NOT_SUPPORTED).
pub(crate) fn clone_graph(graph_handle: u64) -> CuResult<u64> {
    let g = graph(graph_handle)?;
    let nodes = lock(&g.nodes).clone();
    if has_memory_nodes(&nodes) {
        return Err(CUresult::CUDA_ERROR_NOT_SUPPORTED);
    }
    copy_graph(&nodes, false)
}

/// cuGraphAddChildGraphNode: a node owning a clone of graph `child`, after `deps` in
/// `graph_handle`. A child with memory nodes is `CUDA_ERROR_NOT_SUPPORTED`, as NVIDIA's driver
/// 580 answers (the call documents only INVALID_VALUE).
pub(crate) fn add_child(graph_handle: u64, deps: &[u64], child: u64) -> CuResult<u64> {
    graph(graph_handle)?;
    let c = graph(child)?;
    let nodes = lock(&c.nodes).clone();
    if has_memory_nodes(&nodes) {
        return Err(CUresult::CUDA_ERROR_NOT_SUPPORTED);
    }
    let copy = copy_graph(&nodes, true)?;
    add_node(graph_handle, deps, NodeKind::Child(copy)).inspect_err(|_| {
        if let Some(g) = GRAPHS.remove(copy) {
            forget(&g);
        }
    })
}

/// cuGraphChildGraphNodeGetGraph: the graph a child-graph node owns.
pub(crate) fn child_graph(node: u64) -> CuResult<u64> {
    match kind_of(node)? {
        NodeKind::Child(child) => Ok(child),
        _ => Err(CUresult::CUDA_ERROR_INVALID_VALUE),
    }
}

/// cuGraphExecDestroy.
pub(crate) fn exec_destroy(handle: u64) -> CuResult<()> {
    crate::driver::ensure_init()?;
    EXECS
        .remove(handle)
        .map(drop)
        .ok_or(CUresult::CUDA_ERROR_INVALID_VALUE)
}

/// cuGraphLaunch: queues every node on `stream` in launch order.
pub(crate) fn launch(handle: u64, stream: u64) -> CuResult<()> {
    let e = exec(handle)?;
    crate::stream::resolve(stream)?;
    let nodes = lock(&e.nodes).clone();
    for n in &nodes {
        n.kind.run(stream)?;
    }
    Ok(())
}

/// cuGraphUpload: nothing to copy to a CPU device; checks the handles.
pub(crate) fn upload(handle: u64, stream: u64) -> CuResult<()> {
    exec(handle)?;
    crate::stream::resolve(stream).map(drop)
}

/// cuGraphExecKernelNodeSetParams: later launches of the executable graph use `packed` for the
/// node made from graph node `node`; the kernel must stay in the same context.
pub(crate) fn exec_set_kernel_params(handle: u64, node: u64, packed: Packed) -> CuResult<()> {
    let e = exec(handle)?;
    let mut nodes = lock(&e.nodes);
    let Some(n) = nodes.iter_mut().find(|n| n.handle == node) else {
        return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
    };
    let NodeKind::Kernel(old) = &n.kind else {
        return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
    };
    same_context(old, &packed)?;
    n.kind = NodeKind::Kernel(packed);
    Ok(())
}

/// An executable graph's kernel may change its launch but not its context.
fn same_context(old: &Packed, new: &Packed) -> CuResult<()> {
    let ctx_of = |f| crate::module::get_function(f).map(|f| f.module.ctx_id);
    if ctx_of(old.function)? != ctx_of(new.function)? {
        return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
    }
    Ok(())
}

/// cuGraphExecChildGraphNodeSetParams: later launches of the executable graph run the nodes
/// made from child-graph node `node` with the work of graph `child`'s nodes. `child` must have
/// the node's graph's shape: as many nodes, in the same creation order, of the same types,
/// with the same edges (by position), recursively through nested child graphs; anything else
/// is `CUDA_ERROR_INVALID_VALUE`, the one code cuda.h names, and nothing changes.
pub(crate) fn exec_set_child(handle: u64, node: u64, child: u64) -> CuResult<()> {
    let e = exec(handle)?;
    let new = lock(&graph(child)?.nodes).clone();
    let mut updates = Vec::new();
    match_child(&e.children, node, &new, &mut updates)?;
    let mut nodes = lock(&e.nodes);
    for (h, kind) in &updates {
        match (nodes.iter().find(|n| n.handle == *h).map(|n| &n.kind), kind) {
            (Some(NodeKind::Kernel(old)), NodeKind::Kernel(new)) => same_context(old, new)?,
            (Some(_), _) => {}
            (None, _) => return Err(CUresult::CUDA_ERROR_INVALID_VALUE),
        }
    }
    for (h, kind) in updates {
        if let Some(n) = nodes.iter_mut().find(|n| n.handle == h) {
            n.kind = kind;
        }
    }
    Ok(())
}

/// Pairs the instantiated nodes of child-graph node `node` with `new`'s nodes (see
/// [`exec_set_child`]), collecting (instantiated node, new work).
fn match_child(
    children: &HashMap<u64, Vec<Node>>,
    node: u64,
    new: &[Node],
    out: &mut Vec<(u64, NodeKind)>,
) -> CuResult<()> {
    let old = children
        .get(&node)
        .ok_or(CUresult::CUDA_ERROR_INVALID_VALUE)?;
    if old.len() != new.len() {
        return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
    }
    let positions = |list: &[Node], deps: &[u64]| {
        let mut at: Vec<Option<usize>> = deps
            .iter()
            .map(|d| list.iter().position(|n| n.handle == *d))
            .collect();
        at.sort_unstable();
        at
    };
    for (o, n) in old.iter().zip(new) {
        if o.kind.type_code() != n.kind.type_code()
            || positions(old, &o.deps) != positions(new, &n.deps)
        {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        }
        match &n.kind {
            NodeKind::Child(g) => {
                let inner = lock(&graph(*g)?.nodes).clone();
                match_child(children, o.handle, &inner, out)?;
            }
            k => out.push((o.handle, k.clone())),
        }
    }
    Ok(())
}

/// cuGraphExecMemcpyNodeSetParams: later launches of the executable graph copy as `copy` says
/// for the node made from graph node `node`; the node's copy and the new one must both be
/// one-dimensional (cuda.h's rule).
pub(crate) fn exec_set_memcpy(handle: u64, node: u64, copy: RawMemcpy3D) -> CuResult<()> {
    let e = exec(handle)?;
    let mut nodes = lock(&e.nodes);
    match nodes.iter_mut().find(|n| n.handle == node) {
        Some(n) if matches!(&n.kind, NodeKind::Memcpy(old) if old.is_1d()) && copy.is_1d() => {
            n.kind = NodeKind::Memcpy(copy);
            Ok(())
        }
        _ => Err(CUresult::CUDA_ERROR_INVALID_VALUE),
    }
}

/// A graph made by stream capture or copied: registered, its handle returned; `embedded` when
/// a child-graph node owns it.
pub(crate) fn register(nodes: Vec<(u64, NodeKind, Vec<u64>)>, embedded: bool) -> u64 {
    let (handle, g) = GRAPHS.insert_with(|_| {
        Arc::new(Graph {
            embedded,
            ..Graph::default()
        })
    });
    let mut list = lock(&g.nodes);
    for (node, kind, deps) in nodes {
        NODES.insert_at(node, Arc::new(Owner { graph: handle }));
        list.push(Node {
            handle: node,
            kind,
            deps,
        });
    }
    drop(list);
    handle
}

/// A fresh node handle for a node of a copied graph (registered with it by [`register`]).
pub(crate) fn new_node_handle() -> u64 {
    crate::driver::new_handle(Tag::GraphNode)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(handle: u64, deps: &[u64]) -> Node {
        Node {
            handle,
            kind: NodeKind::Empty,
            deps: deps.to_vec(),
        }
    }

    #[test]
    fn a_copied_graph_keeps_its_edges_between_new_node_handles() {
        crate::driver::init(0).unwrap();
        let g = create(0).unwrap();
        let last = add_node(g, &[], NodeKind::Empty).unwrap();
        let first = add_node(g, &[], NodeKind::Empty).unwrap();
        add_dependencies(g, &[first], &[last]).unwrap();
        let copy = clone_graph(g).unwrap();
        let copied = nodes(copy).unwrap();
        assert!(copied.iter().all(|h| *h != first && *h != last));
        let inner = lock(&graph(copy).unwrap().nodes).clone();
        let ordered: Vec<u64> = order(&inner).unwrap().iter().map(|n| n.handle).collect();
        assert_eq!(ordered, [copied[1], copied[0]]);
        destroy(copy).unwrap();
        destroy(g).unwrap();
        assert_eq!(
            node_type(copied[0]),
            Err(CUresult::CUDA_ERROR_INVALID_VALUE)
        );
    }

    #[test]
    fn a_destroyed_node_handle_and_its_child_graph_are_unknown_afterwards() {
        crate::driver::init(0).unwrap();
        let inner = create(0).unwrap();
        add_node(inner, &[], NodeKind::Empty).unwrap();
        let g = create(0).unwrap();
        let first = add_node(g, &[], NodeKind::Empty).unwrap();
        let child = add_child(g, &[first], inner).unwrap();
        let owned = child_graph(child).unwrap();
        let last = add_node(g, &[child], NodeKind::Empty).unwrap();
        destroy_node(child).unwrap();
        assert_eq!(node_type(child), Err(CUresult::CUDA_ERROR_INVALID_VALUE));
        assert_eq!(destroy_node(child), Err(CUresult::CUDA_ERROR_INVALID_VALUE));
        assert_eq!(nodes(owned), Err(CUresult::CUDA_ERROR_INVALID_VALUE));
        assert_eq!(dependencies(last).unwrap(), Vec::<u64>::new());
        assert_eq!(dependents(first).unwrap(), Vec::<u64>::new());
        destroy(g).unwrap();
        destroy(inner).unwrap();
    }

    #[test]
    fn order_puts_every_node_after_its_dependencies_and_refuses_cycles() {
        let nodes = [node(1, &[3]), node(2, &[]), node(3, &[2])];
        let order: Vec<u64> = order(&nodes).unwrap().iter().map(|n| n.handle).collect();
        assert_eq!(order, [2, 3, 1]);
        assert!(super::order(&[node(1, &[2]), node(2, &[1])]).is_none());
    }
}
