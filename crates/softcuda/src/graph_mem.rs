//! Graph memory nodes made by stream capture: cuMemAllocAsync on a capturing stream becomes a
//! mem-alloc node (`CUgraphNodeType` 10) and cuMemFreeAsync of that address a mem-free node
//! (11).
//!
//! NVIDIA's driver fixes the allocation's address at capture time and backs it with memory
//! whenever a launch of the graph is between the two nodes. softcuda allocates the memory at
//! capture (so the address is fixed from then on) and keeps it while any graph or executable
//! graph holding the alloc node lives; the nodes themselves do no work. The memory counts in
//! cuMemGetInfo as NVIDIA's graph memory does, not in any pool's attributes.
//!
//! A free during capture must name a graph allocation not yet freed in a graph:
//! anything else is `CUDA_ERROR_INVALID_VALUE`, as cuMemFreeAsync documents for capture.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};

use cudarc::driver::sys::CUresult;

use crate::abi::CuResult;
use crate::capture::Capture;
use crate::context::Context;
use crate::graph::{NodeKind, TYPE_MEM_ALLOC, TYPE_MEM_FREE};
use crate::memory::{self, Kind};

/// One graph allocation: its memory is freed when the last node holding it goes.
struct GraphAlloc {
    addr: u64,
    /// A mem-free node for it has been captured.
    freed: AtomicBool,
}

impl Drop for GraphAlloc {
    fn drop(&mut self) {
        lock().as_mut().map(|m| m.remove(&self.addr));
        // Already gone when its context was destroyed first: nothing left to free.
        let _ = memory::free(self.addr, &[Kind::Device]);
    }
}

/// Live graph allocations by address.
static ALLOCS: Mutex<Option<HashMap<u64, Weak<GraphAlloc>>>> = Mutex::new(None);

fn lock() -> MutexGuard<'static, Option<HashMap<u64, Weak<GraphAlloc>>>> {
    // Each critical section is one insert, lookup or removal; a panic cannot tear the map.
    ALLOCS.lock().unwrap_or_else(PoisonError::into_inner)
}

/// cuMemAllocAsync / cuMemAllocFromPoolAsync on capturing stream `stream`: a mem-alloc node;
/// returns the allocation's address.
pub(crate) fn capture_alloc(
    capture: &Capture,
    stream: u64,
    ctx: &Context,
    pool: u64,
    len: u64,
) -> CuResult<u64> {
    crate::pool::check(pool)?;
    let addr = memory::alloc(ctx.id, len, Kind::Device)?;
    let owner = Arc::new(GraphAlloc {
        addr,
        freed: AtomicBool::new(false),
    });
    lock()
        .get_or_insert_with(HashMap::new)
        .insert(addr, Arc::downgrade(&owner));
    // The node's replay does nothing; holding `owner` keeps the memory for the graph's life.
    let replay = move |_stream| {
        let _held = &owner;
        Ok(())
    };
    capture.add(stream, NodeKind::Call(Arc::new(replay), TYPE_MEM_ALLOC))?;
    Ok(addr)
}

/// cuMemFreeAsync on capturing stream `stream`: a mem-free node for graph allocation `addr`.
pub(crate) fn capture_free(capture: &Capture, stream: u64, addr: u64) -> CuResult<()> {
    let owner = lock()
        .as_ref()
        .and_then(|m| m.get(&addr))
        .and_then(Weak::upgrade)
        .ok_or(CUresult::CUDA_ERROR_INVALID_VALUE)?;
    if owner.freed.swap(true, Ordering::AcqRel) {
        return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
    }
    let replay = |_stream| Ok(());
    capture.add(stream, NodeKind::Call(Arc::new(replay), TYPE_MEM_FREE))
}
