//! Stream-ordered allocation and memory pools: cuMemAllocAsync / cuMemAllocFromPoolAsync,
//! cuMemFreeAsync, each device's default and current pool, created pools, their attributes and
//! cuMemPoolTrimTo.
//!
//! Each pool allocation is a real allocation in the `memory` table (kind `Pool`), made at call
//! time, so it is usable by all work ordered after the call. What a pool adds is NVIDIA's
//! accounting: a pool *reserves* device memory in 2 MiB chunks (counted by cuMemGetInfo) and
//! *uses* part of it; freed memory stays reserved until a synchronisation (stream, event or
//! context) finds the pool holding more than its release threshold, or until cuMemPoolTrimTo.
//!
//! A free is checked and recorded at call time (so freeing twice, or a pointer no pool handed
//! out, is `CUDA_ERROR_INVALID_VALUE` at once, whatever the streams are doing) and carried out
//! when its stream reaches it: work queued before the free may still use the memory.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use cudarc::driver::sys::CUresult;

use crate::abi::CuResult;
use crate::driver::{self, MAX_DEVICES, Tag};
use crate::handles::Table;
use crate::memory::{self, Kind};

/// Pools reserve device memory in chunks of this size (NVIDIA's pool granularity on H100/H200).
const CHUNK: u64 = 2 << 20;

/// What a used allocation counts: its size rounded up to the allocation alignment.
pub(crate) fn footprint(len: u64) -> u64 {
    len.div_ceil(memory::ALIGN as u64) * memory::ALIGN as u64
}

fn chunks(bytes: u64) -> u64 {
    bytes.div_ceil(CHUNK).saturating_mul(CHUNK)
}

/// `CUmemPool_attribute` values.
mod attr {
    /// The first of the three reuse flags (follow event dependencies, allow opportunistic,
    /// allow internal dependencies: 1..=3).
    pub(super) const REUSE_FOLLOW_EVENT_DEPENDENCIES: u32 = 1;
    pub(super) const REUSE_ALLOW_INTERNAL_DEPENDENCIES: u32 = 3;
    pub(super) const RELEASE_THRESHOLD: u32 = 4;
    pub(super) const RESERVED_MEM_CURRENT: u32 = 5;
    pub(super) const RESERVED_MEM_HIGH: u32 = 6;
    pub(super) const USED_MEM_CURRENT: u32 = 7;
    pub(super) const USED_MEM_HIGH: u32 = 8;
}

/// An attribute's value, by the C type cuda.h gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Value {
    /// The three reuse flags: `int`.
    Int(i32),
    /// Thresholds and counters: `cuuint64_t`.
    U64(u64),
}

/// Whether attribute `which` is an `int` (else a `cuuint64_t`): how many bytes
/// cuMemPoolSet/GetAttribute read or write. An unknown attribute is `CUDA_ERROR_INVALID_VALUE`.
pub(crate) fn is_int_attribute(which: u32) -> CuResult<bool> {
    match which {
        attr::REUSE_FOLLOW_EVENT_DEPENDENCIES..=attr::REUSE_ALLOW_INTERNAL_DEPENDENCIES => Ok(true),
        attr::RELEASE_THRESHOLD..=attr::USED_MEM_HIGH => Ok(false),
        _ => Err(CUresult::CUDA_ERROR_INVALID_VALUE),
    }
}

#[derive(Debug)]
struct Counters {
    reuse: [i32; 3],
    release_threshold: u64,
    reserved: u64,
    reserved_high: u64,
    used: u64,
    used_high: u64,
    /// cuMemPoolDestroy ran while allocations were outstanding: give memory back as they go.
    destroyed: bool,
    /// `CUmemAccess_flags` each device has (cuMemPoolSetAccess); the pool's own is always
    /// read-write.
    access: [u32; MAX_DEVICES],
}

/// One memory pool.
pub(crate) struct Pool {
    /// Its handle.
    handle: u64,
    /// The device whose memory it holds.
    pub(crate) device: i32,
    /// Whether it is the device's default pool (which cannot be destroyed).
    is_default: bool,
    /// `CUmemPoolProps::maxSize`: most bytes it may reserve (0: the device's size).
    max_size: u64,
    counters: Mutex<Counters>,
}

static POOLS: Table<Pool> = Table::new(Tag::MemPool);

/// Per device: its default pool's handle (0 until first asked for) and its current pool's
/// (0: the default).
static DEVICE_POOLS: Mutex<[(u64, u64); MAX_DEVICES]> = Mutex::new([(0, 0); MAX_DEVICES]);

