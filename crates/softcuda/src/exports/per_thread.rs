//! The per-thread-default-stream entry points: the `_ptds` (synchronous calls) and `_ptsz`
//! (calls taking a stream) symbols that programs built with `--default-stream per-thread` (or
//! `CUDA_API_PER_THREAD_DEFAULT_STREAM`) link against, and that cuGetProcAddress answers for
//! `CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM`. Each runs its legacy counterpart with the
//! NULL stream (and a synchronous call's implicit stream) meaning the calling thread's
//! per-thread default stream instead of the legacy one (see `stream::per_thread_scope`).
#![allow(non_snake_case, clippy::missing_safety_doc)]

use std::ffi::{c_uint, c_void};

use cudarc::driver::sys::{
    CUDA_MEMCPY2D, CUcontext, CUdeviceptr, CUevent, CUfunction, CUhostFn, CUlaunchConfig, CUstream,
    cuuint32_t, cuuint64_t,
};

use super::*;
use crate::graph_copy::RawMemcpy3D;
use crate::memop::RawBatchOp;
use crate::stream;

/// Declares per-thread variants: each forwards its arguments unchanged to the legacy export,
/// inside a per-thread-default-stream scope.
macro_rules! per_thread {
    ($( $variant:ident => $target:ident($($arg:ident : $ty:ty),* $(,)?); )*) => {
        $(
            #[doc = concat!("[`", stringify!($target), "`] with the per-thread default stream as the default stream.")]
            #[unsafe(no_mangle)]
            pub unsafe extern "C" fn $variant($($arg: $ty),*) -> ::cudarc::driver::sys::CUresult {
                stream::per_thread_scope(|| {
                    // SAFETY: the target has the same contract; arguments are forwarded
                    // unchanged.
                    unsafe { $target($($arg),*) }
                })
            }
        )*
    };
}

// Synchronous calls: their implicit stream is the per-thread default stream.
per_thread! {
    cuMemcpy_ptds => cuMemcpy(dst: CUdeviceptr, src: CUdeviceptr, n: usize);
    cuMemcpyPeer_ptds => cuMemcpyPeer(dst: CUdeviceptr, dstCtx: CUcontext, src: CUdeviceptr, srcCtx: CUcontext, n: usize);
    cuMemcpyHtoD_v2_ptds => cuMemcpyHtoD_v2(dst: CUdeviceptr, src: *const c_void, n: usize);
    cuMemcpyDtoH_v2_ptds => cuMemcpyDtoH_v2(dst: *mut c_void, src: CUdeviceptr, n: usize);
    cuMemcpyDtoD_v2_ptds => cuMemcpyDtoD_v2(dst: CUdeviceptr, src: CUdeviceptr, n: usize);
    cuMemcpy2D_v2_ptds => cuMemcpy2D_v2(desc: *const CUDA_MEMCPY2D);
    cuMemcpy2DUnaligned_v2_ptds => cuMemcpy2DUnaligned_v2(desc: *const CUDA_MEMCPY2D);
    cuMemsetD8_v2_ptds => cuMemsetD8_v2(dst: CUdeviceptr, value: u8, n: usize);
    cuMemsetD16_v2_ptds => cuMemsetD16_v2(dst: CUdeviceptr, value: u16, n: usize);
    cuMemsetD32_v2_ptds => cuMemsetD32_v2(dst: CUdeviceptr, value: c_uint, n: usize);
    cuMemcpy3D_v2_ptds => cuMemcpy3D_v2(pCopy: *const RawMemcpy3D);
    cuMemcpyHtoA_v2_ptds => cuMemcpyHtoA_v2(dstArray: *mut c_void, dstOffset: usize, srcHost: *const c_void, n: usize);
    cuMemcpyAtoH_v2_ptds => cuMemcpyAtoH_v2(dstHost: *mut c_void, srcArray: *mut c_void, srcOffset: usize, n: usize);
    cuMemcpyAtoD_v2_ptds => cuMemcpyAtoD_v2(dst: CUdeviceptr, srcArray: *mut c_void, srcOffset: usize, n: usize);
    cuMemcpyDtoA_v2_ptds => cuMemcpyDtoA_v2(dstArray: *mut c_void, dstOffset: usize, src: CUdeviceptr, n: usize);
}

