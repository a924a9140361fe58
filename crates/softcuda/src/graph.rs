//! CUDA graphs: a graph is nodes with dependencies (built by the `cuGraphAdd*Node` calls or by
//! stream capture), an executable graph is a snapshot of one in a dependency-respecting order,
//! and launching it queues its nodes on a stream in that order. Running the nodes one after the
//! other on one stream is one of the orders NVIDIA's driver may pick; it never runs a node before
//! its dependencies.
//!
//! Kernel nodes hold their parameters packed at launch-buffer offsets, so a parameter update
//! (`cuGraphExecKernelNodeSetParams`) replaces one buffer and later launches use it; launches
//! already queued keep the buffer they were queued with, as on NVIDIA's driver.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use cudarc::driver::sys::CUresult;

use crate::abi::CuResult;
use crate::driver::Tag;
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
    /// A copy, fill, host function, stream memory operation or graph memory node, as a replay
    /// of the call on the launch stream; the `CUgraphNodeType` it reports.
    Call(Replay, u32),
    /// `cuEventRecord` of the event.
    EventRecord(u64),
    /// `cuStreamWaitEvent` on the event.
    EventWait(u64),
}

/// `CUgraphNodeType` values.
pub(crate) const TYPE_KERNEL: u32 = 0;
pub(crate) const TYPE_MEMCPY: u32 = 1;
pub(crate) const TYPE_MEMSET: u32 = 2;
pub(crate) const TYPE_HOST: u32 = 3;
pub(crate) const TYPE_MEM_ALLOC: u32 = 10;
pub(crate) const TYPE_MEM_FREE: u32 = 11;
pub(crate) const TYPE_MEM_OP: u32 = 12;
const TYPE_EMPTY: u32 = 5;
const TYPE_WAIT_EVENT: u32 = 6;
const TYPE_EVENT_RECORD: u32 = 7;

impl NodeKind {
    fn type_code(&self) -> u32 {
        match self {
            NodeKind::Empty => TYPE_EMPTY,
            NodeKind::Kernel(_) => TYPE_KERNEL,
            NodeKind::Call(_, t) => *t,
            NodeKind::EventRecord(_) => TYPE_EVENT_RECORD,
            NodeKind::EventWait(_) => TYPE_WAIT_EVENT,
        }
    }

    /// Queues the node's work on `stream`.
    fn run(&self, stream: u64) -> CuResult<()> {
        match self {
            NodeKind::Empty => Ok(()),
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
}

/// Which graph a node handle belongs to.
struct Owner {
    graph: u64,
}

/// An executable graph: its nodes in launch order, each with the handle of the graph node it
/// came from (parameter updates name that node).
pub(crate) struct Exec {
    nodes: Mutex<Vec<Node>>,
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
    for n in lock(&g.nodes).iter() {
        NODES.remove(n.handle);
    }
    Ok(())
}

/// Adds a node after `deps` (nodes of the same graph, no repeats); returns its handle.
pub(crate) fn add_node(graph_handle: u64, deps: &[u64], kind: NodeKind) -> CuResult<u64> {
    let g = graph(graph_handle)?;
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
    let (g, _) = locate(node)?;
    let nodes = lock(&g.nodes);
    let n = nodes.iter().find(|n| n.handle == node);
    n.map(|n| n.kind.type_code())
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

/// cuGraphKernelNodeSetParams: replaces a kernel node's launch in the graph.
pub(crate) fn set_kernel_params(node: u64, packed: Packed) -> CuResult<()> {
    let (g, _) = locate(node)?;
    let mut nodes = lock(&g.nodes);
    match nodes.iter_mut().find(|n| n.handle == node) {
        Some(Node {
            kind: kind @ NodeKind::Kernel(_),
            ..
        }) => {
            *kind = NodeKind::Kernel(packed);
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
    let ordered = order(&lock(&g.nodes)).ok_or(CUresult::CUDA_ERROR_INVALID_VALUE)?;
    Ok(EXECS
        .insert_with(|_| {
            Arc::new(Exec {
                nodes: Mutex::new(ordered),
            })
        })
        .0)
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
    let ctx_of = |f| crate::module::get_function(f).map(|f| f.module.ctx_id);
    if ctx_of(old.function)? != ctx_of(packed.function)? {
        return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
    }
    n.kind = NodeKind::Kernel(packed);
    Ok(())
}

/// A graph made by stream capture: registered, its handle returned.
pub(crate) fn register(nodes: Vec<(u64, NodeKind, Vec<u64>)>) -> u64 {
    let (handle, g) = GRAPHS.insert_with(|_| Arc::new(Graph::default()));
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

/// A fresh node handle for a node stream capture is building (registered with its graph at
/// the end of the capture).
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
    fn order_puts_every_node_after_its_dependencies_and_refuses_cycles() {
        let nodes = [node(1, &[3]), node(2, &[]), node(3, &[2])];
        let order: Vec<u64> = order(&nodes).unwrap().iter().map(|n| n.handle).collect();
        assert_eq!(order, [2, 3, 1]);
        assert!(super::order(&[node(1, &[2]), node(2, &[1])]).is_none());
    }
}
