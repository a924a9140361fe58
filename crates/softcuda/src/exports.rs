//! The one list of C entry points: every function softcuda exports under its `cuda.h` name.
//!
//! Each export is a thin shim: it checks the caller's pointers, calls safe Rust in a driver-object
//! module, and turns the `Result` into a `CUresult` inside `abi::guard`, which also turns
//! a panic into `CUDA_ERROR_UNKNOWN`. Enum parameters arrive as `c_uint` / `c_int`, never as the
//! Rust enum: a value from C outside the enum would be undefined behaviour in Rust.
//!
//! The functions are `pub` so the rlib's tests can call the C ABI directly; they are `unsafe`
//! because they take raw pointers from C.
#![allow(non_snake_case, clippy::missing_safety_doc)]

use std::ffi::{c_char, c_int, c_uint, c_void};

use cudarc::driver::sys::{
    CUDA_MEMCPY2D, CUcontext, CUdevice, CUdeviceptr, CUevent, CUfunction, CUhostFn, CUmodule,
    CUoccupancyB2DSize, CUresult, CUstream, CUuuid,
};

use crate::abi::{self, p};
use crate::copy;
use crate::launch::{self, Request};
use crate::memory::{self, Kind};
use crate::{
    capture, context, device, driver, event, jit, module, pool, procaddr, result_text, stream,
};

mod common;
mod graph;
mod graph_edit;
mod graph_generic;
mod graph_nodes;
mod images;
mod library;
mod link;
mod memop;
mod memory_calls;
mod per_thread;
mod pool_calls;
mod unsupported;
pub use common::*;
pub use graph::*;
pub use graph_edit::*;
pub use graph_generic::*;
pub use graph_nodes::*;
pub use images::*;
pub use library::*;
pub use link::*;
pub use memop::*;
pub use memory_calls::*;
pub use per_thread::*;
pub use pool_calls::*;
pub use unsupported::*;

/// A handle's value (handles are opaque pointers in cuda.h).
fn handle_value<T>(handle: *mut T) -> u64 {
    handle.addr() as u64
}

/// Identifies softcuda to [`crate::loader`]: NVIDIA's libcuda has no such symbol.
#[unsafe(no_mangle)]
pub extern "C" fn softcuda_abi_version() -> c_uint {
    1
}

