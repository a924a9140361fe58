//! Memory calls that take or describe a pointer: freeing (synchronous and stream-ordered),
//! page-locked host allocations, address ranges and cuPointerGetAttribute.

use std::collections::BTreeSet;
use std::sync::{Mutex, MutexGuard, PoisonError};

use cudarc::driver::sys::CUresult;

use crate::abi::CuResult;
use crate::context;
use crate::memory::{self, Kind};
use crate::{pool, stream};

/// The kinds cuMemFree accepts.
const FREEABLE: [Kind; 2] = [Kind::Device, Kind::Managed];

/// cuMemFree: like NVIDIA's, it waits for the context's queued work before releasing the memory.
/// Memory from a pool (cuMemAllocAsync) may be freed this way too; it goes back to its pool.
pub(crate) fn free_device(addr: u64) -> CuResult<()> {
    let ctx = context::live()?;
    if pool::is_live(addr) {
        ctx.synchronize()?;
        let freed = pool::claim(addr).ok_or(CUresult::CUDA_ERROR_INVALID_VALUE)?;
        freed.release();
        return Ok(());
    }
    check_freeable(&lock_pending(), addr)?;
    ctx.synchronize()?;
    memory::free(addr, &FREEABLE)
}

/// cuMemAllocAsync (`pool` None: the current pool of the stream's device) and
/// cuMemAllocFromPoolAsync. On a capturing stream the allocation becomes a graph node.
pub(crate) fn alloc_async(stream_handle: u64, pool: Option<u64>, len: u64) -> CuResult<u64> {
    let (ctx, _) = stream::resolve(stream_handle)?;
    let pool = match pool {
        Some(p) => p,
        None => pool::current_pool(ctx.device)?,
    };
    if let Some(capture) = crate::capture::active(stream_handle) {
        return crate::graph_mem::capture_alloc(&capture, stream_handle, &ctx, pool, len);
    }
    pool::alloc(pool, len, ctx.id)
}

/// cuMemFreeAsync: checked and recorded now, released when the stream reaches it. Memory can be
/// freed once (a second free is `CUDA_ERROR_INVALID_VALUE` at once, even before the first has
/// run); memory from cuMemAlloc is accepted too, as NVIDIA's driver does. On a capturing stream the free becomes
/// a graph node.
pub(crate) fn free_async(addr: u64, stream_handle: u64) -> CuResult<()> {
    let (ctx, s) = stream::resolve(stream_handle)?;
    if let Some(capture) = crate::capture::active(stream_handle) {
        return crate::graph_mem::capture_free(&capture, stream_handle, addr);
    }
    if let Some(freed) = pool::claim(addr) {
        ctx.submit(&s, Box::new(move || freed.release()));
        return Ok(());
    }
    {
        // Recorded now, so a second free (async or not) before this one runs is refused too.
        let mut pending = lock_pending();
        check_freeable(&pending, addr)?;
        pending.insert(addr);
    }
    ctx.submit(
        &s,
        Box::new(move || {
            // Under the lock, so no new allocation at this address is seen as still pending.
            let mut pending = lock_pending();
            let _ = memory::free(addr, &FREEABLE);
            pending.remove(&addr);
        }),
    );
    Ok(())
}

/// cuMemAlloc allocations whose cuMemFreeAsync is queued but has not run yet.
static PENDING: Mutex<BTreeSet<u64>> = Mutex::new(BTreeSet::new());

fn lock_pending() -> MutexGuard<'static, BTreeSet<u64>> {
    // Each critical section is one insert, lookup or removal; a panic cannot tear the set.
    PENDING.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Fails with `CUDA_ERROR_INVALID_VALUE` unless `addr` starts a live cuMemAlloc or managed
/// allocation whose free is not `pending`.
fn check_freeable(pending: &BTreeSet<u64>, addr: u64) -> CuResult<()> {
    match memory::find(addr) {
        Some(a) if a.base == addr && FREEABLE.contains(&a.kind) && !pending.contains(&addr) => {
            Ok(())
        }
        _ => Err(CUresult::CUDA_ERROR_INVALID_VALUE),
    }
}