/// An outstanding pool allocation: its pool and the bytes it counts as used.
type Outstanding = (Arc<Pool>, u64);

/// Outstanding pool allocations by address.
static LIVE: Mutex<Option<HashMap<u64, Outstanding>>> = Mutex::new(None);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every critical section is a lookup, an insert or arithmetic on counters that is checked
    // before it is stored; a panic cannot tear them.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Pool {
    fn new(handle: u64, device: i32, is_default: bool, max_size: u64) -> Pool {
        Pool {
            handle,
            device,
            is_default,
            max_size,
            counters: Mutex::new(Counters {
                reuse: [1, 1, 1],
                release_threshold: 0,
                reserved: 0,
                reserved_high: 0,
                used: 0,
                used_high: 0,
                destroyed: false,
                access: [0; MAX_DEVICES],
            }),
        }
    }

    /// Counts `bytes` more as used, reserving more chunks if needed.
    fn take(&self, bytes: u64) -> CuResult<()> {
        let mut c = lock(&self.counters);
        let used = c
            .used
            .checked_add(bytes)
            .ok_or(CUresult::CUDA_ERROR_OUT_OF_MEMORY)?;
        if used > c.reserved {
            let reserved = chunks(used);
            if self.max_size != 0 && reserved > self.max_size {
                return Err(CUresult::CUDA_ERROR_OUT_OF_MEMORY);
            }
            memory::charge(reserved - c.reserved)?;
            c.reserved = reserved;
            c.reserved_high = c.reserved_high.max(reserved);
        }
        c.used = used;
        c.used_high = c.used_high.max(used);
        Ok(())
    }

    /// Counts `bytes` as no longer used (they stay reserved unless the pool is destroyed).
    fn give(&self, bytes: u64) {
        let mut c = lock(&self.counters);
        c.used = c.used.saturating_sub(bytes);
        if c.destroyed {
            shrink(&mut c, 0);
        }
    }
}

/// Gives back reserved chunks no allocation uses, keeping at least `keep` bytes reserved.
fn shrink(c: &mut Counters, keep: u64) {
    let target = chunks(c.used).max(chunks(keep)).min(c.reserved);
    memory::uncharge(c.reserved - target);
    c.reserved = target;
}

fn get(handle: u64) -> CuResult<Arc<Pool>> {
    driver::ensure_init()?;
    POOLS.get(handle).ok_or(CUresult::CUDA_ERROR_INVALID_VALUE)
}

/// Fails unless `handle` is a live pool.
pub(crate) fn check(handle: u64) -> CuResult<()> {
    get(handle).map(drop)
}

fn slot(device: i32) -> CuResult<usize> {
    crate::device::check(device)?;
    usize::try_from(device).map_err(|_| CUresult::CUDA_ERROR_INVALID_DEVICE)
}

/// cuDeviceGetDefaultMemPool: the device's default pool (made on first use).
pub(crate) fn default_pool(device: i32) -> CuResult<u64> {
    let i = slot(device)?;
    let mut pools = lock(&DEVICE_POOLS);
    if pools[i].0 == 0 {
        pools[i].0 = POOLS
            .insert_with(|h| Arc::new(Pool::new(h, device, true, 0)))
            .0;
    }
    Ok(pools[i].0)
}

/// cuDeviceGetMemPool: the device's current pool.
pub(crate) fn current_pool(device: i32) -> CuResult<u64> {
    let i = slot(device)?;
    let current = lock(&DEVICE_POOLS)[i].1;
    match current {
        0 => default_pool(device),
        h => Ok(h),
    }
}

/// cuDeviceSetMemPool: `pool` (a pool of `device`) becomes what cuMemAllocAsync uses there.
pub(crate) fn set_current_pool(device: i32, pool: u64) -> CuResult<()> {
    let i = slot(device)?;
    let p = get(pool)?;
    if p.device != device {
        return Err(CUresult::CUDA_ERROR_INVALID_DEVICE);
    }
    lock(&DEVICE_POOLS)[i].1 = pool;
    Ok(())
}

/// The fields of `CUmemPoolProps` softcuda reads, as plain values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Props {
    /// `CUmemAllocationType` (1: pinned, the only one).
    pub(crate) alloc_type: u32,
    /// `CUmemAllocationHandleType` bits for IPC export.
    pub(crate) handle_types: u32,
    /// `CUmemLocationType` (1: device).
    pub(crate) location_type: u32,
    /// The device ordinal.
    pub(crate) location_id: i32,
    /// Most bytes the pool may reserve (0: no limit).
    pub(crate) max_size: u64,
    /// `CUmemPoolProps::usage` flags (hardware decompression).
    pub(crate) usage: u16,
}

