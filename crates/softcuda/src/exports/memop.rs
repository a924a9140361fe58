//! The stream memory operation entry points (a part of [`super`]'s list kept apart for size):
//! thin shims over `memop`. CUDA 13's header maps each name to its `_v2` symbol, which is what
//! cuGetProcAddress answers from CUDA 11.7 on; the unversioned symbols behave the same here.
#![allow(non_snake_case, clippy::missing_safety_doc)]

use std::ffi::c_uint;

use cudarc::driver::sys::{CUdeviceptr, CUstream, cuuint32_t, cuuint64_t};

use super::handle_value;
use crate::memop::{self, RawBatchOp, Width};

exports! {
    /// Writes a 32-bit value to device memory when the stream reaches this point; `flags` is
    /// `CU_STREAM_WRITE_VALUE_DEFAULT` or `_NO_MEMORY_BARRIER`.
    fn cuStreamWriteValue32_v2(stream: CUstream, addr: CUdeviceptr, value: cuuint32_t, flags: c_uint) {
        memop::write(handle_value(stream), addr, value.into(), Width::W32, flags)
    }

    /// [`cuStreamWriteValue32_v2`] for a 64-bit value.
    fn cuStreamWriteValue64_v2(stream: CUstream, addr: CUdeviceptr, value: cuuint64_t, flags: c_uint) {
        memop::write(handle_value(stream), addr, value, Width::W64, flags)
    }

    /// Holds later work on the stream until the 32-bit word at `addr` satisfies `flags`'s
    /// condition against `value` (`CU_STREAM_WAIT_VALUE_GEQ`, `_EQ`, `_AND`, `_NOR`).
    fn cuStreamWaitValue32_v2(stream: CUstream, addr: CUdeviceptr, value: cuuint32_t, flags: c_uint) {
        memop::wait(handle_value(stream), addr, value.into(), Width::W32, flags)
    }

    /// [`cuStreamWaitValue32_v2`] on a 64-bit word.
    fn cuStreamWaitValue64_v2(stream: CUstream, addr: CUdeviceptr, value: cuuint64_t, flags: c_uint) {
        memop::wait(handle_value(stream), addr, value, Width::W64, flags)
    }

    /// Several waits, writes and barriers as one unit of stream work, in array order.
    fn cuStreamBatchMemOp_v2(stream: CUstream, count: c_uint, paramArray: *mut RawBatchOp, flags: c_uint) {
        let count = count as usize;
        if paramArray.is_null() || count == 0 {
            return Err(cudarc::driver::sys::CUresult::CUDA_ERROR_INVALID_VALUE);
        }
        // SAFETY: non-null, and cuda.h's contract is that it points to `count` readable
        // `CUstreamBatchMemOpParams` (48 bytes each, 8-aligned, as `RawBatchOp` is).
        let ops = unsafe { std::slice::from_raw_parts(paramArray.cast_const(), count) }.to_vec();
        memop::batch(handle_value(stream), ops, flags)
    }
}

aliases! {
    cuStreamWriteValue32 => cuStreamWriteValue32_v2(stream: CUstream, addr: CUdeviceptr, value: cuuint32_t, flags: c_uint);
    cuStreamWriteValue64 => cuStreamWriteValue64_v2(stream: CUstream, addr: CUdeviceptr, value: cuuint64_t, flags: c_uint);
    cuStreamWaitValue32 => cuStreamWaitValue32_v2(stream: CUstream, addr: CUdeviceptr, value: cuuint32_t, flags: c_uint);
    cuStreamWaitValue64 => cuStreamWaitValue64_v2(stream: CUstream, addr: CUdeviceptr, value: cuuint64_t, flags: c_uint);
    cuStreamBatchMemOp => cuStreamBatchMemOp_v2(stream: CUstream, count: c_uint, paramArray: *mut RawBatchOp, flags: c_uint);
}