// Calls taking a stream: NULL means the per-thread default stream.
per_thread! {
    cuMemcpyAsync_ptsz => cuMemcpyAsync(dst: CUdeviceptr, src: CUdeviceptr, n: usize, hStream: CUstream);
    cuMemcpyPeerAsync_ptsz => cuMemcpyPeerAsync(dst: CUdeviceptr, dstCtx: CUcontext, src: CUdeviceptr, srcCtx: CUcontext, n: usize, hStream: CUstream);
    cuMemcpyHtoDAsync_v2_ptsz => cuMemcpyHtoDAsync_v2(dst: CUdeviceptr, src: *const c_void, n: usize, hStream: CUstream);
    cuMemcpyDtoHAsync_v2_ptsz => cuMemcpyDtoHAsync_v2(dst: *mut c_void, src: CUdeviceptr, n: usize, hStream: CUstream);
    cuMemcpyDtoDAsync_v2_ptsz => cuMemcpyDtoDAsync_v2(dst: CUdeviceptr, src: CUdeviceptr, n: usize, hStream: CUstream);
    cuMemcpy2DAsync_v2_ptsz => cuMemcpy2DAsync_v2(desc: *const CUDA_MEMCPY2D, hStream: CUstream);
    cuMemsetD8Async_ptsz => cuMemsetD8Async(dst: CUdeviceptr, value: u8, n: usize, hStream: CUstream);
    cuMemsetD16Async_ptsz => cuMemsetD16Async(dst: CUdeviceptr, value: u16, n: usize, hStream: CUstream);
    cuMemsetD32Async_ptsz => cuMemsetD32Async(dst: CUdeviceptr, value: c_uint, n: usize, hStream: CUstream);
    cuStreamGetPriority_ptsz => cuStreamGetPriority(hStream: CUstream, priority: *mut c_int);
    cuStreamGetFlags_ptsz => cuStreamGetFlags(hStream: CUstream, flags: *mut c_uint);
    cuStreamGetCtx_ptsz => cuStreamGetCtx(hStream: CUstream, pctx: *mut CUcontext);
    cuStreamWaitEvent_ptsz => cuStreamWaitEvent(hStream: CUstream, hEvent: CUevent, flags: c_uint);
    cuStreamBeginCapture_ptsz => cuStreamBeginCapture(hStream: CUstream);
    cuStreamBeginCapture_v2_ptsz => cuStreamBeginCapture_v2(hStream: CUstream, mode: c_uint);
    cuStreamEndCapture_ptsz => cuStreamEndCapture(hStream: CUstream, phGraph: *mut *mut c_void);
    cuStreamIsCapturing_ptsz => cuStreamIsCapturing(hStream: CUstream, status: *mut c_uint);
    cuStreamGetCaptureInfo_ptsz => cuStreamGetCaptureInfo(hStream: CUstream, status: *mut c_uint, id: *mut u64);
    cuStreamGetCaptureInfo_v2_ptsz => cuStreamGetCaptureInfo_v2(hStream: CUstream, status: *mut c_uint, id: *mut u64, graphOut: *mut *mut c_void, deps: *mut *const *mut c_void, numDeps: *mut usize);
    cuStreamGetCaptureInfo_v3_ptsz => cuStreamGetCaptureInfo_v3(hStream: CUstream, status: *mut c_uint, id: *mut u64, graphOut: *mut *mut c_void, deps: *mut *const *mut c_void, edges: *mut *const c_void, numDeps: *mut usize);
    cuStreamAddCallback_ptsz => cuStreamAddCallback(hStream: CUstream, callback: Option<stream::StreamCallback>, userData: *mut c_void, flags: c_uint);
    cuStreamAttachMemAsync_ptsz => cuStreamAttachMemAsync(hStream: CUstream, dptr: CUdeviceptr, length: usize, flags: c_uint);
    cuStreamQuery_ptsz => cuStreamQuery(hStream: CUstream);
    cuStreamSynchronize_ptsz => cuStreamSynchronize(hStream: CUstream);
    cuEventRecord_ptsz => cuEventRecord(hEvent: CUevent, hStream: CUstream);
    cuEventRecordWithFlags_ptsz => cuEventRecordWithFlags(hEvent: CUevent, hStream: CUstream, flags: c_uint);
    cuLaunchKernel_ptsz => cuLaunchKernel(f: CUfunction, gx: c_uint, gy: c_uint, gz: c_uint, bx: c_uint, by: c_uint, bz: c_uint, sharedMemBytes: c_uint, hStream: CUstream, kernelParams: *mut *mut c_void, extra: *mut *mut c_void);
    cuLaunchKernelEx_ptsz => cuLaunchKernelEx(config: *const CUlaunchConfig, f: CUfunction, kernelParams: *mut *mut c_void, extra: *mut *mut c_void);
    cuLaunchHostFunc_ptsz => cuLaunchHostFunc(hStream: CUstream, fn_: CUhostFn, userData: *mut c_void);
    cuStreamWriteValue32_ptsz => cuStreamWriteValue32(stream: CUstream, addr: CUdeviceptr, value: cuuint32_t, flags: c_uint);
    cuStreamWaitValue32_ptsz => cuStreamWaitValue32(stream: CUstream, addr: CUdeviceptr, value: cuuint32_t, flags: c_uint);
    cuStreamWriteValue64_ptsz => cuStreamWriteValue64(stream: CUstream, addr: CUdeviceptr, value: cuuint64_t, flags: c_uint);
    cuStreamWaitValue64_ptsz => cuStreamWaitValue64(stream: CUstream, addr: CUdeviceptr, value: cuuint64_t, flags: c_uint);
    cuStreamBatchMemOp_ptsz => cuStreamBatchMemOp(stream: CUstream, count: c_uint, paramArray: *mut RawBatchOp, flags: c_uint);
    cuStreamWriteValue32_v2_ptsz => cuStreamWriteValue32_v2(stream: CUstream, addr: CUdeviceptr, value: cuuint32_t, flags: c_uint);
    cuStreamWaitValue32_v2_ptsz => cuStreamWaitValue32_v2(stream: CUstream, addr: CUdeviceptr, value: cuuint32_t, flags: c_uint);
    cuStreamWriteValue64_v2_ptsz => cuStreamWriteValue64_v2(stream: CUstream, addr: CUdeviceptr, value: cuuint64_t, flags: c_uint);
    cuStreamWaitValue64_v2_ptsz => cuStreamWaitValue64_v2(stream: CUstream, addr: CUdeviceptr, value: cuuint64_t, flags: c_uint);
    cuStreamBatchMemOp_v2_ptsz => cuStreamBatchMemOp_v2(stream: CUstream, count: c_uint, paramArray: *mut RawBatchOp, flags: c_uint);
    cuGraphLaunch_ptsz => cuGraphLaunch(hExec: *mut c_void, hStream: CUstream);
    cuGraphUpload_ptsz => cuGraphUpload(hExec: *mut c_void, hStream: CUstream);
    cuMemAllocAsync_ptsz => cuMemAllocAsync(dptr: *mut CUdeviceptr, size: usize, hStream: CUstream);
    cuMemFreeAsync_ptsz => cuMemFreeAsync(dptr: CUdeviceptr, hStream: CUstream);
    cuMemAllocFromPoolAsync_ptsz => cuMemAllocFromPoolAsync(dptr: *mut CUdeviceptr, size: usize, pool: *mut c_void, hStream: CUstream);
    cuMemcpy3DAsync_v2_ptsz => cuMemcpy3DAsync_v2(pCopy: *const RawMemcpy3D, hStream: CUstream);
    cuMemcpyHtoAAsync_v2_ptsz => cuMemcpyHtoAAsync_v2(dstArray: *mut c_void, dstOffset: usize, srcHost: *const c_void, n: usize, hStream: CUstream);
    cuMemcpyAtoHAsync_v2_ptsz => cuMemcpyAtoHAsync_v2(dstHost: *mut c_void, srcArray: *mut c_void, srcOffset: usize, n: usize, hStream: CUstream);
}