/// cuMemPoolCreate: a pool of device memory. Host-memory pools, IPC-exportable pools and
/// decompression usage are `CUDA_ERROR_NOT_SUPPORTED`; malformed properties are
/// `CUDA_ERROR_INVALID_VALUE`.
pub(crate) fn create(props: &Props) -> CuResult<u64> {
    check_props(props)?;
    let (device, max_size) = (props.location_id, props.max_size);
    Ok(POOLS
        .insert_with(|h| Arc::new(Pool::new(h, device, false, max_size)))
        .0)
}

/// The property checks of cuMemPoolCreate, which graph allocation nodes share (their
/// `poolProps`): device memory only.
pub(crate) fn check_props(props: &Props) -> CuResult<()> {
    driver::ensure_init()?;
    const PINNED: u32 = 1;
    const LOCATION_DEVICE: u32 = 1;
    const LOCATION_HOST_KINDS: [u32; 3] = [2, 3, 4];
    if props.alloc_type != PINNED || props.handle_types & !0xf != 0 {
        return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
    }
    match props.location_type {
        LOCATION_DEVICE => crate::device::check(props.location_id)
            .map_err(|_| CUresult::CUDA_ERROR_INVALID_VALUE)?,
        t if LOCATION_HOST_KINDS.contains(&t) => return Err(CUresult::CUDA_ERROR_NOT_SUPPORTED),
        _ => return Err(CUresult::CUDA_ERROR_INVALID_VALUE),
    }
    if props.handle_types != 0 || props.usage != 0 {
        return Err(CUresult::CUDA_ERROR_NOT_SUPPORTED);
    }
    Ok(())
}

/// cuMemPoolDestroy: the handle dies now; memory still allocated from the pool stays valid and
/// is given back as it is freed. A device's default pool cannot be destroyed; a destroyed
/// current pool is replaced by the default.
pub(crate) fn destroy(handle: u64) -> CuResult<()> {
    let p = get(handle)?;
    if p.is_default {
        return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
    }
    POOLS.remove(handle);
    for entry in lock(&DEVICE_POOLS).iter_mut() {
        if entry.1 == handle {
            entry.1 = 0;
        }
    }
    let mut c = lock(&p.counters);
    c.destroyed = true;
    shrink(&mut c, 0);
    Ok(())
}

/// cuMemAllocAsync / cuMemAllocFromPoolAsync: `len` bytes from `pool` for context `ctx_id`,
/// usable at once. The pool reserves more device memory when its reserve is used up;
/// `CUDA_ERROR_OUT_OF_MEMORY` when the device (or the pool's `maxSize`) has no room.
pub(crate) fn alloc(pool: u64, len: u64, ctx_id: u64) -> CuResult<u64> {
    let p = get(pool)?;
    if len == 0 {
        // NVIDIA's driver (580, H200, 2026-12-01) answers success for 0 bytes: nothing is
        // allocated, and the NULL pointer given back addresses nothing.
        return Ok(0);
    }
    let bytes = footprint(len);
    p.take(bytes)?;
    let addr = match memory::alloc(ctx_id, len, Kind::Pool) {
        Ok(a) => a,
        Err(e) => {
            p.give(bytes);
            return Err(e);
        }
    };
    lock(&LIVE)
        .get_or_insert_with(HashMap::new)
        .insert(addr, (p, bytes));
    Ok(addr)
}

/// A pool allocation whose free has been recorded: carried out by [`Freed::release`].
pub(crate) struct Freed {
    addr: u64,
    pool: Arc<Pool>,
    bytes: u64,
}

impl Freed {
    /// Frees the memory and gives its bytes back to the pool.
    pub(crate) fn release(self) {
        // The entry is there: only `claim` hands out a Freed, once per allocation.
        let _ = memory::free(self.addr, &[Kind::Pool]);
        self.pool.give(self.bytes);
    }
}

/// Records the free of the pool allocation starting at `addr`; `None` when no pool handed
/// `addr` out, or its free was already recorded.
pub(crate) fn claim(addr: u64) -> Option<Freed> {
    let (pool, bytes) = lock(&LIVE).as_mut()?.remove(&addr)?;
    Some(Freed { addr, pool, bytes })
}

/// Whether `addr` starts a pool allocation not yet freed.
pub(crate) fn is_live(addr: u64) -> bool {
    lock(&LIVE).as_ref().is_some_and(|m| m.contains_key(&addr))
}

