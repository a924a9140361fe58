//! The CUDA array, 3D copy, texture-object and surface-object entry points (a part of
//! [`super`]'s list kept apart for size). Thin shims over `array`, `copy` and `texobj`; handles
//! are process-wide values checked on every use.
#![allow(non_snake_case, clippy::missing_safety_doc)]

use std::ffi::c_void;

use cudarc::driver::sys::{CUdeviceptr, CUresult, CUstream};

use super::handle_value;
use crate::abi::{self, p};
use crate::array::{self, RawArray3DDesc, RawArrayDesc};
use crate::copy;
use crate::graph_copy::RawMemcpy3D;
use crate::texobj::{self, RawResourceDesc, RawTextureDesc};

/// `CUarray` as C passes it.
type Array = *mut c_void;

/// The device address of bytes `[offset, offset + n)` of `array` (the ...AtoX / XtoA copies).
fn array_bytes(array: Array, offset: usize, n: usize) -> abi::CuResult<u64> {
    crate::context::live()?;
    array::linear(handle_value(array), offset, n)
}

exports! {
    /// A 1D or 2D CUDA array in the current context.
    fn cuArrayCreate_v2(pHandle: *mut Array, pAllocateArray: *const RawArrayDesc) {
        // SAFETY: NULL (refused) or a readable descriptor per cuda.h; all fields plain integers.
        let d = unsafe { abi::read(pAllocateArray) }?;
        if pHandle.is_null() {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        }
        let h = array::create_2d(&d)?;
        // SAFETY: `pHandle` is cuArrayCreate's out-pointer, checked non-NULL, writable per cuda.h.
        unsafe { abi::write(pHandle, p(h)) }
    }

    /// A 1D, 2D, 3D or layered CUDA array in the current context.
    fn cuArray3DCreate_v2(pHandle: *mut Array, pAllocateArray: *const RawArray3DDesc) {
        // SAFETY: NULL (refused) or a readable descriptor per cuda.h; all fields plain integers.
        let d = unsafe { abi::read(pAllocateArray) }?;
        if pHandle.is_null() {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        }
        let h = array::create(&d)?;
        // SAFETY: `pHandle` is cuArray3DCreate's out-pointer, checked non-NULL, writable per cuda.h.
        unsafe { abi::write(pHandle, p(h)) }
    }

    /// The 1D/2D descriptor of an array (of a 3D one: its width, height and format).
    fn cuArrayGetDescriptor_v2(pArrayDescriptor: *mut RawArrayDesc, hArray: Array) {
        let d = array::get(handle_value(hArray))?.desc;
        let out = RawArrayDesc { width: d.width, height: d.height, format: d.format, channels: d.channels };
        // SAFETY: cuArrayGetDescriptor's out-pointer: NULL (refused) or writable per cuda.h.
        unsafe { abi::write(pArrayDescriptor, out) }
    }

    /// The descriptor an array was created with (cuArrayCreate's arrays: depth 0, no flags).
    fn cuArray3DGetDescriptor_v2(pArrayDescriptor: *mut RawArray3DDesc, hArray: Array) {
        let d = array::get(handle_value(hArray))?.desc;
        // SAFETY: cuArray3DGetDescriptor's out-pointer: NULL (refused) or writable per cuda.h.
        unsafe { abi::write(pArrayDescriptor, d) }
    }

    /// Destroys an array and frees its memory.
    fn cuArrayDestroy(hArray: Array) { array::destroy(handle_value(hArray)) }

    /// A 3D copy between host, device, unified memory and CUDA arrays, synchronous.
    fn cuMemcpy3D_v2(pCopy: *const RawMemcpy3D) {
        // SAFETY: NULL (refused) or a readable CUDA_MEMCPY3D per cuda.h; plain integers.
        let m = unsafe { abi::read(pCopy) }?;
        copy::copy_3d(&m, None)
    }

    /// A 3D copy on a stream.
    fn cuMemcpy3DAsync_v2(pCopy: *const RawMemcpy3D, hStream: CUstream) {
        // SAFETY: NULL (refused) or a readable CUDA_MEMCPY3D per cuda.h; plain integers.
        let m = unsafe { abi::read(pCopy) }?;
        copy::copy_3d(&m, Some(handle_value(hStream)))
    }

    /// Host to array bytes `[dstOffset, + ByteCount)`, synchronous.
    fn cuMemcpyHtoA_v2(dstArray: Array, dstOffset: usize, srcHost: *const c_void, ByteCount: usize) {
        copy::htod(array_bytes(dstArray, dstOffset, ByteCount)?, srcHost.cast(), ByteCount, None)
    }

    /// Array bytes to host, synchronous.
    fn cuMemcpyAtoH_v2(dstHost: *mut c_void, srcArray: Array, srcOffset: usize, ByteCount: usize) {
        copy::dtoh(dstHost.cast(), array_bytes(srcArray, srcOffset, ByteCount)?, ByteCount, None)
    }

    /// Host to array on a stream.
    fn cuMemcpyHtoAAsync_v2(dstArray: Array, dstOffset: usize, srcHost: *const c_void, ByteCount: usize, hStream: CUstream) {
        let dst = array_bytes(dstArray, dstOffset, ByteCount)?;
        copy::htod(dst, srcHost.cast(), ByteCount, Some(handle_value(hStream)))
    }

    /// Array to host on a stream.
    fn cuMemcpyAtoHAsync_v2(dstHost: *mut c_void, srcArray: Array, srcOffset: usize, ByteCount: usize, hStream: CUstream) {
        let src = array_bytes(srcArray, srcOffset, ByteCount)?;
        copy::dtoh(dstHost.cast(), src, ByteCount, Some(handle_value(hStream)))
    }

    /// Array bytes to device memory.
    fn cuMemcpyAtoD_v2(dstDevice: CUdeviceptr, srcArray: Array, srcOffset: usize, ByteCount: usize) {
        copy::dtod(dstDevice, array_bytes(srcArray, srcOffset, ByteCount)?, ByteCount, None)
    }

    /// Device memory to array bytes.
    fn cuMemcpyDtoA_v2(dstArray: Array, dstOffset: usize, srcDevice: CUdeviceptr, ByteCount: usize) {
        copy::dtod(array_bytes(dstArray, dstOffset, ByteCount)?, srcDevice, ByteCount, None)
    }

    /// A texture object over an array, linear or pitched memory (resource views: not supported).
    fn cuTexObjectCreate(pTexObject: *mut u64, pResDesc: *const RawResourceDesc, pTexDesc: *const RawTextureDesc, pResViewDesc: *const c_void) {
        if pTexObject.is_null() {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        }
        if !pResViewDesc.is_null() {
            return Err(CUresult::CUDA_ERROR_NOT_SUPPORTED);
        }
        // SAFETY: NULL (refused) or a readable CUDA_RESOURCE_DESC per cuda.h; plain integers.
        let r = unsafe { abi::read(pResDesc) }?;
        // SAFETY: NULL (refused) or a readable CUDA_TEXTURE_DESC per cuda.h; plain numbers.
        let d = unsafe { abi::read(pTexDesc) }?;
        let h = texobj::create_texture(&r, &d)?;
        // SAFETY: cuTexObjectCreate's out-pointer, checked non-NULL, writable per cuda.h.
        unsafe { abi::write(pTexObject, h) }
    }

    /// Destroys a texture object.
    fn cuTexObjectDestroy(texObject: u64) { texobj::destroy_texture(texObject) }

    /// The resource descriptor a texture object was created with.
    fn cuTexObjectGetResourceDesc(pResDesc: *mut RawResourceDesc, texObject: u64) {
        let (r, _) = texobj::texture_descs(texObject)?;
        // SAFETY: cuTexObjectGetResourceDesc's out-pointer: NULL (refused) or writable.
        unsafe { abi::write(pResDesc, r) }
    }

    /// The texture descriptor a texture object was created with.
    fn cuTexObjectGetTextureDesc(pTexDesc: *mut RawTextureDesc, texObject: u64) {
        let (_, d) = texobj::texture_descs(texObject)?;
        // SAFETY: cuTexObjectGetTextureDesc's out-pointer: NULL (refused) or writable.
        unsafe { abi::write(pTexDesc, d) }
    }

    /// A surface object over an array created with `CUDA_ARRAY3D_SURFACE_LDST`.
    fn cuSurfObjectCreate(pSurfObject: *mut u64, pResDesc: *const RawResourceDesc) {
        if pSurfObject.is_null() {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        }
        // SAFETY: NULL (refused) or a readable CUDA_RESOURCE_DESC per cuda.h; plain integers.
        let r = unsafe { abi::read(pResDesc) }?;
        let h = texobj::create_surface(&r)?;
        // SAFETY: cuSurfObjectCreate's out-pointer, checked non-NULL, writable per cuda.h.
        unsafe { abi::write(pSurfObject, h) }
    }

    /// Destroys a surface object.
    fn cuSurfObjectDestroy(surfObject: u64) { texobj::destroy_surface(surfObject) }

    /// The resource descriptor a surface object was created with.
    fn cuSurfObjectGetResourceDesc(pResDesc: *mut RawResourceDesc, surfObject: u64) {
        let r = texobj::surface_resource(surfObject)?;
        // SAFETY: cuSurfObjectGetResourceDesc's out-pointer: NULL (refused) or writable.
        unsafe { abi::write(pResDesc, r) }
    }
}

