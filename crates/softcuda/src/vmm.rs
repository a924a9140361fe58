//! Virtual memory management: cuMemAddressReserve/Free, cuMemCreate/Release, cuMemMap/Unmap,
//! cuMemSetAccess/GetAccess, cuMemGetAllocationGranularity, cuMemRetainAllocationHandle and
//! cuMemGetAllocationPropertiesFromHandle, built on the host's own virtual memory.
//!
//! Device addresses in softcuda are host addresses, so the model maps one to one:
//! - a reservation is a `PROT_NONE` host range (mmap, `MAP_NORESERVE`) aligned to at least the
//!   granularity, so no other allocation can ever get an address inside it;
//! - physical memory (cuMemCreate) is a memfd of that size (its pages appear, zeroed, when first
//!   touched), counted against device memory like cuMemAlloc;
//! - cuMemMap maps the memfd `MAP_SHARED | MAP_FIXED` into the reservation, still inaccessible,
//!   so one physical allocation mapped at two addresses shows the same bytes;
//! - cuMemSetAccess mprotects the range and publishes the accessible runs in the allocation table
//!   (`memory::replace_views`), which kernels (`ptxvm::Memory::translate`) and copies consult.
//!   Adjacent accessible mappings form one run, so a buffer may straddle two physical chunks.
//!
//! Before a range loses access (unmap, `PROT_NONE`) its runs are taken out of the table and the
//! call waits until no running kernel or queued copy still holds them, so softcuda never touches
//! a page it made inaccessible. A kernel's snapshot holds every run of its context, so this
//! waits for the kernels running at that moment; cuMemUnmap waits without holding the state
//! lock (the range is marked retiring meanwhile). Like NVIDIA's (PyTorch synchronizes before it
//! unmaps), these calls do not wait for other queued work: a kernel queued earlier that starts
//! after the unmap and touches the range faults with an illegal address, as on a GPU.
//! Read-only access is reported as such but not enforced on kernels (the table has no per-run
//! permission), and the pages stay host-writable, so a kernel writing there cannot crash the
//! process.
//! Reservations and mappings belong to the context current when they were made and go with it;
//! physical allocations (handles) belong to the device and stay until cuMemRelease, as on
//! NVIDIA's driver.

use std::collections::BTreeMap;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use cudarc::driver::sys::CUresult;

use crate::abi::CuResult;
use crate::memory::{self, View};
use crate::{context, driver};

/// Granularity of physical allocations and mappings, minimum and recommended: 2 MiB, as on
/// NVIDIA's Hopper GPUs (an H200 answers the same).
pub(crate) const GRANULARITY: u64 = 2 << 20;

/// `CU_MEM_ACCESS_FLAGS_PROT_READ` and `_READWRITE`.
const PROT_READ: u8 = 1;
const PROT_READWRITE: u8 = 3;

/// `CUmemLocation` with its enum read as a raw integer (a foreign value outside the Rust enum
/// would be undefined behaviour).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct RawLocation {
    /// `CUmemLocationType`: 1 is a device.
    pub kind: u32,
    /// Device ordinal.
    pub id: i32,
}

/// `CUmemAllocationProp` (32 bytes) with raw enums.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct RawAllocationProp {
    /// `CUmemAllocationType`: 1 is pinned device memory.
    pub kind: u32,
    /// `CUmemAllocationHandleType` bits.
    pub requested_handle_types: u32,
    /// Where the memory lives.
    pub location: RawLocation,
    /// Windows security attributes (ignored).
    pub win32_handle_meta_data: *mut std::ffi::c_void,
    /// compressionType, gpuDirectRDMACapable, usage, reserved.
    pub alloc_flags: [u8; 8],
}

/// `CUmemAccessDesc` with raw enums.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct RawAccessDesc {
    /// The device the access is for.
    pub location: RawLocation,
    /// `CUmemAccess_flags`: 0 none, 1 read, 3 read-write.
    pub flags: u32,
}

/// One cuMemCreate allocation: a memfd, counted against device memory until the last mapping
/// and the last handle reference are gone.
struct Physical {
    fd: OwnedFd,
    len: u64,
}

impl Drop for Physical {
    fn drop(&mut self) {
        memory::uncharge(self.len);
    }
}

/// What cuMemGetAllocationPropertiesFromHandle gives back.
#[derive(Clone, Copy)]
struct Props {
    handle_types: u32,
    alloc_flags: [u8; 8],
}