/// At a synchronisation (stream, event, context): every pool holding more than its release
/// threshold gives back the chunks no allocation uses, down to the threshold.
pub(crate) fn release_over_threshold() {
    for p in POOLS.all() {
        let mut c = lock(&p.counters);
        if c.reserved > c.release_threshold {
            let keep = c.release_threshold;
            shrink(&mut c, keep);
        }
    }
}

/// cuMemPoolTrimTo: gives back unused chunks until at most about `keep` bytes stay reserved
/// (memory backing outstanding allocations always stays).
pub(crate) fn trim(pool: u64, keep: u64) -> CuResult<()> {
    let p = get(pool)?;
    let mut c = lock(&p.counters);
    shrink(&mut c, keep);
    Ok(())
}

/// cuMemPoolGetAttribute.
pub(crate) fn attribute(pool: u64, which: u32) -> CuResult<Value> {
    let p = get(pool)?;
    let c = lock(&p.counters);
    Ok(match which {
        attr::REUSE_FOLLOW_EVENT_DEPENDENCIES..=attr::REUSE_ALLOW_INTERNAL_DEPENDENCIES => {
            Value::Int(c.reuse[(which - 1) as usize])
        }
        attr::RELEASE_THRESHOLD => Value::U64(c.release_threshold),
        attr::RESERVED_MEM_CURRENT => Value::U64(c.reserved),
        attr::RESERVED_MEM_HIGH => Value::U64(c.reserved_high),
        attr::USED_MEM_CURRENT => Value::U64(c.used),
        attr::USED_MEM_HIGH => Value::U64(c.used_high),
        _ => return Err(CUresult::CUDA_ERROR_INVALID_VALUE),
    })
}

/// cuMemPoolSetAttribute: the reuse flags and the release threshold are settable; the high
/// watermarks can only be reset (to the current value, by setting 0); the current counters are
/// read-only (`CUDA_ERROR_INVALID_VALUE`).
pub(crate) fn set_attribute(pool: u64, which: u32, value: Value) -> CuResult<()> {
    let p = get(pool)?;
    let mut c = lock(&p.counters);
    match (which, value) {
        (
            attr::REUSE_FOLLOW_EVENT_DEPENDENCIES..=attr::REUSE_ALLOW_INTERNAL_DEPENDENCIES,
            Value::Int(v),
        ) => {
            c.reuse[(which - 1) as usize] = i32::from(v != 0);
        }
        (attr::RELEASE_THRESHOLD, Value::U64(v)) => c.release_threshold = v,
        (attr::RESERVED_MEM_HIGH, Value::U64(0)) => c.reserved_high = c.reserved,
        (attr::USED_MEM_HIGH, Value::U64(0)) => c.used_high = c.used,
        _ => return Err(CUresult::CUDA_ERROR_INVALID_VALUE),
    }
    Ok(())
}

/// `CUmemAccess_flags`: read-write, the owner's.
const ACCESS_READWRITE: u32 = 3;

/// A `CUmemAccessDesc` as plain values: a device ordinal (its location type checked) and flags.
pub(crate) struct Access {
    /// `CUmemLocationType` (1: device, the only kind a pool is shared with).
    pub(crate) location_type: u32,
    /// The device.
    pub(crate) device: i32,
    /// `CUmemAccess_flags`: 0 none, 1 read, 3 read-write.
    pub(crate) flags: u32,
}

fn access_slot(location_type: u32, device: i32) -> CuResult<usize> {
    const LOCATION_DEVICE: u32 = 1;
    if location_type != LOCATION_DEVICE {
        return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
    }
    slot(device).map_err(|_| CUresult::CUDA_ERROR_INVALID_VALUE)
}

/// cuMemPoolSetAccess: records each device's access to the pool, all or nothing (a malformed
/// descriptor, or taking read-write access from the pool's own device, changes nothing and is
/// `CUDA_ERROR_INVALID_VALUE`). softcuda does not enforce it: every device's kernels see pool
/// memory, as they see all host memory.
pub(crate) fn set_access(pool: u64, descs: &[Access]) -> CuResult<()> {
    let p = get(pool)?;
    let changes = check_access(p.device, descs)?;
    let mut c = lock(&p.counters);
    for (i, flags) in changes {
        c.access[i] = flags;
    }
    Ok(())
}