/// cuMemAllocHost / cuMemHostAlloc: page-locked host memory in the current context.
pub(crate) fn alloc_host(len: u64) -> CuResult<u64> {
    let ctx = context::live()?;
    memory::alloc(ctx.id, len, Kind::Host)
}

/// cuMemHostGetDevicePointer: page-locked memory has the same address on both sides.
pub(crate) fn host_device_pointer(addr: u64, flags: u32) -> CuResult<u64> {
    context::live()?;
    if flags != 0 {
        return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
    }
    match memory::find(addr) {
        Some(a) if matches!(a.kind, Kind::Host | Kind::Registered) => Ok(addr),
        _ => Err(CUresult::CUDA_ERROR_INVALID_VALUE),
    }
}

/// cuMemGetAddressRange: (base, size) of the allocation containing `addr`.
pub(crate) fn address_range(addr: u64) -> CuResult<(u64, u64)> {
    context::live()?;
    memory::find(addr)
        .map(|a| (a.base, a.len))
        .ok_or(CUresult::CUDA_ERROR_NOT_FOUND)
}

/// A pointer attribute's value, by the C type cuda.h gives it.
pub(crate) enum Value {
    /// `unsigned int` / `int` / bool attributes.
    U32(u32),
    /// `size_t`, `unsigned long long` and `CUdeviceptr` attributes.
    U64(u64),
    /// Handle or `void*` attributes.
    Ptr(u64),
}

/// Bytes a `CUpointer_attribute` value takes (what cuPointerGetAttributes zeroes for a pointer
/// it does not know); `None` for an attribute that does not exist.
pub(crate) fn attribute_size(attr: u32) -> Option<usize> {
    match attr {
        1 | 4 | 5 | 3 | 7 | 11 | 12 | 14 | 17..=20 => Some(8),
        2 | 6 | 8 | 9 | 10 | 13 | 15 | 16 => Some(4),
        _ => None,
    }
}

/// cuPointerGetAttribute for a raw `CUpointer_attribute`. A pointer outside every allocation is
/// `CUDA_ERROR_INVALID_VALUE`, as in NVIDIA's driver.
pub(crate) fn attribute(attr: u32, addr: u64) -> CuResult<Value> {
    crate::driver::ensure_init()?;
    let a = memory::find(addr).ok_or(CUresult::CUDA_ERROR_INVALID_VALUE)?;
    Ok(match attr {
        1 => Value::Ptr(context::handle_of(a.ctx_id).ok_or(CUresult::CUDA_ERROR_INVALID_VALUE)?),
        2 => Value::U32(if matches!(a.kind, Kind::Host | Kind::Registered) {
            1
        } else {
            2
        }),
        3 => Value::U64(addr),
        4 if matches!(a.kind, Kind::Device | Kind::Mapped | Kind::Pool) => {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        }
        4 => Value::Ptr(addr),
        6 => Value::U32(0),
        7 => Value::U64(a.base),
        8 => Value::U32(u32::from(a.kind == Kind::Managed)),
        // DEVICE_ORDINAL: the owning context's device.
        9 => {
            Value::U32(context::by_id(a.ctx_id).map_or(0, |c| u32::try_from(c.device).unwrap_or(0)))
        }
        10 | 15 => Value::U32(0),
        11 => Value::U64(a.base),
        12 => Value::U64(a.len),
        13 => Value::U32(1),
        14 => Value::U64(0),
        16 => Value::U32(3),
        // MEMPOOL_HANDLE: the pool of pool memory, NULL for any other.
        17 => Value::Ptr(pool::pool_of(a.base).unwrap_or(0)),
        5 | 18..=20 => return Err(CUresult::CUDA_ERROR_NOT_SUPPORTED),
        _ => return Err(CUresult::CUDA_ERROR_INVALID_VALUE),
    })
}