/// A live allocation handle: the user's references (cuMemCreate and each
/// cuMemRetainAllocationHandle add one, cuMemRelease drops one).
struct Handle {
    phys: Arc<Physical>,
    retains: u32,
    props: Props,
}

/// One cuMemMap: `len` bytes of `phys` from `offset`, with an access flag per granule.
struct Mapping {
    len: u64,
    handle: u64,
    phys: Arc<Physical>,
    props: Props,
    access: Vec<u8>,
}

/// One reservation and what is mapped in it. `epoch` is shared by the table runs published for
/// it; when every clone of an old epoch is gone, no kernel or copy uses the old runs.
/// `retiring` holds ranges being unmapped while their users finish: nothing may be mapped there
/// and the reservation cannot be freed until they are back to reserved.
struct Reservation {
    len: u64,
    ctx_id: u64,
    mappings: BTreeMap<u64, Mapping>,
    epoch: Arc<()>,
    retiring: Vec<(u64, u64)>,
}

#[derive(Default)]
struct State {
    reservations: BTreeMap<u64, Reservation>,
    handles: BTreeMap<u64, Handle>,
}

static STATE: Mutex<Option<State>> = Mutex::new(None);
/// Handle values: opaque, nonzero, never reused.
static NEXT_HANDLE: AtomicU64 = AtomicU64::new(0x5c_0000_0001);
/// Signalled when a published run's last holder lets go.
static RETIRED: (Mutex<()>, Condvar) = (Mutex::new(()), Condvar::new());

fn state() -> MutexGuard<'static, Option<State>> {
    // Every update is completed before the lock is released or fails before changing anything.
    STATE.lock().unwrap_or_else(PoisonError::into_inner)
}

fn invalid() -> CUresult {
    CUresult::CUDA_ERROR_INVALID_VALUE
}

/// The token each published run holds; dropping the last holder of a run wakes waiters.
struct Token(Option<Arc<()>>);

impl Drop for Token {
    fn drop(&mut self) {
        // Let go of the epoch first, so a woken waiter sees the count already lowered.
        drop(self.0.take());
        let _g = RETIRED.0.lock().unwrap_or_else(PoisonError::into_inner);
        RETIRED.1.notify_all();
    }
}

/// Waits until every run of an old epoch is dropped (kernels and copies using it have ended).
fn wait_retired(old: Weak<()>) {
    let mut g = RETIRED.0.lock().unwrap_or_else(PoisonError::into_inner);
    while old.strong_count() > 0 {
        g = RETIRED
            .1
            .wait_timeout(g, Duration::from_millis(20))
            .unwrap_or_else(PoisonError::into_inner)
            .0;
    }
}

/// Rebuilds the table's runs for one reservation; returns the previous epoch, which the caller
/// waits on before making pages inaccessible.
fn publish(base: u64, res: &mut Reservation) -> Weak<()> {
    let epoch = Arc::new(());
    let mut runs: Vec<(u64, u64)> = Vec::new();
    for (&start, m) in &res.mappings {
        for (i, &a) in m.access.iter().enumerate() {
            if a == 0 {
                continue;
            }
            let addr = start + i as u64 * GRANULARITY;
            match runs.last_mut() {
                Some((s, len)) if *s + *len == addr => *len += GRANULARITY,
                _ => runs.push((addr, GRANULARITY)),
            }
        }
    }
    let views = runs
        .into_iter()
        .map(|(addr, len)| View {
            addr,
            len,
            owner: Box::new(Token(Some(Arc::clone(&epoch)))),
        })
        .collect();
    let old = std::mem::replace(&mut res.epoch, epoch);
    memory::replace_views(res.ctx_id, base, base + res.len, views);
    Arc::downgrade(&old)
}

fn page_size() -> u64 {
    // SAFETY: sysconf has no memory-safety preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u64::try_from(n).unwrap_or(4096).max(4096)
}