/// Checks access descriptors for memory of device `owner` (a pool's, or a graph allocation
/// node's `accessDescs`): each names a device and a defined flag, and the owner keeps
/// read-write. Returns (device slot, flags) per descriptor.
pub(crate) fn check_access(owner: i32, descs: &[Access]) -> CuResult<Vec<(usize, u32)>> {
    let mut changes = Vec::with_capacity(descs.len());
    for d in descs {
        let i = access_slot(d.location_type, d.device)?;
        let is_owner = d.device == owner;
        if !matches!(d.flags, 0 | 1 | ACCESS_READWRITE) || (is_owner && d.flags != ACCESS_READWRITE)
        {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        }
        changes.push((i, d.flags));
    }
    Ok(changes)
}

/// cuMemPoolGetAccess: the access a device has to the pool (its own: read-write).
pub(crate) fn access(pool: u64, location_type: u32, device: i32) -> CuResult<u32> {
    let p = get(pool)?;
    let i = access_slot(location_type, device)?;
    if device == p.device {
        return Ok(ACCESS_READWRITE);
    }
    Ok(lock(&p.counters).access[i])
}

/// The pool `addr` was allocated from (`CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE`), if it is a live
/// pool allocation whose pool still has a handle.
pub(crate) fn pool_of(addr: u64) -> Option<u64> {
    let handle = lock(&LIVE).as_ref()?.get(&addr)?.0.handle;
    POOLS.get(handle).map(|_| handle)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counters(pool: u64) -> (u64, u64) {
        let get = |w| match attribute(pool, w).unwrap() {
            Value::U64(v) => v,
            Value::Int(_) => unreachable!("counter attributes are 64-bit"),
        };
        (get(attr::RESERVED_MEM_CURRENT), get(attr::USED_MEM_CURRENT))
    }

    fn test_pool(max_size: u64) -> u64 {
        driver::init(0).unwrap();
        create(&Props {
            alloc_type: 1,
            handle_types: 0,
            location_type: 1,
            location_id: 0,
            max_size,
            usage: 0,
        })
        .unwrap()
    }

    #[test]
    fn pool_reserves_whole_chunks_and_keeps_them_until_trimmed() {
        let pool = test_pool(0);
        let a = alloc(pool, 1000, u64::MAX).unwrap();
        assert_eq!(counters(pool), (CHUNK, 1024));
        claim(a).unwrap().release();
        assert_eq!(counters(pool), (CHUNK, 0));
        trim(pool, 0).unwrap();
        assert_eq!(counters(pool), (0, 0));
        destroy(pool).unwrap();
    }

    #[test]
    fn second_claim_of_one_allocation_finds_nothing() {
        let pool = test_pool(0);
        let a = alloc(pool, 64, u64::MAX).unwrap();
        let first = claim(a).unwrap();
        assert!(claim(a).is_none());
        first.release();
        assert!(memory::find(a).is_none());
        destroy(pool).unwrap();
    }

    #[test]
    fn pool_over_its_max_size_is_out_of_memory_and_unchanged() {
        let pool = test_pool(CHUNK);
        let a = alloc(pool, CHUNK, u64::MAX).unwrap();
        assert_eq!(
            alloc(pool, 1, u64::MAX),
            Err(CUresult::CUDA_ERROR_OUT_OF_MEMORY)
        );
        assert_eq!(counters(pool), (CHUNK, CHUNK));
        claim(a).unwrap().release();
        destroy(pool).unwrap();
    }

    #[test]
    fn access_changes_are_all_or_nothing_and_the_owner_keeps_read_write() {
        let pool = test_pool(0);
        let desc = |device, flags| Access {
            location_type: 1,
            device,
            flags,
        };
        assert_eq!(access(pool, 1, 0), Ok(ACCESS_READWRITE));
        assert_eq!(
            set_access(pool, &[desc(0, 0)]),
            Err(CUresult::CUDA_ERROR_INVALID_VALUE)
        );
        assert_eq!(
            set_access(pool, &[desc(0, 3), desc(0, 2)]),
            Err(CUresult::CUDA_ERROR_INVALID_VALUE)
        );
        assert_eq!(access(pool, 2, 0), Err(CUresult::CUDA_ERROR_INVALID_VALUE));
        assert_eq!(set_access(pool, &[desc(0, 3)]), Ok(()));
        destroy(pool).unwrap();
    }

    #[test]
    fn destroyed_pool_gives_memory_back_as_its_allocations_are_freed() {
        let pool = test_pool(0);
        let a = alloc(pool, 64, u64::MAX).unwrap();
        let p = get(pool).unwrap();
        destroy(pool).unwrap();
        assert_eq!(lock(&p.counters).reserved, CHUNK);
        claim(a).unwrap().release();
        assert_eq!(lock(&p.counters).reserved, 0);
    }
}
