//! Exported entry points of the per-thread default stream build (`nvcc --default-stream
//! per-thread`, or `CUDA_API_PER_THREAD_DEFAULT_STREAM` defined before the runtime's headers):
//! cuda_runtime_api.h renames each call that takes a stream to its `_ptsz` form and each
//! synchronous copy or fill to its `_ptds` form, and nvcc's launch code calls
//! `__cudaLaunchKernel_ptsz`. In these forms the NULL stream means the calling thread's
//! per-thread default stream (the driver's `CU_STREAM_PER_THREAD`, the runtime's
//! `cudaStreamPerThread`) instead of the legacy default stream, so work a thread issues on
//! "stream 0" does not wait for, or hold up, other threads' "stream 0" or other streams; only
//! the legacy stream (`cudaStreamLegacy`, passed explicitly) keeps its implicit
//! synchronization.
//!
//! Each `_ptsz` call is its legacy call with a NULL stream replaced by `CU_STREAM_PER_THREAD`;
//! the driver does the rest (both drivers take that handle wherever a stream is taken). A
//! `_ptds` call is the legacy call's stream-ordered form on the per-thread stream followed by a
//! wait for that stream, so it returns with its work done, as the legacy synchronous forms do,
//! and uses no driver call beyond the ones the legacy forms use.
//!
//! # Safety (all functions here)
//! As for the legacy call each one forwards to (the `api_*` module named in its body).

#![allow(non_snake_case)]

use std::ffi::{c_int, c_uint, c_void};

use crate::api_stream::{HostFn, StreamCallback};
use crate::driver::Handle;
use crate::launch::{Dim3, LaunchConfig};
use crate::status::{api, code};
use crate::{api_graph, api_launch, api_memory, api_pitched, api_pool, api_stream};

/// The driver's `CU_STREAM_PER_THREAD` (and the runtime's `cudaStreamPerThread`).
pub(crate) const PER_THREAD: Handle = 0x2 as Handle;

/// The stream a `_ptsz` call uses: NULL is the calling thread's per-thread default stream.
pub(crate) fn per_thread(stream: Handle) -> Handle {
    if stream.is_null() { PER_THREAD } else { stream }
}

/// Declares `_ptsz` calls: each forwards its arguments to the legacy call, the one named
/// after `on` with NULL replaced by the per-thread stream.
macro_rules! per_thread_stream {
    ($( $variant:ident => $module:ident :: $target:ident ( $($arg:ident : $ty:ty),* $(,)? ) on $stream:ident; )*) => {
        $(
            #[doc = concat!("[`", stringify!($module), "::", stringify!($target),
                            "`] with the NULL stream meaning the per-thread default stream.")]
            #[allow(clippy::too_many_arguments)]
            pub(crate) unsafe extern "C" fn $variant($($arg: $ty),*) -> c_int {
                let $stream = per_thread($stream);
                // SAFETY: the legacy call has the same contract (the module's); only a NULL
                // stream changed, to a handle every driver takes.
                unsafe { $module::$target($($arg),*) }
            }
        )*
    };
}

per_thread_stream! {
    cudaMemcpyAsync_ptsz => api_memory::cudaMemcpyAsync(
        dst: *mut c_void, src: *const c_void, count: usize, kind: c_int, stream: Handle) on stream;
    cudaMemcpyToSymbolAsync_ptsz => api_memory::cudaMemcpyToSymbolAsync(
        symbol: *const c_void, src: *const c_void, count: usize, offset: usize, kind: c_int,
        stream: Handle) on stream;
    cudaMemcpyFromSymbolAsync_ptsz => api_memory::cudaMemcpyFromSymbolAsync(
        dst: *mut c_void, symbol: *const c_void, count: usize, offset: usize, kind: c_int,
        stream: Handle) on stream;
    cudaMemsetAsync_ptsz => api_memory::cudaMemsetAsync(
        ptr: *mut c_void, value: c_int, count: usize, stream: Handle) on stream;
    cudaMemcpy2DAsync_ptsz => api_pitched::cudaMemcpy2DAsync(
        dst: *mut c_void, dpitch: usize, src: *const c_void, spitch: usize, width: usize,
        height: usize, kind: c_int, stream: Handle) on stream;
    cudaMemset2DAsync_ptsz => api_pitched::cudaMemset2DAsync(
        ptr: *mut c_void, pitch: usize, value: c_int, width: usize, height: usize,
        stream: Handle) on stream;
    cudaStreamSynchronize_ptsz => api_stream::cudaStreamSynchronize(stream: Handle) on stream;
    cudaStreamQuery_ptsz => api_stream::cudaStreamQuery(stream: Handle) on stream;
    cudaStreamGetFlags_ptsz => api_stream::cudaStreamGetFlags(
        stream: Handle, flags: *mut c_uint) on stream;
    cudaStreamGetPriority_ptsz => api_stream::cudaStreamGetPriority(
        stream: Handle, priority: *mut c_int) on stream;
    cudaStreamWaitEvent_ptsz => api_stream::cudaStreamWaitEvent(
        stream: Handle, event: Handle, flags: c_uint) on stream;
    cudaEventRecord_ptsz => api_stream::cudaEventRecord(event: Handle, stream: Handle) on stream;
    cudaEventRecordWithFlags_ptsz => api_stream::cudaEventRecordWithFlags(
        event: Handle, stream: Handle, flags: c_uint) on stream;
    cudaStreamAddCallback_ptsz => api_stream::cudaStreamAddCallback(
        stream: Handle, callback: StreamCallback, data: *mut c_void, flags: c_uint) on stream;
    cudaLaunchHostFunc_ptsz => api_stream::cudaLaunchHostFunc(
        stream: Handle, func: HostFn, data: *mut c_void) on stream;
    cudaStreamBeginCapture_ptsz => api_graph::cudaStreamBeginCapture(
        stream: Handle, mode: c_int) on stream;
    cudaStreamEndCapture_ptsz => api_graph::cudaStreamEndCapture(
        stream: Handle, graph: *mut Handle) on stream;
    cudaStreamIsCapturing_ptsz => api_graph::cudaStreamIsCapturing(
        stream: Handle, status: *mut c_int) on stream;
    cudaStreamGetCaptureInfo_ptsz => api_graph::cudaStreamGetCaptureInfo(
        stream: Handle, status: *mut c_int, id: *mut u64, graph: *mut Handle,
        deps: *mut *const Handle, edges: *mut *const c_void, count: *mut usize) on stream;
    cudaGraphLaunch_ptsz => api_graph::cudaGraphLaunch(exec: Handle, stream: Handle) on stream;
    cudaGraphUpload_ptsz => api_graph::cudaGraphUpload(exec: Handle, stream: Handle) on stream;
    cudaMallocAsync_ptsz => api_pool::cudaMallocAsync(
        ptr: *mut *mut c_void, size: usize, stream: Handle) on stream;
    cudaFreeAsync_ptsz => api_pool::cudaFreeAsync(ptr: *mut c_void, stream: Handle) on stream;
    cudaLaunchKernel_ptsz => api_launch::cudaLaunchKernel(
        func: *const c_void, grid: Dim3, block: Dim3, args: *mut *mut c_void, shared: usize,
        stream: Handle) on stream;
    __cudaLaunchKernel_ptsz => api_launch::__cudaLaunchKernel(
        kernel: Handle, grid: Dim3, block: Dim3, args: *mut *mut c_void, shared: usize,
        stream: Handle) on stream;
}

