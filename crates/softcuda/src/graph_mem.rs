//! Graph memory: mem-alloc nodes (`CUgraphNodeType` 10) and mem-free nodes (11), made by stream
//! capture (cuMemAllocAsync / cuMemFreeAsync on a capturing stream) or by hand
//! (cuGraphAddMemAllocNode / cuGraphAddMemFreeNode), and the device's graph-memory figures
//! (cuDeviceGet/SetGraphMemAttribute, cuDeviceGraphMemTrim).
//!
//! NVIDIA's driver fixes the allocation's address when the node is made and backs it with
//! memory whenever a launch of the graph is between the two nodes. softcuda allocates the
//! memory when the node is made (so the address is fixed from then on) and keeps it while any
//! graph or executable graph holding a node of it lives; the nodes themselves do no work. The
//! memory counts in cuMemGetInfo as NVIDIA's graph memory does, not in any pool's attributes.
//! softcuda caches nothing for graphs: reserved graph memory is exactly the memory graph
//! allocations hold, and a trim has nothing to give back.
//!
//! A free node must name a graph allocation not yet freed in a graph: anything else is
//! `CUDA_ERROR_INVALID_VALUE`, as cuGraphAddMemFreeNode and cuMemFreeAsync (in capture) document.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};

use cudarc::driver::sys::CUresult;

use crate::abi::CuResult;
use crate::capture::Capture;
use crate::context::Context;
use crate::driver::MAX_DEVICES;
use crate::graph::NodeKind;
use crate::memory::{self, Kind};
use crate::pool::{self, Props};
use crate::vmm::RawAccessDesc;

/// One graph allocation: its memory is freed when the last node holding it goes.
pub(crate) struct GraphAlloc {
    /// The device address (fixed for the allocation's life).
    pub(crate) addr: u64,
    /// Bytes asked for.
    pub(crate) len: u64,
    /// The node's `poolProps` (for a captured allocation, its pool's).
    pub(crate) props: Props,
    /// The node's `accessDescs`, owned here so cuGraphMemAllocNodeGetParams can point at them.
    pub(crate) access: Vec<RawAccessDesc>,
    /// A mem-free node for it has been added to a graph.
    freed: AtomicBool,
}

impl Drop for GraphAlloc {
    fn drop(&mut self) {
        lock(&ALLOCS).as_mut().map(|m| m.remove(&self.addr));
        account(self.props.location_id, |u| {
            u.used = u.used.saturating_sub(self.footprint())
        });
        // Already gone when its context was destroyed first: nothing left to free.
        let _ = memory::free(self.addr, &[Kind::Device]);
    }
}

impl GraphAlloc {
    fn footprint(&self) -> u64 {
        pool::footprint(self.len)
    }
}

/// Live graph allocations by address.
static ALLOCS: Mutex<Option<HashMap<u64, Weak<GraphAlloc>>>> = Mutex::new(None);

/// A device's graph-memory figures (`CUgraphMem_attribute`); reserved equals used, so only the
/// high watermarks are kept apart (each is reset on its own).
#[derive(Clone, Copy)]
struct Usage {
    used: u64,
    used_high: u64,
    reserved_high: u64,
}

static USAGE: Mutex<[Usage; MAX_DEVICES]> = Mutex::new(
    [Usage {
        used: 0,
        used_high: 0,
        reserved_high: 0,
    }; MAX_DEVICES],
);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Each critical section is one insert, lookup, removal or counter update; a panic cannot
    // tear them.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Updates device `device`'s figures (an ordinal checked when the allocation was made) and
/// raises its high watermarks to match.
fn account(device: i32, update: impl FnOnce(&mut Usage)) {
    let Ok(i) = usize::try_from(device) else {
        return;
    };
    let mut all = lock(&USAGE);
    if let Some(u) = all.get_mut(i) {
        update(u);
        u.used_high = u.used_high.max(u.used);
        u.reserved_high = u.reserved_high.max(u.used);
    }
}

/// Allocates `len` bytes of graph memory for a mem-alloc node in context `ctx`; `props` and
/// `access` are the node's parameters, already checked.
pub(crate) fn alloc(
    ctx: &Context,
    props: Props,
    access: Vec<RawAccessDesc>,
    len: u64,
) -> CuResult<Arc<GraphAlloc>> {
    let addr = memory::alloc(ctx.id, len, Kind::Device)?;
    let owner = Arc::new(GraphAlloc {
        addr,
        len,
        props,
        access,
        freed: AtomicBool::new(false),
    });
    account(props.location_id, |u| u.used += owner.footprint());
    lock(&ALLOCS)
        .get_or_insert_with(HashMap::new)
        .insert(addr, Arc::downgrade(&owner));
    Ok(owner)
}

