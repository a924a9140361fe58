//! Driver calls third-party programs commonly use beyond what gpuhost needs (a part of
//! [`super`]'s list kept apart for size): cuLaunchKernelEx, pitched allocation, several pointer
//! attributes at once, stream callbacks and PCI bus ids.
#![allow(non_snake_case, clippy::missing_safety_doc)]

use std::ffi::{CStr, c_char, c_int, c_uint, c_void};

use cudarc::driver::sys::{CUdevice, CUdeviceptr, CUfunction, CUlaunchConfig, CUresult, CUstream};

use super::handle_value;
use crate::launch::{self, Request};
use crate::memory::{self, Kind};
use crate::{abi, context, device, pointer, stream};

/// Pitch alignment of cuMemAllocPitch (what NVIDIA's driver uses on H100/H200).
const PITCH_ALIGN: usize = 512;

exports! {
    /// cuLaunchKernel with a `CUlaunchConfig` (dimensions, shared memory, stream, attributes).
    fn cuLaunchKernelEx(config: *const CUlaunchConfig, f: CUfunction, kernelParams: *mut *mut c_void, extra: *mut *mut c_void) {
        if config.is_null() {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        }
        // SAFETY: non-null (checked above) and a readable CUlaunchConfig (cuLaunchKernelEx's
        // contract); the fields are read through raw places, never as a reference to the struct.
        let (n, list, grid, block, shared, stream) = unsafe {
            (
                (&raw const (*config).numAttrs).read() as usize,
                (&raw const (*config).attrs).read(),
                [(&raw const (*config).gridDimX).read(), (&raw const (*config).gridDimY).read(), (&raw const (*config).gridDimZ).read()],
                [(&raw const (*config).blockDimX).read(), (&raw const (*config).blockDimY).read(), (&raw const (*config).blockDimZ).read()],
                (&raw const (*config).sharedMemBytes).read(),
                (&raw const (*config).hStream).read(),
            )
        };
        if n > 0 && list.is_null() {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        }
        let mut attrs = Vec::with_capacity(n);
        for i in 0..n {
            // SAFETY: `attrs` is non-null (checked above) and holds `numAttrs` entries (cuda.h
            // contract); the id is read as its integer and the value's first 16 bytes as plain
            // words (a foreign enum value would be undefined behaviour as the Rust enum).
            attrs.push(unsafe {
                let a = list.add(i);
                ((&raw const (*a).id).cast::<u32>().read(), (&raw const (*a).value).cast::<[u32; 4]>().read_unaligned())
            });
        }
        launch::check_attributes(&attrs)?;
        let request = Request { function: handle_value(f), grid, block, shared, stream: handle_value(stream), params: kernelParams, extra };
        // SAFETY: `kernelParams` is NULL or holds one pointer per kernel parameter, each to a
        // value of the parameter's size, and `extra` is NULL or a CU_LAUNCH_PARAM list (cuda.h):
        // launch's contract.
        unsafe { launch::launch(&request) }
    }

    /// `height` rows of `width` bytes, each row `*pitch` bytes apart (512-byte aligned); the
    /// element size must be 4, 8 or 16.
    fn cuMemAllocPitch_v2(dptr: *mut CUdeviceptr, pitch: *mut usize, width: usize, height: usize, elemSize: c_uint) {
        let ctx = context::live()?;
        if dptr.is_null() || pitch.is_null() || width == 0 || height == 0 || !matches!(elemSize, 4 | 8 | 16) {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        }
        let row = width.checked_next_multiple_of(PITCH_ALIGN).ok_or(CUresult::CUDA_ERROR_INVALID_VALUE)?;
        let bytes = row.checked_mul(height).ok_or(CUresult::CUDA_ERROR_INVALID_VALUE)?;
        // SAFETY: `dptr` is cuMemAllocPitch_v2's out-pointer: NULL (refused) or writable per
        // cuda.h.
        unsafe { abi::write(dptr, memory::alloc(ctx.id, abi::bytes(bytes), Kind::Device)?) }?;
        // SAFETY: `pitch` is cuMemAllocPitch_v2's out-pointer: NULL (refused) or writable per
        // cuda.h.
        unsafe { abi::write(pitch, row) }
    }

    /// Several pointer attributes; for a pointer softcuda does not know, each value is zeroed
    /// (as NVIDIA documents) instead of failing.
    fn cuPointerGetAttributes(numAttributes: c_uint, attributes: *const c_uint, data: *mut *mut c_void, ptr: CUdeviceptr) {
        let n = numAttributes as usize;
        if n == 0 || attributes.is_null() || data.is_null() {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        }
        for i in 0..n {
            // SAFETY: both arrays are non-null (checked above) and hold `numAttributes` entries
            // (cuPointerGetAttributes's contract).
            let (attr, out) = unsafe { (attributes.add(i).read(), data.add(i).read()) };
            let size = pointer::attribute_size(attr).ok_or(CUresult::CUDA_ERROR_INVALID_VALUE)?;
            if out.is_null() {
                return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
            }
            match pointer::attribute(attr, ptr) {
                // SAFETY: `out.cast::<u32>()` is cuPointerGetAttributes's out-pointer: NULL
                // (refused) or writable per cuda.h.
                Ok(pointer::Value::U32(v)) => unsafe { abi::write(out.cast::<u32>(), v) }?,
                // SAFETY: `out.cast::<u64>()` is cuPointerGetAttributes's out-pointer: NULL
                // (refused) or writable per cuda.h.
                Ok(pointer::Value::U64(v) | pointer::Value::Ptr(v)) => unsafe { abi::write(out.cast::<u64>(), v) }?,
                // SAFETY: `out` is non-null (checked above) and holds a value of the attribute's
                // size (cuda.h contract).
                Err(_) => unsafe { std::ptr::write_bytes(out.cast::<u8>(), 0, size) },
            }
        }
        Ok(())
    }

    /// Calls `callback(stream, status, userData)` on the stream's worker, in order (`flags` 0).
    fn cuStreamAddCallback(hStream: CUstream, callback: Option<stream::StreamCallback>, userData: *mut c_void, flags: c_uint) {
        let f = callback.ok_or(CUresult::CUDA_ERROR_INVALID_VALUE)?;
        if flags != 0 {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        }
        stream::add_callback(handle_value(hStream), f, userData.expose_provenance())
    }

    /// The device's PCI bus id string (`0000:BB:00.0`, bus = ordinal), truncated to `len`.
    fn cuDeviceGetPCIBusId(pciBusId: *mut c_char, len: c_int, dev: CUdevice) {
        device::check(dev)?;
        // SAFETY: `pciBusId` is NULL (refused) or holds `len` writable bytes per cuda.h.
        unsafe { abi::copy_c_string(&device::pci_bus_id(dev), pciBusId, len) }
    }

    /// The device with a PCI bus id string.
    fn cuDeviceGetByPCIBusId(dev: *mut CUdevice, pciBusId: *const c_char) {
        crate::driver::ensure_init()?;
        if pciBusId.is_null() {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        }
        // SAFETY: non-null (checked above) and NUL-terminated: cuDeviceGetByPCIBusId's contract.
        let id = unsafe { CStr::from_ptr(pciBusId) }.to_str().map_err(|_| CUresult::CUDA_ERROR_INVALID_VALUE)?;
        // SAFETY: `dev` is cuDeviceGetByPCIBusId's out-pointer: NULL (refused) or writable per
        // cuda.h.
        unsafe { abi::write(dev, device::by_pci_bus_id(id)?) }
    }
}