/// [`api_launch::cudaLaunchKernelExC`] with the configuration's NULL stream meaning the
/// per-thread default stream.
pub(crate) unsafe extern "C" fn cudaLaunchKernelExC_ptsz(
    config: *const LaunchConfig,
    func: *const c_void,
    args: *mut *mut c_void,
) -> c_int {
    if config.is_null() {
        return api(|| Err(code::INVALID_VALUE));
    }
    // SAFETY: non-NULL, so a `cudaLaunchConfig_t` (the contract).
    let c = unsafe { config.read_unaligned() };
    let mapped = LaunchConfig {
        stream: per_thread(c.stream),
        ..c
    };
    // SAFETY: `mapped` lives across the call and is the program's configuration but for the
    // stream; the rest is the legacy call's contract.
    unsafe { api_launch::cudaLaunchKernelExC(&raw const mapped, func, args) }
}

/// A `_ptds` call's ending: after its stream-ordered form succeeded on the per-thread stream,
/// waits for that stream (whose error, if any, is the call's).
fn then_wait(queued: c_int) -> c_int {
    if queued != 0 {
        return queued;
    }
    // SAFETY: the per-thread stream handle is valid in every context.
    unsafe { api_stream::cudaStreamSynchronize(PER_THREAD) }
}

/// Declares `_ptds` calls: each runs the stream-ordered form of its legacy call (named after
/// `=>`) on the per-thread stream, then waits for that stream.
macro_rules! per_thread_sync {
    ($( $variant:ident => $module:ident :: $target:ident ( $($arg:ident : $ty:ty),* $(,)? ); )*) => {
        $(
            #[doc = concat!("[`", stringify!($module), "::", stringify!($target),
                            "`] on the per-thread default stream, waited for.")]
            pub(crate) unsafe extern "C" fn $variant($($arg: $ty),*) -> c_int {
                // SAFETY: the stream-ordered call has the synchronous one's contract (the
                // module's), plus a stream: the per-thread one, valid in every context.
                then_wait(unsafe { $module::$target($($arg,)* PER_THREAD) })
            }
        )*
    };
}

per_thread_sync! {
    cudaMemcpy_ptds => api_memory::cudaMemcpyAsync(
        dst: *mut c_void, src: *const c_void, count: usize, kind: c_int);
    cudaMemcpyToSymbol_ptds => api_memory::cudaMemcpyToSymbolAsync(
        symbol: *const c_void, src: *const c_void, count: usize, offset: usize, kind: c_int);
    cudaMemcpyFromSymbol_ptds => api_memory::cudaMemcpyFromSymbolAsync(
        dst: *mut c_void, symbol: *const c_void, count: usize, offset: usize, kind: c_int);
    cudaMemset_ptds => api_memory::cudaMemsetAsync(ptr: *mut c_void, value: c_int, count: usize);
    cudaMemcpy2D_ptds => api_pitched::cudaMemcpy2DAsync(
        dst: *mut c_void, dpitch: usize, src: *const c_void, spitch: usize, width: usize,
        height: usize, kind: c_int);
    cudaMemset2D_ptds => api_pitched::cudaMemset2DAsync(
        ptr: *mut c_void, pitch: usize, value: c_int, width: usize, height: usize);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_null_stream_becomes_the_per_thread_stream() {
        assert_eq!(per_thread(std::ptr::null_mut()), PER_THREAD);
        let legacy = 0x1 as Handle;
        let created = 0x5000 as Handle;
        assert_eq!(per_thread(legacy), legacy);
        assert_eq!(per_thread(created), created);
    }
}