/// The graph allocation starting at `addr` that no graph frees yet (a free node is about to be
/// made for it: [`mark_freed`] once it is in its graph).
pub(crate) fn to_free(addr: u64) -> CuResult<Arc<GraphAlloc>> {
    let owner = lock(&ALLOCS)
        .as_ref()
        .and_then(|m| m.get(&addr))
        .and_then(Weak::upgrade)
        .ok_or(CUresult::CUDA_ERROR_INVALID_VALUE)?;
    if owner.freed.load(Ordering::Acquire) {
        return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
    }
    Ok(owner)
}

/// Records that a graph now holds a free node for `owner`.
pub(crate) fn mark_freed(owner: &GraphAlloc) {
    owner.freed.store(true, Ordering::Release);
}

/// cuMemAllocAsync / cuMemAllocFromPoolAsync on capturing stream `stream`: a mem-alloc node
/// whose parameters are the pool's; returns the allocation's address.
pub(crate) fn capture_alloc(
    capture: &Capture,
    stream: u64,
    ctx: &Context,
    pool: u64,
    len: u64,
) -> CuResult<u64> {
    crate::pool::check(pool)?;
    let props = Props {
        alloc_type: 1,
        handle_types: 0,
        location_type: 1,
        location_id: ctx.device,
        max_size: 0,
        usage: 0,
    };
    let owner = alloc(ctx, props, Vec::new(), len)?;
    let addr = owner.addr;
    capture.add(stream, NodeKind::MemAlloc(owner))?;
    Ok(addr)
}

/// cuMemFreeAsync on capturing stream `stream`: a mem-free node for graph allocation `addr`.
pub(crate) fn capture_free(capture: &Capture, stream: u64, addr: u64) -> CuResult<()> {
    let owner = to_free(addr)?;
    capture.add(stream, NodeKind::MemFree(Arc::clone(&owner)))?;
    mark_freed(&owner);
    Ok(())
}

/// `CUgraphMem_attribute` values.
mod attr {
    pub(super) const USED_MEM_CURRENT: u32 = 0;
    pub(super) const USED_MEM_HIGH: u32 = 1;
    pub(super) const RESERVED_MEM_CURRENT: u32 = 2;
    pub(super) const RESERVED_MEM_HIGH: u32 = 3;
}

fn usage(device: i32) -> CuResult<usize> {
    crate::driver::ensure_init()?;
    crate::device::check(device)?;
    usize::try_from(device).map_err(|_| CUresult::CUDA_ERROR_INVALID_DEVICE)
}

/// cuDeviceGetGraphMemAttribute: bytes graph allocations of `device` use (current and high
/// watermark) and hold reserved (the same memory: softcuda caches none).
pub(crate) fn attribute(device: i32, which: u32) -> CuResult<u64> {
    let i = usage(device)?;
    let u = lock(&USAGE)[i];
    match which {
        attr::USED_MEM_CURRENT | attr::RESERVED_MEM_CURRENT => Ok(u.used),
        attr::USED_MEM_HIGH => Ok(u.used_high),
        attr::RESERVED_MEM_HIGH => Ok(u.reserved_high),
        _ => Err(CUresult::CUDA_ERROR_INVALID_VALUE),
    }
}

/// cuDeviceSetGraphMemAttribute: a high watermark can only be reset, by setting 0 (it then
/// starts again from the current figure); anything else is `CUDA_ERROR_INVALID_VALUE`.
pub(crate) fn set_attribute(device: i32, which: u32, value: u64) -> CuResult<()> {
    let i = usage(device)?;
    let mut all = lock(&USAGE);
    let u = &mut all[i];
    match (which, value) {
        (attr::USED_MEM_HIGH, 0) => u.used_high = u.used,
        (attr::RESERVED_MEM_HIGH, 0) => u.reserved_high = u.used,
        _ => return Err(CUresult::CUDA_ERROR_INVALID_VALUE),
    }
    Ok(())
}

/// cuDeviceGraphMemTrim: softcuda keeps no unused graph memory, so there is nothing to give
/// back; the device is checked.
pub(crate) fn trim(device: i32) -> CuResult<()> {
    usage(device).map(drop)
}