aliases! {
    cuArrayCreate => cuArrayCreate_v2(pHandle: *mut Array, pAllocateArray: *const RawArrayDesc);
    cuArray3DCreate => cuArray3DCreate_v2(pHandle: *mut Array, pAllocateArray: *const RawArray3DDesc);
    cuArrayGetDescriptor => cuArrayGetDescriptor_v2(pArrayDescriptor: *mut RawArrayDesc, hArray: Array);
    cuArray3DGetDescriptor => cuArray3DGetDescriptor_v2(pArrayDescriptor: *mut RawArray3DDesc, hArray: Array);
    cuMemcpy3D => cuMemcpy3D_v2(pCopy: *const RawMemcpy3D);
    cuMemcpy3DAsync => cuMemcpy3DAsync_v2(pCopy: *const RawMemcpy3D, hStream: CUstream);
    cuMemcpyHtoA => cuMemcpyHtoA_v2(dstArray: Array, dstOffset: usize, srcHost: *const c_void, ByteCount: usize);
    cuMemcpyAtoH => cuMemcpyAtoH_v2(dstHost: *mut c_void, srcArray: Array, srcOffset: usize, ByteCount: usize);
    cuMemcpyAtoD => cuMemcpyAtoD_v2(dstDevice: CUdeviceptr, srcArray: Array, srcOffset: usize, ByteCount: usize);
    cuMemcpyDtoA => cuMemcpyDtoA_v2(dstArray: Array, dstOffset: usize, srcDevice: CUdeviceptr, ByteCount: usize);
}

#[cfg(test)]
mod tests {
    use super::*;
    use cudarc::driver::sys;

    #[test]
    fn raw_structs_have_cuda_h_layouts() {
        use std::mem::{align_of, size_of};
        assert_eq!(
            size_of::<RawResourceDesc>(),
            size_of::<sys::CUDA_RESOURCE_DESC_st>()
        );
        assert_eq!(
            align_of::<RawResourceDesc>(),
            align_of::<sys::CUDA_RESOURCE_DESC_st>()
        );
        assert_eq!(
            size_of::<RawTextureDesc>(),
            size_of::<sys::CUDA_TEXTURE_DESC_st>()
        );
        assert_eq!(
            size_of::<RawArrayDesc>(),
            size_of::<sys::CUDA_ARRAY_DESCRIPTOR_st>()
        );
        assert_eq!(
            size_of::<RawArray3DDesc>(),
            size_of::<sys::CUDA_ARRAY3D_DESCRIPTOR_st>()
        );
        assert_eq!(size_of::<RawMemcpy3D>(), size_of::<sys::CUDA_MEMCPY3D_st>());
    }
}