exports! {
    /// Initialises the driver; required before any other call except version and error queries.
    fn cuInit(flags: c_uint) { driver::init(flags) }

    /// Reports the CUDA version this driver implements (13000).
    fn cuDriverGetVersion(version: *mut c_int) {
        // SAFETY: `version` is cuDriverGetVersion's out-pointer: NULL (refused) or writable per
        // cuda.h.
        unsafe { abi::write(version, driver::DRIVER_VERSION) }
    }

    /// Number of devices: `SOFTCUDA_DEVICES` (default 1).
    fn cuDeviceGetCount(count: *mut c_int) {
        driver::ensure_init()?;
        // SAFETY: `count` is cuDeviceGetCount's out-pointer: NULL (refused) or writable per cuda.h.
        unsafe { abi::write(count, driver::device_count()) }
    }

    /// The device handle for `ordinal`.
    fn cuDeviceGet(dev: *mut CUdevice, ordinal: c_int) {
        device::check(ordinal)?;
        // SAFETY: `dev` is cuDeviceGet's out-pointer: NULL (refused) or writable per cuda.h.
        unsafe { abi::write(dev, ordinal) }
    }

    /// The device name, NUL-terminated and truncated to `len`.
    fn cuDeviceGetName(name: *mut c_char, len: c_int, dev: CUdevice) {
        device::check(dev)?;
        // SAFETY: `name` is NULL (refused) or holds `len` writable bytes per cuda.h.
        unsafe { abi::copy_c_string(device::NAME, name, len) }
    }

    /// One device attribute; unknown attributes are `CUDA_ERROR_INVALID_VALUE`.
    fn cuDeviceGetAttribute(value: *mut c_int, attrib: c_uint, dev: CUdevice) {
        device::check(dev)?;
        let v = device::attribute(attrib, dev)?;
        // SAFETY: `value` is cuDeviceGetAttribute's out-pointer: NULL (refused) or writable per
        // cuda.h.
        unsafe { abi::write(value, v) }
    }

    /// Total device memory in bytes (`SOFTCUDA_MEMORY` or 16 GiB).
    fn cuDeviceTotalMem_v2(bytes: *mut usize, dev: CUdevice) {
        device::check(dev)?;
        // SAFETY: `bytes` is cuDeviceTotalMem_v2's out-pointer: NULL (refused) or writable per
        // cuda.h.
        unsafe { abi::write(bytes, usize::try_from(driver::total_memory()).unwrap_or(usize::MAX)) }
    }


    /// Compute capability 9.0 (deprecated in cuda.h, still used by older programs).
    fn cuDeviceComputeCapability(major: *mut c_int, minor: *mut c_int, dev: CUdevice) {
        device::check(dev)?;
        // SAFETY: `major` is cuDeviceComputeCapability's out-pointer: NULL (refused) or writable
        // per cuda.h.
        unsafe { abi::write(major, 9) }?;
        // SAFETY: `minor` is cuDeviceComputeCapability's out-pointer: NULL (refused) or writable
        // per cuda.h.
        unsafe { abi::write(minor, 0) }
    }

    /// The device's UUID (same as [`cuDeviceGetUuid`]: there is no MIG).
    fn cuDeviceGetUuid_v2(uuid: *mut CUuuid, dev: CUdevice) {
        device::check(dev)?;
        // SAFETY: `uuid` is cuDeviceGetUuid_v2's out-pointer: NULL (refused) or writable per
        // cuda.h.
        unsafe { abi::write(uuid, CUuuid { bytes: device::uuid(dev).map(|b| b as c_char) }) }
    }

    /// The name of a `CUresult` as a static C string; unknown codes are `CUDA_ERROR_INVALID_VALUE`.
    fn cuGetErrorName(error: c_uint, out: *mut *const c_char) {
        match result_text::name(error) {
            // SAFETY: `out` is cuGetErrorName's out-pointer: NULL (refused) or writable per cuda.h.
            Some(name) => unsafe { abi::write(out, name.as_ptr()) },
            None => {
                // NVIDIA sets the out-pointer to NULL for an unknown code.
                if !out.is_null() {
                    // SAFETY: `out` is cuGetErrorName's out-pointer: NULL (refused) or writable per
                    // cuda.h.
                    unsafe { abi::write(out, std::ptr::null()) }?;
                }
                Err(CUresult::CUDA_ERROR_INVALID_VALUE)
            }
        }
    }

    /// The message of a `CUresult` as a static C string; unknown codes are `CUDA_ERROR_INVALID_VALUE`.
    fn cuGetErrorString(error: c_uint, out: *mut *const c_char) {
        match result_text::message(error) {
            // SAFETY: `out` is cuGetErrorString's out-pointer: NULL (refused) or writable per
            // cuda.h.
            Some(msg) => unsafe { abi::write(out, msg.as_ptr()) },
            None => {
                if !out.is_null() {
                    // SAFETY: `out` is cuGetErrorString's out-pointer: NULL (refused) or writable
                    // per cuda.h.
                    unsafe { abi::write(out, std::ptr::null()) }?;
                }
                Err(CUresult::CUDA_ERROR_INVALID_VALUE)
            }
        }
    }

    /// The driver function for a base name at a CUDA version (see `procaddr`); `symbolStatus`
    /// may be NULL. Not found: `CUDA_ERROR_NOT_FOUND` with `*pfn` NULL.
    fn cuGetProcAddress_v2(symbol: *const c_char, pfn: *mut *mut c_void, cudaVersion: c_int, flags: u64, symbolStatus: *mut c_uint) {
        // SAFETY: the pointers are NULL or valid as cuda.h documents for cuGetProcAddress_v2: the
        // helper's contract.
        unsafe { abi::write_proc_address(symbol, pfn, cudaVersion, flags, symbolStatus) }
    }

    /// [`cuGetProcAddress_v2`] without the status out-parameter (CUDA 11.3's signature).
    fn cuGetProcAddress(symbol: *const c_char, pfn: *mut *mut c_void, cudaVersion: c_int, flags: u64) {
        // SAFETY: the pointers are NULL or valid as cuda.h documents for cuGetProcAddress: the
        // helper's contract.
        unsafe { abi::write_proc_address(symbol, pfn, cudaVersion, flags, std::ptr::null_mut()) }
    }

    /// NVIDIA's private export tables: softcuda has none, so every id is `CUDA_ERROR_INVALID_VALUE`
    /// with `*ppExportTable` NULL (NVRTC goes on without them; libcudart fails its first device
    /// call with that error: see `procaddr`).
    fn cuGetExportTable(ppExportTable: *mut *const c_void, pExportTableId: *const CUuuid) {
        if ppExportTable.is_null() {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        }
        // SAFETY: `ppExportTable` is cuGetExportTable's out-pointer: NULL (refused) or writable per
        // cuda.h.
        unsafe { abi::write(ppExportTable, std::ptr::null()) }?;
        procaddr::export_table(pExportTableId.is_null())
    }

    // ---- primary context -------------------------------------------------------------------

    /// Retains device 0's primary context (creating it if inactive); the handle value is stable.
    fn cuDevicePrimaryCtxRetain(pctx: *mut CUcontext, dev: CUdevice) {
        device::check(dev)?;
        if pctx.is_null() {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        }
        let handle = context::primary_retain(dev)?;
        // SAFETY: `pctx` is cuDevicePrimaryCtxRetain's out-pointer: NULL (refused) or writable per
        // cuda.h.
        unsafe { abi::write(pctx, p(handle)) }
    }

    /// Releases one reference; at zero the primary context and all it owns are destroyed.
    fn cuDevicePrimaryCtxRelease_v2(dev: CUdevice) {
        device::check(dev)?;
        context::primary_release(dev)
    }

    /// Destroys the primary context and everything in it now.
    fn cuDevicePrimaryCtxReset_v2(dev: CUdevice) {
        device::check(dev)?;
        context::primary_reset(dev)
    }

    /// The primary context's flags and whether it is active.
    fn cuDevicePrimaryCtxGetState(dev: CUdevice, flags: *mut c_uint, active: *mut c_int) {
        device::check(dev)?;
        if flags.is_null() || active.is_null() {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        }
        let (f, a) = context::primary_state(dev)?;
        // SAFETY: `flags` is cuDevicePrimaryCtxGetState's out-pointer: NULL (refused) or writable
        // per cuda.h.
        unsafe { abi::write(flags, f) }?;
        // SAFETY: `active` is cuDevicePrimaryCtxGetState's out-pointer: NULL (refused) or writable
        // per cuda.h.
        unsafe { abi::write(active, c_int::from(a)) }
    }

    /// Sets the flags the primary context has (and will be created with).
    fn cuDevicePrimaryCtxSetFlags_v2(dev: CUdevice, flags: c_uint) {
        device::check(dev)?;
        context::primary_set_flags(dev, flags)
    }

    // ---- contexts --------------------------------------------------------------------------

    /// Creates a context and makes it current on this thread.
    fn cuCtxCreate_v2(pctx: *mut CUcontext, flags: c_uint, dev: CUdevice) {
        device::check(dev)?;
        if pctx.is_null() {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        }
        // SAFETY: `pctx` is cuCtxCreate_v2's out-pointer: NULL (refused) or writable per cuda.h.
        unsafe { abi::write(pctx, p(context::create(flags, dev)?)) }
    }

    /// cuCtxCreate with execution-affinity parameters (an SM-count affinity cannot be honoured:
    /// there are no SMs to set aside, so it is `CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY`).
    fn cuCtxCreate_v3(pctx: *mut CUcontext, params: *mut abi::RawExecAffinityParam, num_params: c_int, flags: c_uint, dev: CUdevice) {
        device::check(dev)?;
        // SAFETY: the pointers are NULL or valid as cuda.h documents for cuCtxCreate_v3: the
        // helper's contract.
        unsafe { abi::check_exec_affinity(params, num_params) }?;
        if pctx.is_null() {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        }
        // SAFETY: `pctx` is cuCtxCreate_v3's out-pointer: NULL (refused) or writable per cuda.h.
        unsafe { abi::write(pctx, p(context::create(flags, dev)?)) }
    }

    /// cuCtxCreate with creation parameters (CUDA 13's `cuCtxCreate`): NULL or a zeroed
    /// `CUctxCreateParams` create a plain context; affinity is checked as in [`cuCtxCreate_v3`];
    /// CIG (graphics-shared contexts) is `CUDA_ERROR_NOT_SUPPORTED`.
    fn cuCtxCreate_v4(pctx: *mut CUcontext, params: *const abi::RawCtxCreateParams, flags: c_uint, dev: CUdevice) {
        device::check(dev)?;
        // SAFETY: the pointers are NULL or valid as cuda.h documents for cuCtxCreate_v4: the
        // helper's contract.
        unsafe { abi::check_ctx_create_params(params) }?;
        if pctx.is_null() {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        }
        // SAFETY: `pctx` is cuCtxCreate_v4's out-pointer: NULL (refused) or writable per cuda.h.
        unsafe { abi::write(pctx, p(context::create(flags, dev)?)) }
    }

    /// Whether an execution-affinity kind is supported: none is (no SMs to partition).
    fn cuDeviceGetExecAffinitySupport(pi: *mut c_int, kind: c_uint, dev: CUdevice) {
        device::check(dev)?;
        if kind != 0 {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        }
        // SAFETY: `pi` is cuDeviceGetExecAffinitySupport's out-pointer: NULL (refused) or writable
        // per cuda.h.
        unsafe { abi::write(pi, 0) }
    }

    /// Destroys a context made by cuCtxCreate.
    fn cuCtxDestroy_v2(ctx: CUcontext) { context::destroy(handle_value(ctx)) }

    /// Makes `ctx` current on this thread (NULL unsets it).
    fn cuCtxSetCurrent(ctx: CUcontext) { context::set_current(handle_value(ctx)) }

    /// The current context of this thread, NULL when none (even if it has been destroyed).
    fn cuCtxGetCurrent(pctx: *mut CUcontext) {
        driver::ensure_init()?;
        // SAFETY: `pctx` is cuCtxGetCurrent's out-pointer: NULL (refused) or writable per cuda.h.
        unsafe { abi::write(pctx, p(context::current_handle())) }
    }

    /// Pushes `ctx` on this thread's context stack.
    fn cuCtxPushCurrent_v2(ctx: CUcontext) { context::push_current(handle_value(ctx)) }

    /// Pops this thread's current context; `pctx` may be NULL.
    fn cuCtxPopCurrent_v2(pctx: *mut CUcontext) {
        let popped = context::pop_current()?;
        if !pctx.is_null() {
            // SAFETY: `pctx` is cuCtxPopCurrent_v2's out-pointer: NULL (refused) or writable per
            // cuda.h.
            unsafe { abi::write(pctx, p(popped)) }?;
        }
        Ok(())
    }

    /// The device of the current context (always 0).
    fn cuCtxGetDevice(dev: *mut CUdevice) {
        let ctx = context::current()?;
        ctx.check_usable()?;
        // SAFETY: `dev` is cuCtxGetDevice's out-pointer: NULL (refused) or writable per cuda.h.
        unsafe { abi::write(dev, ctx.device) }
    }

    /// Whether `dev`'s contexts can use `peer`'s memory: yes between two different devices
    /// (all of it is host memory), no for a device and itself.
    fn cuDeviceCanAccessPeer(canAccess: *mut c_int, dev: CUdevice, peer: CUdevice) {
        device::check(dev)?;
        device::check(peer)?;
        // SAFETY: `canAccess` is cuDeviceCanAccessPeer's out-pointer: NULL (refused) or writable
        // per cuda.h.
        unsafe { abi::write(canAccess, c_int::from(dev != peer)) }
    }

    /// A `CUdevice_P2PAttribute` of two different devices.
    fn cuDeviceGetP2PAttribute(value: *mut c_int, attrib: c_uint, src: CUdevice, dst: CUdevice) {
        device::check(src)?;
        device::check(dst)?;
        if src == dst {
            return Err(CUresult::CUDA_ERROR_INVALID_DEVICE);
        }
        // SAFETY: `value` is cuDeviceGetP2PAttribute's out-pointer: NULL (refused) or writable per
        // cuda.h.
        unsafe { abi::write(value, device::p2p_attribute(attrib)?) }
    }

    /// Lets the current context's kernels use `peer`'s allocations (`flags` must be 0).
    fn cuCtxEnablePeerAccess(peer: CUcontext, flags: c_uint) {
        let ctx = context::live()?;
        if flags != 0 {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        }
        let peer = context::resolve(handle_value(peer)).map_err(|_| CUresult::CUDA_ERROR_INVALID_CONTEXT)?;
        ctx.enable_peer(&peer)
    }

    /// Undoes [`cuCtxEnablePeerAccess`].
    fn cuCtxDisablePeerAccess(peer: CUcontext) {
        let ctx = context::live()?;
        let peer = context::resolve(handle_value(peer)).map_err(|_| CUresult::CUDA_ERROR_INVALID_CONTEXT)?;
        ctx.disable_peer(&peer)
    }

    /// Waits for all work in the current context; reports a sticky fault.
    fn cuCtxSynchronize() {
        let r = context::current()?.synchronize();
        pool::release_over_threshold();
        r
    }

    /// A context's unique id (new on every creation); NULL means the current context.
    fn cuCtxGetId(ctx: CUcontext, id: *mut u64) {
        let c = if ctx.is_null() { context::current()? } else { context::resolve(handle_value(ctx))? };
        // SAFETY: `id` is cuCtxGetId's out-pointer: NULL (refused) or writable per cuda.h.
        unsafe { abi::write(id, c.id) }
    }

    /// The API version of a context (NULL: current).
    fn cuCtxGetApiVersion(ctx: CUcontext, version: *mut c_uint) {
        if ctx.is_null() { context::current()?; } else { context::resolve(handle_value(ctx))?; }
        // SAFETY: `version` is cuCtxGetApiVersion's out-pointer: NULL (refused) or writable per
        // cuda.h.
        unsafe { abi::write(version, context::API_VERSION) }
    }

    /// The current context's flags.
    fn cuCtxGetFlags(flags: *mut c_uint) {
        // SAFETY: `flags` is cuCtxGetFlags's out-pointer: NULL (refused) or writable per cuda.h.
        unsafe { abi::write(flags, context::current()?.flags()) }
    }

    /// Replaces the current context's flags.
    fn cuCtxSetFlags(flags: c_uint) {
        context::current()?.set_flags(flags);
        Ok(())
    }

    /// Sets a `CU_LIMIT_*` of the current context.
    fn cuCtxSetLimit(limit: c_uint, value: usize) { context::live()?.set_limit(limit, abi::bytes(value)) }

    /// Reads a `CU_LIMIT_*` of the current context.
    fn cuCtxGetLimit(value: *mut usize, limit: c_uint) {
        let v = context::current()?.limit(limit)?;
        // SAFETY: `value` is cuCtxGetLimit's out-pointer: NULL (refused) or writable per cuda.h.
        unsafe { abi::write(value, usize::try_from(v).unwrap_or(usize::MAX)) }
    }

    /// Stream priorities: 0 (least) to -5 (greatest), as on H100/H200.
    fn cuCtxGetStreamPriorityRange(least: *mut c_int, greatest: *mut c_int) {
        context::current()?;
        // SAFETY: `least` is cuCtxGetStreamPriorityRange's out-pointer: NULL (refused) or writable
        // per cuda.h.
        if !least.is_null() { unsafe { abi::write(least, stream::LEAST_PRIORITY) }?; }
        // SAFETY: `greatest` is cuCtxGetStreamPriorityRange's out-pointer: NULL (refused) or
        // writable per cuda.h.
        if !greatest.is_null() { unsafe { abi::write(greatest, stream::GREATEST_PRIORITY) }?; }
        Ok(())
    }

    /// The current context's cache preference.
    fn cuCtxGetCacheConfig(config: *mut c_uint) {
        // SAFETY: `config` is cuCtxGetCacheConfig's out-pointer: NULL (refused) or writable per
        // cuda.h.
        unsafe { abi::write(config, context::current()?.cache_config()) }
    }

    /// Records a cache preference (no effect on a CPU).
    fn cuCtxSetCacheConfig(config: c_uint) { context::live()?.set_cache_config(config) }

    // ---- streams ---------------------------------------------------------------------------

    /// Creates a stream (`CU_STREAM_NON_BLOCKING` honoured) in the current context.
    fn cuStreamCreate(phStream: *mut CUstream, flags: c_uint) {
        if phStream.is_null() {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        }
        // SAFETY: `phStream` is cuStreamCreate's out-pointer: NULL (refused) or writable per
        // cuda.h.
        unsafe { abi::write(phStream, p(stream::create(flags, 0)?)) }
    }

    /// Creates a stream with a priority (clamped to the supported range, as NVIDIA does).
    fn cuStreamCreateWithPriority(phStream: *mut CUstream, flags: c_uint, priority: c_int) {
        if phStream.is_null() {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        }
        // SAFETY: `phStream` is cuStreamCreateWithPriority's out-pointer: NULL (refused) or
        // writable per cuda.h.
        unsafe { abi::write(phStream, p(stream::create(flags, priority)?)) }
    }

    /// Destroys a stream; work already queued still runs.
    fn cuStreamDestroy_v2(hStream: CUstream) { stream::destroy(handle_value(hStream)) }

    /// Waits for a stream; reports a sticky fault.
    fn cuStreamSynchronize(hStream: CUstream) {
        let (ctx, s) = stream::resolve_any(handle_value(hStream))?;
        capture::refuse(handle_value(hStream))?;
        s.synchronize();
        ctx.printf.flush();
        pool::release_over_threshold();
        ctx.check_usable()
    }

    /// `CUDA_ERROR_NOT_READY` while the stream has work queued or running.
    fn cuStreamQuery(hStream: CUstream) {
        let (ctx, s) = stream::resolve_any(handle_value(hStream))?;
        ctx.check_usable()?;
        capture::refuse(handle_value(hStream))?;
        if s.is_busy() { Err(CUresult::CUDA_ERROR_NOT_READY) } else { Ok(()) }
    }

    /// Makes later work on `hStream` wait for the event's latest record.
    fn cuStreamWaitEvent(hStream: CUstream, hEvent: CUevent, flags: c_uint) {
        event::stream_wait(handle_value(hStream), handle_value(hEvent), flags)
    }

    /// The stream's creation flags.
    fn cuStreamGetFlags(hStream: CUstream, flags: *mut c_uint) {
        let (_, s) = stream::resolve_any(handle_value(hStream))?;
        // SAFETY: `flags` is cuStreamGetFlags's out-pointer: NULL (refused) or writable per cuda.h.
        unsafe { abi::write(flags, s.flags) }
    }

    /// The stream's priority.
    fn cuStreamGetPriority(hStream: CUstream, priority: *mut c_int) {
        let (_, s) = stream::resolve_any(handle_value(hStream))?;
        // SAFETY: `priority` is cuStreamGetPriority's out-pointer: NULL (refused) or writable per
        // cuda.h.
        unsafe { abi::write(priority, s.priority) }
    }

    /// The stream's context.
    fn cuStreamGetCtx(hStream: CUstream, pctx: *mut CUcontext) {
        let (ctx, _) = stream::resolve_any(handle_value(hStream))?;
        // SAFETY: `pctx` is cuStreamGetCtx's out-pointer: NULL (refused) or writable per cuda.h.
        unsafe { abi::write(pctx, p(ctx.handle)) }
    }

    /// Whether the stream is capturing (`CUstreamCaptureStatus`).
    fn cuStreamIsCapturing(hStream: CUstream, status: *mut c_uint) {
        // SAFETY: `status` is cuStreamIsCapturing's out-pointer: NULL (refused) or writable per
        // cuda.h.
        unsafe { abi::write(status, capture::status(handle_value(hStream))?.0) }
    }

    /// Runs `fn_(userData)` on the stream's worker, in order with the stream's other work.
    fn cuLaunchHostFunc(hStream: CUstream, fn_: CUhostFn, userData: *mut c_void) {
        let f = fn_.ok_or(CUresult::CUDA_ERROR_INVALID_VALUE)?;
        stream::host_func(handle_value(hStream), f, userData.expose_provenance())
    }

    // ---- events ----------------------------------------------------------------------------

    /// Creates an event in the current context.
    fn cuEventCreate(phEvent: *mut CUevent, flags: c_uint) {
        if phEvent.is_null() {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        }
        // SAFETY: `phEvent` is cuEventCreate's out-pointer: NULL (refused) or writable per cuda.h.
        unsafe { abi::write(phEvent, p(event::create(flags)?)) }
    }

    /// Destroys an event.
    fn cuEventDestroy_v2(hEvent: CUevent) { event::destroy(handle_value(hEvent)) }

    /// Records the event on a stream.
    fn cuEventRecord(hEvent: CUevent, hStream: CUstream) { event::record(handle_value(hEvent), handle_value(hStream)) }

    /// Records the event on a stream; only flags 0 (CU_EVENT_RECORD_DEFAULT) is supported.
    fn cuEventRecordWithFlags(hEvent: CUevent, hStream: CUstream, flags: c_uint) {
        if flags != 0 {
            return Err(CUresult::CUDA_ERROR_NOT_SUPPORTED);
        }
        event::record(handle_value(hEvent), handle_value(hStream))
    }

    /// `CUDA_ERROR_NOT_READY` until the recorded work has run.
    fn cuEventQuery(hEvent: CUevent) { event::query(handle_value(hEvent)) }

    /// Waits for the recorded work.
    fn cuEventSynchronize(hEvent: CUevent) {
        let r = event::synchronize(handle_value(hEvent));
        pool::release_over_threshold();
        r
    }

    /// Milliseconds between two completed, timed events.
    fn cuEventElapsedTime(ms: *mut f32, hStart: CUevent, hEnd: CUevent) {
        if ms.is_null() {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        }
        // SAFETY: `ms` is cuEventElapsedTime's out-pointer: NULL (refused) or writable per cuda.h.
        unsafe { abi::write(ms, event::elapsed_ms(handle_value(hStart), handle_value(hEnd))?) }
    }


    // ---- modules and functions -------------------------------------------------------------

    /// Loads a module from PTX text (or a fatbin holding PTX) into the current context.
    fn cuModuleLoadData(module: *mut CUmodule, image: *const c_void) {
        // SAFETY: `module` is NULL (refused) or writable and `image` NULL (refused) or a PTX text
        // or fatbin, per cuda.h: load_module's contract.
        unsafe { jit::load_module(module, image, 0, std::ptr::null(), std::ptr::null_mut()) }
    }

    /// Loads a module from a fatbin (or anything cuModuleLoadData takes): its PTX entry is
    /// loaded; a fatbin holding only cubins is `CUDA_ERROR_NO_BINARY_FOR_GPU`.
    fn cuModuleLoadFatBinary(module: *mut CUmodule, fatCubin: *const c_void) {
        // SAFETY: `module` is NULL (refused) or writable and `fatCubin` NULL (refused) or a
        // fatbin, per cuda.h: load_module's contract.
        unsafe { jit::load_module(module, fatCubin, 0, std::ptr::null(), std::ptr::null_mut()) }
    }

    /// [`cuModuleLoadData`] with JIT options; the error log names line:col of a PTX error.
    fn cuModuleLoadDataEx(module: *mut CUmodule, image: *const c_void, numOptions: c_uint, options: *const c_uint, optionValues: *mut *mut c_void) {
        // SAFETY: as in cuModuleLoadData, and the option arrays hold `numOptions` entries each
        // (cuda.h); load_module checks their shape.
        unsafe { jit::load_module(module, image, numOptions, options, optionValues) }
    }

    /// Loads a module from a PTX file.
    fn cuModuleLoad(module: *mut CUmodule, fname: *const c_char) {
        // SAFETY: `fname` is NULL (refused) or NUL-terminated: cuModuleLoad's contract.
        let (_, bytes) = unsafe { abi::read_image_file(fname) }?;
        // SAFETY: `module` is NULL (refused) or writable per cuda.h; the image is our own
        // NUL-terminated copy of the file, alive for the call.
        unsafe { jit::load_module(module, bytes.as_ptr().cast(), 0, std::ptr::null(), std::ptr::null_mut()) }
    }

    /// Unloads a module after the context's queued work has finished.
    fn cuModuleUnload(hmod: CUmodule) { module::unload(handle_value(hmod)) }

    /// The kernel named `name` (the same handle every time).
    fn cuModuleGetFunction(hfunc: *mut CUfunction, hmod: CUmodule, name: *const c_char) {
        if hfunc.is_null() {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        }
        // SAFETY: `name` is NULL (refused) or NUL-terminated: the export's contract.
        let name = unsafe { abi::symbol_name(name) }?;
        // SAFETY: `hfunc` is cuModuleGetFunction's out-pointer: NULL (refused) or writable per
        // cuda.h.
        unsafe { abi::write(hfunc, p(module::function(handle_value(hmod), name)?)) }
    }

    /// Address and size of a module global; either out-pointer may be NULL.
    fn cuModuleGetGlobal_v2(dptr: *mut CUdeviceptr, size: *mut usize, hmod: CUmodule, name: *const c_char) {
        // SAFETY: `name` is NULL (refused) or NUL-terminated: the export's contract.
        let name = unsafe { abi::symbol_name(name) }?;
        let global = module::global(handle_value(hmod), name)?;
        // SAFETY: `dptr` and `size` are cuModuleGetGlobal_v2's out-pointers: each NULL or
        // writable per cuda.h.
        unsafe { abi::write_global(dptr, size, global) }
    }

    /// One function attribute (threads, shared/const/local sizes, registers, versions, ...).
    fn cuFuncGetAttribute(pi: *mut c_int, attrib: c_uint, hfunc: CUfunction) {
        let v = module::attribute(handle_value(hfunc), attrib)?;
        // SAFETY: `pi` is cuFuncGetAttribute's out-pointer: NULL (refused) or writable per cuda.h.
        unsafe { abi::write(pi, v) }
    }

    /// Sets the dynamic shared memory limit or the carveout preference.
    fn cuFuncSetAttribute(hfunc: CUfunction, attrib: c_uint, value: c_int) {
        module::set_attribute(handle_value(hfunc), attrib, value)
    }

    /// Records a cache preference (no effect on a CPU).
    fn cuFuncSetCacheConfig(hfunc: CUfunction, config: c_uint) {
        module::get_function(handle_value(hfunc))?;
        if config > 3 { Err(CUresult::CUDA_ERROR_INVALID_VALUE) } else { Ok(()) }
    }

    /// Offset and size of kernel parameter `index`.
    fn cuFuncGetParamInfo(hfunc: CUfunction, index: usize, offset: *mut usize, size: *mut usize) {
        let (o, n) = module::param_info(handle_value(hfunc), index)?;
        if !offset.is_null() {
            // SAFETY: `offset` is cuFuncGetParamInfo's out-pointer: NULL (refused) or writable per
            // cuda.h.
            unsafe { abi::write(offset, o as usize) }?;
        }
        if !size.is_null() {
            // SAFETY: `size` is cuFuncGetParamInfo's out-pointer: NULL (refused) or writable per
            // cuda.h.
            unsafe { abi::write(size, n as usize) }?;
        }
        Ok(())
    }

    /// Launches a kernel on a stream; parameters by `kernelParams` or the `extra` buffer form.
    fn cuLaunchKernel(f: CUfunction, gx: c_uint, gy: c_uint, gz: c_uint, bx: c_uint, by: c_uint, bz: c_uint, sharedMemBytes: c_uint, hStream: CUstream, kernelParams: *mut *mut c_void, extra: *mut *mut c_void) {
        // SAFETY: `kernelParams` is NULL or holds one pointer per kernel parameter, each to a
        // value of the parameter's size, and `extra` is NULL or a CU_LAUNCH_PARAM list (cuda.h):
        // launch's contract.
        unsafe {
            launch::launch(&Request {
                function: handle_value(f),
                grid: [gx, gy, gz],
                block: [bx, by, bz],
                shared: sharedMemBytes,
                stream: handle_value(hStream),
                params: kernelParams,
                extra,
            })
        }
    }

    /// Resident blocks per SM for a block size and dynamic shared memory.
    fn cuOccupancyMaxActiveBlocksPerMultiprocessor(numBlocks: *mut c_int, func: CUfunction, blockSize: c_int, dynamicSMemSize: usize) {
        // SAFETY: `numBlocks` is cuOccupancyMaxActiveBlocksPerMultiprocessor's out-pointer: NULL
        // (refused) or writable per cuda.h.
        unsafe { abi::write(numBlocks, module::occupancy(handle_value(func), blockSize, dynamicSMemSize)?) }
    }

    /// [`cuOccupancyMaxActiveBlocksPerMultiprocessor`]; the only flag (caching override) changes nothing.
    fn cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(numBlocks: *mut c_int, func: CUfunction, blockSize: c_int, dynamicSMemSize: usize, flags: c_uint) {
        if flags > 1 {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        }
        // SAFETY: `numBlocks` is cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags's out-
        // pointer: NULL (refused) or writable per cuda.h.
        unsafe { abi::write(numBlocks, module::occupancy(handle_value(func), blockSize, dynamicSMemSize)?) }
    }


    /// The block size with the best occupancy and the grid that fills the device with it.
    fn cuOccupancyMaxPotentialBlockSize(minGridSize: *mut c_int, blockSize: *mut c_int, func: CUfunction, b2d: CUoccupancyB2DSize, dynamicSMemSize: usize, blockSizeLimit: c_int) {
        // SAFETY: the pointers are NULL or valid as cuda.h documents for
        // cuOccupancyMaxPotentialBlockSize: the helper's contract.
        unsafe { abi::write_potential_block_size(minGridSize, blockSize, handle_value(func), b2d, dynamicSMemSize, blockSizeLimit) }
    }

    /// [`cuOccupancyMaxPotentialBlockSize`]; the only flag (caching override) changes nothing.
    fn cuOccupancyMaxPotentialBlockSizeWithFlags(minGridSize: *mut c_int, blockSize: *mut c_int, func: CUfunction, b2d: CUoccupancyB2DSize, dynamicSMemSize: usize, blockSizeLimit: c_int, flags: c_uint) {
        if flags > 1 {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        }
        // SAFETY: the pointers are NULL or valid as cuda.h documents for
        // cuOccupancyMaxPotentialBlockSizeWithFlags: the helper's contract.
        unsafe { abi::write_potential_block_size(minGridSize, blockSize, handle_value(func), b2d, dynamicSMemSize, blockSizeLimit) }
    }

    /// Dynamic shared memory per block when `numBlocks` blocks of `blockSize` share an SM.
    fn cuOccupancyAvailableDynamicSMemPerBlock(size: *mut usize, func: CUfunction, numBlocks: c_int, blockSize: c_int) {
        let v = module::available_dynamic_shared(handle_value(func), numBlocks, blockSize)?;
        // SAFETY: `size` is cuOccupancyAvailableDynamicSMemPerBlock's out-pointer: NULL (refused)
        // or writable per cuda.h.
        unsafe { abi::write(size, v as usize) }
    }

    /// Peer copy on a stream: with one device, a device-to-device copy.
    fn cuMemcpyPeerAsync(dst: CUdeviceptr, dstCtx: CUcontext, src: CUdeviceptr, srcCtx: CUcontext, n: usize, hStream: CUstream) {
        context::resolve(handle_value(dstCtx))?;
        context::resolve(handle_value(srcCtx))?;
        copy::dtod(dst, src, n, Some(handle_value(hStream)))
    }

    /// Peer copy: with one device, a device-to-device copy.
    fn cuMemcpyPeer(dst: CUdeviceptr, dstCtx: CUcontext, src: CUdeviceptr, srcCtx: CUcontext, n: usize) {
        context::resolve(handle_value(dstCtx))?;
        context::resolve(handle_value(srcCtx))?;
        copy::dtod(dst, src, n, None)
    }

    /// Managed memory is visible to every stream already; checks the stream and the pointer.
    fn cuStreamAttachMemAsync(hStream: CUstream, dptr: CUdeviceptr, length: usize, flags: c_uint) {
        stream::resolve(handle_value(hStream))?;
        match memory::find(dptr) {
            Some(a) if a.kind == Kind::Managed && (length == 0 || length as u64 <= a.len) && flags <= 4 => Ok(()),
            _ => Err(CUresult::CUDA_ERROR_INVALID_VALUE),
        }
    }

    /// There is no profiler to start; succeeds, as NVIDIA's driver does without one attached.
    fn cuProfilerStart() { Ok(()) }

    /// See [`cuProfilerStart`].
    fn cuProfilerStop() { Ok(()) }

    /// softcuda's description of the current context's sticky fault (kernel, block, thread, PTX
    /// line), else the device's (which outlives every context), NUL-terminated into `buf`;
    /// `CUDA_ERROR_NOT_FOUND` when there is none.
    fn softcuda_last_fault(buf: *mut c_char, len: c_int) {
        // After a reset the current context may be gone, but the device's fault remains.
        let msg = context::current()
            .ok()
            .and_then(|c| c.sticky_message())
            .or_else(context::device_fault_message)
            .ok_or(CUresult::CUDA_ERROR_NOT_FOUND)?;
        // SAFETY: `buf` is NULL (refused) or holds `len` writable bytes per cuda.h.
        unsafe { abi::copy_c_string(&msg, buf, len) }
    }

}