/// The symbols above, by legacy name and suffix: what cuGetProcAddress answers for the
/// per-thread flag.
pub(crate) const PER_THREAD_SYMBOLS: &[(&str, &str)] = &[
    ("cuMemcpy", "_ptds"),
    ("cuMemcpyPeer", "_ptds"),
    ("cuMemcpyHtoD_v2", "_ptds"),
    ("cuMemcpyDtoH_v2", "_ptds"),
    ("cuMemcpyDtoD_v2", "_ptds"),
    ("cuMemcpy2D_v2", "_ptds"),
    ("cuMemcpy2DUnaligned_v2", "_ptds"),
    ("cuMemsetD8_v2", "_ptds"),
    ("cuMemsetD16_v2", "_ptds"),
    ("cuMemsetD32_v2", "_ptds"),
    ("cuMemcpy3D_v2", "_ptds"),
    ("cuMemcpyHtoA_v2", "_ptds"),
    ("cuMemcpyAtoH_v2", "_ptds"),
    ("cuMemcpyAtoD_v2", "_ptds"),
    ("cuMemcpyDtoA_v2", "_ptds"),
    ("cuMemcpyAsync", "_ptsz"),
    ("cuMemcpyPeerAsync", "_ptsz"),
    ("cuMemcpyHtoDAsync_v2", "_ptsz"),
    ("cuMemcpyDtoHAsync_v2", "_ptsz"),
    ("cuMemcpyDtoDAsync_v2", "_ptsz"),
    ("cuMemcpy2DAsync_v2", "_ptsz"),
    ("cuMemsetD8Async", "_ptsz"),
    ("cuMemsetD16Async", "_ptsz"),
    ("cuMemsetD32Async", "_ptsz"),
    ("cuStreamGetPriority", "_ptsz"),
    ("cuStreamGetFlags", "_ptsz"),
    ("cuStreamGetCtx", "_ptsz"),
    ("cuStreamWaitEvent", "_ptsz"),
    ("cuStreamBeginCapture", "_ptsz"),
    ("cuStreamBeginCapture_v2", "_ptsz"),
    ("cuStreamEndCapture", "_ptsz"),
    ("cuStreamIsCapturing", "_ptsz"),
    ("cuStreamGetCaptureInfo", "_ptsz"),
    ("cuStreamGetCaptureInfo_v2", "_ptsz"),
    ("cuStreamGetCaptureInfo_v3", "_ptsz"),
    ("cuStreamAddCallback", "_ptsz"),
    ("cuStreamAttachMemAsync", "_ptsz"),
    ("cuStreamQuery", "_ptsz"),
    ("cuStreamSynchronize", "_ptsz"),
    ("cuEventRecord", "_ptsz"),
    ("cuEventRecordWithFlags", "_ptsz"),
    ("cuLaunchKernel", "_ptsz"),
    ("cuLaunchKernelEx", "_ptsz"),
    ("cuLaunchHostFunc", "_ptsz"),
    ("cuStreamWriteValue32", "_ptsz"),
    ("cuStreamWaitValue32", "_ptsz"),
    ("cuStreamWriteValue64", "_ptsz"),
    ("cuStreamWaitValue64", "_ptsz"),
    ("cuStreamBatchMemOp", "_ptsz"),
    ("cuStreamWriteValue32_v2", "_ptsz"),
    ("cuStreamWaitValue32_v2", "_ptsz"),
    ("cuStreamWriteValue64_v2", "_ptsz"),
    ("cuStreamWaitValue64_v2", "_ptsz"),
    ("cuStreamBatchMemOp_v2", "_ptsz"),
    ("cuGraphLaunch", "_ptsz"),
    ("cuGraphUpload", "_ptsz"),
    ("cuMemAllocAsync", "_ptsz"),
    ("cuMemFreeAsync", "_ptsz"),
    ("cuMemAllocFromPoolAsync", "_ptsz"),
    ("cuMemcpy3DAsync_v2", "_ptsz"),
    ("cuMemcpyHtoAAsync_v2", "_ptsz"),
    ("cuMemcpyAtoHAsync_v2", "_ptsz"),
];