/// Reserves `size` bytes of inaccessible address space aligned to `align`, at `hint` if free.
fn os_reserve(size: u64, align: u64, hint: u64) -> CuResult<u64> {
    let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE;
    let size_us = usize::try_from(size).map_err(|_| CUresult::CUDA_ERROR_OUT_OF_MEMORY)?;
    if hint != 0 && hint.is_multiple_of(align) {
        // SAFETY: MAP_FIXED_NOREPLACE never replaces an existing mapping; PROT_NONE anonymous
        // memory touches nothing of ours.
        let p = unsafe {
            libc::mmap(
                hint as *mut libc::c_void,
                size_us,
                libc::PROT_NONE,
                flags | libc::MAP_FIXED_NOREPLACE,
                -1,
                0,
            )
        };
        if p != libc::MAP_FAILED {
            if p as u64 == hint {
                return Ok(hint);
            }
            // An old kernel ignoring the flag placed it elsewhere: give it back.
            // SAFETY: `p` is the mapping just made, of `size_us` bytes.
            unsafe { libc::munmap(p, size_us) };
        }
    }
    let total = size
        .checked_add(align)
        .and_then(|n| usize::try_from(n).ok())
        .ok_or(CUresult::CUDA_ERROR_OUT_OF_MEMORY)?;
    // SAFETY: a fresh PROT_NONE anonymous mapping at an address the kernel chooses.
    let p = unsafe { libc::mmap(std::ptr::null_mut(), total, libc::PROT_NONE, flags, -1, 0) };
    if p == libc::MAP_FAILED {
        return Err(CUresult::CUDA_ERROR_OUT_OF_MEMORY);
    }
    let start = p as u64;
    let base = start.div_ceil(align) * align;
    let (head, tail) = (base - start, start + total as u64 - (base + size));
    // SAFETY: both trims lie inside the mapping just made and outside [base, base + size).
    unsafe {
        if head > 0 {
            libc::munmap(p, head as usize);
        }
        if tail > 0 {
            libc::munmap((base + size) as *mut libc::c_void, tail as usize);
        }
    }
    Ok(base)
}

/// Puts `[addr, addr + len)` back to reserved, inaccessible, unbacked address space.
fn os_unback(addr: u64, len: u64) {
    // SAFETY: the range lies inside one of our reservations and nothing uses it any more (the
    // caller withdrew its runs and waited); MAP_FIXED replaces only our own mapping there.
    let p = unsafe {
        libc::mmap(
            addr as *mut libc::c_void,
            len as usize,
            libc::PROT_NONE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE | libc::MAP_FIXED,
            -1,
            0,
        )
    };
    debug_assert!(
        p != libc::MAP_FAILED,
        "re-reserving an unmapped range failed"
    );
}

fn os_protect(addr: u64, len: u64, access: u8) -> CuResult<()> {
    let prot = if access == 0 {
        libc::PROT_NONE
    } else {
        libc::PROT_READ | libc::PROT_WRITE
    };
    // SAFETY: the range is a whole-granule part of one of our mappings.
    let r = unsafe { libc::mprotect(addr as *mut libc::c_void, len as usize, prot) };
    if r != 0 {
        return Err(CUresult::CUDA_ERROR_OUT_OF_MEMORY);
    }
    Ok(())
}

/// Checks an allocation's properties: pinned memory on one of softcuda's devices (all share the
/// host's memory), no shareable handle types
/// (`allow_handle_types` lets the granularity query accept them: the answer is the same).
fn check_prop(prop: &RawAllocationProp, allow_handle_types: bool) -> CuResult<()> {
    if prop.kind != 1 {
        return Err(invalid());
    }
    match prop.location.kind {
        1 => crate::device::check(prop.location.id)?,
        2..=4 => return Err(CUresult::CUDA_ERROR_NOT_SUPPORTED),
        _ => return Err(invalid()),
    }
    if prop.requested_handle_types != 0 && !allow_handle_types {
        return Err(CUresult::CUDA_ERROR_NOT_SUPPORTED);
    }
    Ok(())
}

fn check_location(loc: &RawLocation) -> CuResult<()> {
    match loc.kind {
        1 => crate::device::check(loc.id),
        _ => Err(invalid()),
    }
}

fn aligned(v: u64) -> bool {
    v.is_multiple_of(GRANULARITY)
}

/// cuMemGetAllocationGranularity.
pub(crate) fn granularity(prop: &RawAllocationProp, option: u32) -> CuResult<u64> {
    driver::ensure_init()?;
    if option > 1 {
        return Err(invalid());
    }
    check_prop(prop, true)?;
    Ok(GRANULARITY)
}

/// cuMemAddressReserve: size and hint in whole host pages, alignment a power of two or 0.
pub(crate) fn reserve(size: u64, alignment: u64, hint: u64, flags: u64) -> CuResult<u64> {
    let ctx = context::live()?;
    let page = page_size();
    if size == 0 || !size.is_multiple_of(page) || !hint.is_multiple_of(page) || flags != 0 {
        return Err(invalid());
    }
    if alignment != 0 && !alignment.is_power_of_two() {
        return Err(invalid());
    }
    let base = os_reserve(size, alignment.max(GRANULARITY), hint)?;
    let mut st = state();
    st.get_or_insert_with(State::default).reservations.insert(
        base,
        Reservation {
            len: size,
            ctx_id: ctx.id,
            mappings: BTreeMap::new(),
            epoch: Arc::new(()),
            retiring: Vec::new(),
        },
    );
    Ok(base)
}