aliases! {
    cuModuleGetGlobal => cuModuleGetGlobal_v2(dptr: *mut CUdeviceptr, size: *mut usize, hmod: CUmodule, name: *const c_char);
    cuMemcpy2DAsync => cuMemcpy2DAsync_v2(desc: *const CUDA_MEMCPY2D, hStream: CUstream);
    cuMemcpy2DUnaligned_v2 => cuMemcpy2D_v2(desc: *const CUDA_MEMCPY2D);
    cuMemcpy2DUnaligned => cuMemcpy2D_v2(desc: *const CUDA_MEMCPY2D);
    cuEventElapsedTime_v2 => cuEventElapsedTime(ms: *mut f32, hStart: CUevent, hEnd: CUevent);
    cuDeviceGetUuid => cuDeviceGetUuid_v2(uuid: *mut CUuuid, dev: CUdevice);
    cuDeviceTotalMem => cuDeviceTotalMem_v2(bytes: *mut usize, dev: CUdevice);
    cuDevicePrimaryCtxRelease => cuDevicePrimaryCtxRelease_v2(dev: CUdevice);
    cuDevicePrimaryCtxReset => cuDevicePrimaryCtxReset_v2(dev: CUdevice);
    cuDevicePrimaryCtxSetFlags => cuDevicePrimaryCtxSetFlags_v2(dev: CUdevice, flags: c_uint);
    cuLinkCreate => cuLinkCreate_v2(numOptions: c_uint, options: *mut c_uint, optionValues: *mut *mut c_void, stateOut: *mut *mut c_void);
    cuLinkAddData => cuLinkAddData_v2(state: *mut c_void, kind: c_uint, data: *mut c_void, size: usize, name: *const c_char, numOptions: c_uint, options: *mut c_uint, optionValues: *mut *mut c_void);
    cuLinkAddFile => cuLinkAddFile_v2(state: *mut c_void, kind: c_uint, path: *const c_char, numOptions: c_uint, options: *mut c_uint, optionValues: *mut *mut c_void);
    cuGraphInstantiate => cuGraphInstantiate_v2(exec: *mut *mut c_void, graph: *mut c_void, errorNode: *mut *mut c_void, log: *mut c_char, logSize: usize);
    cuCtxCreate => cuCtxCreate_v2(pctx: *mut CUcontext, flags: c_uint, dev: CUdevice);
    cuCtxDestroy => cuCtxDestroy_v2(ctx: CUcontext);
    cuCtxPushCurrent => cuCtxPushCurrent_v2(ctx: CUcontext);
    cuCtxPopCurrent => cuCtxPopCurrent_v2(pctx: *mut CUcontext);
    cuStreamDestroy => cuStreamDestroy_v2(hStream: CUstream);
    cuEventDestroy => cuEventDestroy_v2(hEvent: CUevent);
    cuMemAlloc => cuMemAlloc_v2(dptr: *mut CUdeviceptr, size: usize);
    cuMemFree => cuMemFree_v2(dptr: CUdeviceptr);
    cuMemAllocHost => cuMemAllocHost_v2(pp: *mut *mut c_void, size: usize);
    cuMemHostRegister => cuMemHostRegister_v2(p: *mut c_void, bytesize: usize, Flags: c_uint);
    cuMemHostGetDevicePointer => cuMemHostGetDevicePointer_v2(pdptr: *mut CUdeviceptr, ptr: *mut c_void, flags: c_uint);
    cuMemGetInfo => cuMemGetInfo_v2(free: *mut usize, total: *mut usize);
    cuMemGetAddressRange => cuMemGetAddressRange_v2(pbase: *mut CUdeviceptr, psize: *mut usize, dptr: CUdeviceptr);
    cuMemcpyHtoD => cuMemcpyHtoD_v2(dst: CUdeviceptr, src: *const c_void, n: usize);
    cuMemcpyDtoH => cuMemcpyDtoH_v2(dst: *mut c_void, src: CUdeviceptr, n: usize);
    cuMemcpyDtoD => cuMemcpyDtoD_v2(dst: CUdeviceptr, src: CUdeviceptr, n: usize);
    cuMemcpyHtoDAsync => cuMemcpyHtoDAsync_v2(dst: CUdeviceptr, src: *const c_void, n: usize, hStream: CUstream);
    cuMemcpyDtoHAsync => cuMemcpyDtoHAsync_v2(dst: *mut c_void, src: CUdeviceptr, n: usize, hStream: CUstream);
    cuMemcpyDtoDAsync => cuMemcpyDtoDAsync_v2(dst: CUdeviceptr, src: CUdeviceptr, n: usize, hStream: CUstream);
    cuMemcpy2D => cuMemcpy2D_v2(desc: *const CUDA_MEMCPY2D);
    cuMemsetD8 => cuMemsetD8_v2(dst: CUdeviceptr, value: u8, n: usize);
    cuMemsetD16 => cuMemsetD16_v2(dst: CUdeviceptr, value: u16, n: usize);
    cuMemsetD32 => cuMemsetD32_v2(dst: CUdeviceptr, value: c_uint, n: usize);
}