/// cuMemAddressFree: the whole reservation, with nothing mapped in it.
pub(crate) fn address_free(ptr: u64, size: u64) -> CuResult<()> {
    driver::ensure_init()?;
    let mut st = state();
    let st = st.get_or_insert_with(State::default);
    match st.reservations.get(&ptr) {
        Some(r) if r.len == size && r.mappings.is_empty() && r.retiring.is_empty() => {}
        _ => return Err(invalid()),
    }
    st.reservations.remove(&ptr);
    // SAFETY: the whole reservation, ours, with no mapping (so no published run) left in it.
    unsafe { libc::munmap(ptr as *mut libc::c_void, size as usize) };
    Ok(())
}

/// cuMemCreate: `size` bytes (a multiple of the granularity) of device memory.
pub(crate) fn create(size: u64, prop: &RawAllocationProp, flags: u64) -> CuResult<u64> {
    context::live()?;
    if flags != 0 || size == 0 || !aligned(size) {
        return Err(invalid());
    }
    check_prop(prop, false)?;
    let len = i64::try_from(size).map_err(|_| CUresult::CUDA_ERROR_OUT_OF_MEMORY)?;
    memory::charge(size)?;
    // SAFETY: the name is a NUL-terminated literal; the flags are valid.
    let fd = unsafe { libc::memfd_create(c"softcuda-vmm".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        memory::uncharge(size);
        return Err(CUresult::CUDA_ERROR_OUT_OF_MEMORY);
    }
    // SAFETY: `fd` was just opened and is owned by nothing else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // Dropped on the error path below, giving the charge back.
    let phys = Arc::new(Physical { fd, len: size });
    // SAFETY: ftruncate on our own memfd; pages are allocated lazily, zero-filled.
    if unsafe { libc::ftruncate(phys.fd.as_raw_fd(), len) } != 0 {
        return Err(CUresult::CUDA_ERROR_OUT_OF_MEMORY);
    }
    let handle = NEXT_HANDLE.fetch_add(1, Ordering::Relaxed);
    let props = Props {
        handle_types: prop.requested_handle_types,
        alloc_flags: prop.alloc_flags,
    };
    state().get_or_insert_with(State::default).handles.insert(
        handle,
        Handle {
            phys,
            retains: 1,
            props,
        },
    );
    Ok(handle)
}

/// cuMemRelease: drops one reference; the memory goes when no reference and no mapping is left.
pub(crate) fn release(handle: u64) -> CuResult<()> {
    driver::ensure_init()?;
    let mut st = state();
    let st = st.get_or_insert_with(State::default);
    let h = st.handles.get_mut(&handle).ok_or_else(invalid)?;
    h.retains -= 1;
    if h.retains == 0 {
        st.handles.remove(&handle);
    }
    Ok(())
}

/// The reservation holding `[ptr, ptr + size)`.
fn reservation_of(st: &mut State, ptr: u64, size: u64) -> CuResult<(u64, &mut Reservation)> {
    let end = ptr.checked_add(size).ok_or_else(invalid)?;
    let (&base, res) = st
        .reservations
        .range_mut(..=ptr)
        .next_back()
        .ok_or_else(invalid)?;
    if end > base + res.len {
        return Err(invalid());
    }
    Ok((base, res))
}

/// cuMemMap: `size` bytes of `handle` from `offset` at `ptr`, inside a reservation, overlapping
/// no other mapping; inaccessible until cuMemSetAccess.
pub(crate) fn map(ptr: u64, size: u64, offset: u64, handle: u64, flags: u64) -> CuResult<()> {
    context::live()?;
    if flags != 0 || size == 0 {
        return Err(invalid());
    }
    let mut st = state();
    let st = st.get_or_insert_with(State::default);
    let h = st.handles.get(&handle).ok_or_else(invalid)?;
    // NVIDIA's driver (H200, 580) maps whole allocations only: a nonzero offset or a size other
    // than the allocation's is NOT_SUPPORTED, answered before any alignment check
    // (bench/h200-runs/2026-12-01-mid/tests.log).
    if offset != 0 || size != h.phys.len {
        return Err(CUresult::CUDA_ERROR_NOT_SUPPORTED);
    }
    if !aligned(ptr) {
        return Err(invalid());
    }
    let (phys, props) = (Arc::clone(&h.phys), h.props);
    let (_, res) = reservation_of(st, ptr, size)?;
    let end = ptr + size;
    let overlaps = res
        .mappings
        .range(..end)
        .next_back()
        .is_some_and(|(&s, m)| s + m.len > ptr)
        || res.retiring.iter().any(|&(s, l)| s < end && s + l > ptr);
    if overlaps {
        return Err(invalid());
    }
    // SAFETY: [ptr, end) lies in our reservation and holds no mapping, so MAP_FIXED replaces only
    // our own PROT_NONE placeholder; the memfd is at least offset + size bytes long.
    let p = unsafe {
        libc::mmap(
            ptr as *mut libc::c_void,
            size as usize,
            libc::PROT_NONE,
            libc::MAP_SHARED | libc::MAP_FIXED,
            phys.fd.as_raw_fd(),
            offset as libc::off_t,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(CUresult::CUDA_ERROR_OUT_OF_MEMORY);
    }
    res.mappings.insert(
        ptr,
        Mapping {
            len: size,
            handle,
            phys,
            props,
            access: vec![0; (size / GRANULARITY) as usize],
        },
    );
    Ok(())
}

/// The mappings exactly tiling `[ptr, ptr + size)` (whole mappings when `whole`, else any
/// granule-aligned part of them), as (start, end) clipped to the range.
fn tiling(res: &Reservation, ptr: u64, size: u64, whole: bool) -> CuResult<Vec<(u64, u64, u64)>> {
    let end = ptr + size;
    let mut at = ptr;
    let mut parts = Vec::new();
    let first = res.mappings.range(..=ptr).next_back().map(|(&s, _)| s);
    for (&s, m) in res.mappings.range(first.unwrap_or(ptr)..end) {
        let m_end = s + m.len;
        if m_end <= at {
            continue;
        }
        if s > at || (whole && (s != at || m_end > end)) {
            return Err(invalid());
        }
        parts.push((s, at, m_end.min(end)));
        at = m_end.min(end);
    }
    if at != end {
        return Err(invalid());
    }
    Ok(parts)
}

/// cuMemUnmap: whole mappings tiling the range; waits for running kernels and queued copies
/// still using them (without holding the state lock, so other calls go on meanwhile).
pub(crate) fn unmap(ptr: u64, size: u64) -> CuResult<()> {
    driver::ensure_init()?;
    if size == 0 || !aligned(ptr) || !aligned(size) {
        return Err(invalid());
    }
    let (base, removed, old) = {
        let mut st = state();
        let st = st.get_or_insert_with(State::default);
        let (base, res) = reservation_of(st, ptr, size)?;
        let parts = tiling(res, ptr, size, true)?;
        let removed: Vec<Mapping> = parts
            .iter()
            .filter_map(|&(s, _, _)| res.mappings.remove(&s))
            .collect();
        res.retiring.push((ptr, size));
        (base, removed, publish(base, res))
    };
    wait_retired(old);
    let mut st = state();
    // The reservation may have gone with its context meanwhile (then it is unmapped already).
    if let Some(res) = st.as_mut().and_then(|st| st.reservations.get_mut(&base))
        && let Some(i) = res.retiring.iter().position(|&r| r == (ptr, size))
    {
        os_unback(ptr, size);
        res.retiring.swap_remove(i);
    }
    drop(removed);
    Ok(())
}

/// cuMemSetAccess: the last descriptor for device 0 wins; the range is granule-aligned and
/// wholly mapped.
pub(crate) fn set_access(ptr: u64, size: u64, descs: &[RawAccessDesc]) -> CuResult<()> {
    context::live()?;
    if descs.is_empty() || size == 0 || !aligned(ptr) || !aligned(size) {
        return Err(invalid());
    }
    let mut access = 0;
    for d in descs {
        check_location(&d.location)?;
        access = match d.flags {
            0 => 0,
            1 => PROT_READ,
            3 => PROT_READWRITE,
            _ => return Err(invalid()),
        };
    }
    let mut st = state();
    let st = st.get_or_insert_with(State::default);
    let (base, res) = reservation_of(st, ptr, size)?;
    let parts = tiling(res, ptr, size, false)?;
    let mut revoked = false;
    for &(s, from, to) in &parts {
        let m = res.mappings.get_mut(&s).ok_or_else(invalid)?;
        let (i, j) = ((from - s) / GRANULARITY, (to - s) / GRANULARITY);
        for a in &mut m.access[i as usize..j as usize] {
            revoked |= *a != 0 && access == 0;
            *a = access;
        }
    }
    if revoked {
        // Withdraw first, wait for users, then make the pages inaccessible.
        wait_retired(publish(base, res));
        for &(_, from, to) in &parts {
            os_protect(from, to - from, access)?;
        }
    } else {
        for &(_, from, to) in &parts {
            os_protect(from, to - from, access)?;
        }
        publish(base, res);
    }
    Ok(())
}

/// cuMemGetAccess: the access flags of device 0 at `ptr` (which must be mapped).
pub(crate) fn get_access(location: &RawLocation, ptr: u64) -> CuResult<u64> {
    driver::ensure_init()?;
    check_location(location)?;
    let mut st = state();
    let st = st.get_or_insert_with(State::default);
    let (_, res) = reservation_of(st, ptr, 1)?;
    let (&s, m) = res.mappings.range(..=ptr).next_back().ok_or_else(invalid)?;
    if ptr >= s + m.len {
        return Err(invalid());
    }
    Ok(u64::from(m.access[((ptr - s) / GRANULARITY) as usize]))
}

/// cuMemRetainAllocationHandle: the handle mapped at `addr` (any address of the mapping), with
/// one more reference.
pub(crate) fn retain(addr: u64) -> CuResult<u64> {
    driver::ensure_init()?;
    let mut st = state();
    let st = st.get_or_insert_with(State::default);
    let (_, res) = reservation_of(st, addr, 1)?;
    let (&s, m) = res
        .mappings
        .range(..=addr)
        .next_back()
        .ok_or_else(invalid)?;
    if addr >= s + m.len {
        return Err(invalid());
    }
    let (handle, phys, props) = (m.handle, Arc::clone(&m.phys), m.props);
    st.handles
        .entry(handle)
        .and_modify(|h| h.retains += 1)
        .or_insert(Handle {
            phys,
            retains: 1,
            props,
        });
    Ok(handle)
}

/// cuMemGetAllocationPropertiesFromHandle.
pub(crate) fn properties(handle: u64) -> CuResult<RawAllocationProp> {
    driver::ensure_init()?;
    let mut st = state();
    let st = st.get_or_insert_with(State::default);
    let h = st.handles.get(&handle).ok_or_else(invalid)?;
    Ok(RawAllocationProp {
        kind: 1,
        requested_handle_types: h.props.handle_types,
        location: RawLocation { kind: 1, id: 0 },
        win32_handle_meta_data: std::ptr::null_mut(),
        alloc_flags: h.props.alloc_flags,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reservation_is_aligned_and_unbacked_until_released() {
        let base = os_reserve(4 * GRANULARITY, GRANULARITY, 0).unwrap();
        assert_eq!(base % GRANULARITY, 0);
        // SAFETY: the reservation just made, unmapped once.
        unsafe { libc::munmap(base as *mut libc::c_void, (4 * GRANULARITY) as usize) };
    }

    #[test]
    fn tiling_refuses_gaps_and_partial_mappings_when_whole() {
        let mk = |len| Mapping {
            len,
            handle: 1,
            phys: Arc::new(Physical {
                fd: std::fs::File::open("/dev/null").unwrap().into(),
                len: 0,
            }),
            props: Props {
                handle_types: 0,
                alloc_flags: [0; 8],
            },
            access: vec![0; (len / GRANULARITY) as usize],
        };
        let g = GRANULARITY;
        let mut res = Reservation {
            len: 8 * g,
            ctx_id: 0,
            mappings: BTreeMap::new(),
            epoch: Arc::new(()),
            retiring: Vec::new(),
        };
        res.mappings.insert(0, mk(2 * g));
        res.mappings.insert(2 * g, mk(2 * g));
        res.mappings.insert(6 * g, mk(g));
        assert_eq!(tiling(&res, 0, 4 * g, true).unwrap().len(), 2);
        assert!(tiling(&res, 0, 3 * g, true).is_err(), "half a mapping");
        assert_eq!(
            tiling(&res, g, 2 * g, false).unwrap(),
            vec![(0, g, 2 * g), (2 * g, 2 * g, 3 * g)]
        );
        assert!(tiling(&res, 2 * g, 5 * g, false).is_err(), "gap at 4g..6g");
    }
}
