//! Exported entry points for pitched (2D) memory: `cudaMallocPitch`, `cudaMemcpy2D(Async)` (one
//! `cuMemcpy2D`, each side's memory type taken from the copy's direction, or unified addressing
//! for `cudaMemcpyDefault`) and `cudaMemset2D(Async)`, one `cuMemsetD8` per row unless the rows
//! are contiguous (softcuda has no `cuMemsetD2D8`, and this runtime calls only what both
//! drivers have).
//!
//! # Safety (all functions here)
//! Each pointer argument is NULL or valid as the CUDA runtime API documents it (a 2D copy's
//! pointers for `height` rows of their pitch, of the kind the direction names); NULL
//! out-pointers are `cudaErrorInvalidValue`.

#![allow(non_snake_case)]

use std::ffi::{c_int, c_uint, c_void};

use crate::api_memory::{self, Direction};
use crate::context;
use crate::driver::{DevPtr, Handle, Memcpy2D};
use crate::status::{Rt, api, check, code, put};

// Measured from CUDA 13.0's cuda.h with a C compiler.
const _: () = assert!(std::mem::size_of::<Memcpy2D>() == 128);

/// The element size `cudaMallocPitch` asks the driver to align rows for: the widest the driver
/// takes, so any element type is accessed aligned.
const PITCH_ELEMENT: c_uint = 16;

/// Allocates `height` rows of at least `width` bytes, each row starting at a multiple of the
/// returned pitch.
pub(crate) unsafe extern "C" fn cudaMallocPitch(
    ptr: *mut *mut c_void,
    pitch: *mut usize,
    width: usize,
    height: usize,
) -> c_int {
    api(|| {
        if ptr.is_null() || pitch.is_null() {
            return Err(code::INVALID_VALUE);
        }
        let d = context::current()?;
        let (mut p, mut row) = (0, 0);
        // SAFETY: valid out-pointers; the driver checks the sizes.
        check(unsafe { (d.cuMemAllocPitch_v2)(&mut p, &mut row, width, height, PITCH_ELEMENT) })?;
        // SAFETY: the contract above.
        unsafe {
            put(ptr, p as *mut c_void)?;
            put(pitch, row)
        }
    })
}

/// `CUmemorytype`.
const HOST: c_int = 1;
const DEVICE: c_int = 2;
const UNIFIED: c_int = 4;

/// The rows of a 2D copy: (`dst`, `dpitch`, `src`, `spitch`, `width`, `height`): `height` rows
/// of `width` bytes, `spitch` apart at `src` and `dpitch` apart at `dst`.
struct Rows(*mut c_void, usize, *const c_void, usize, usize, usize);

/// A 2D copy in the direction `kind`, on `stream` (`None`: the synchronous form).
fn copy_2d(rows: Rows, kind: c_int, stream: Option<Handle>) -> Result<(), Rt> {
    let Rows(dst, dpitch, src, spitch, width, height) = rows;
    let direction = api_memory::direction(kind)?;
    if width > dpitch || width > spitch {
        return Err(code::INVALID_PITCH_VALUE);
    }
    let d = context::current()?;
    if width == 0 || height == 0 {
        return Ok(());
    }
    if dst.is_null() || src.is_null() {
        return Err(code::INVALID_VALUE);
    }
    let (src_type, dst_type) = match direction {
        Direction::HostToHost => (HOST, HOST),
        Direction::HostToDevice => (HOST, DEVICE),
        Direction::DeviceToHost => (DEVICE, HOST),
        Direction::DeviceToDevice => (DEVICE, DEVICE),
        Direction::Default => (UNIFIED, UNIFIED),
    };
    let desc = Memcpy2D {
        src_x: 0,
        src_y: 0,
        src_type,
        src_host: src,
        src_device: src as DevPtr,
        src_array: std::ptr::null_mut(),
        src_pitch: spitch,
        dst_x: 0,
        dst_y: 0,
        dst_type,
        dst_host: dst,
        dst_device: dst as DevPtr,
        dst_array: std::ptr::null_mut(),
        dst_pitch: dpitch,
        width,
        height,
    };
    // SAFETY: `desc` lives across the call and names the program's memory, valid for the rows
    // it spans (the contract above); the driver checks device ranges and the stream.
    check(unsafe {
        match stream {
            None => (d.cuMemcpy2D_v2)(&desc),
            Some(s) => (d.cuMemcpy2DAsync_v2)(&desc, s),
        }
    })
}

/// Copies `height` rows of `width` bytes between memory of pitches `spitch` and `dpitch`.
pub(crate) unsafe extern "C" fn cudaMemcpy2D(
    dst: *mut c_void,
    dpitch: usize,
    src: *const c_void,
    spitch: usize,
    width: usize,
    height: usize,
    kind: c_int,
) -> c_int {
    api(|| copy_2d(Rows(dst, dpitch, src, spitch, width, height), kind, None))
}

/// [`cudaMemcpy2D`] on a stream.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe extern "C" fn cudaMemcpy2DAsync(
    dst: *mut c_void,
    dpitch: usize,
    src: *const c_void,
    spitch: usize,
    width: usize,
    height: usize,
    kind: c_int,
    stream: Handle,
) -> c_int {
    let rows = Rows(dst, dpitch, src, spitch, width, height);
    api(|| copy_2d(rows, kind, Some(stream)))
}

/// Sets `height` rows of `width` bytes, `pitch` apart, to `value`'s low byte.
fn fill_2d(
    ptr: *mut c_void,
    pitch: usize,
    value: c_int,
    width: usize,
    height: usize,
    stream: Option<Handle>,
) -> Result<(), Rt> {
    if width > pitch {
        return Err(code::INVALID_VALUE);
    }
    let d = context::current()?;
    if width == 0 || height == 0 {
        return Ok(());
    }
    if ptr.is_null() {
        return Err(code::INVALID_VALUE);
    }
    let byte = value.to_le_bytes()[0];
    // Contiguous rows are one fill; otherwise one per row.
    let (rows, row_bytes) = if width == pitch {
        (1, width.checked_mul(height).ok_or(code::INVALID_VALUE)?)
    } else {
        (height, width)
    };
    let base = ptr as DevPtr;
    for row in 0..rows {
        let at = (row as u64)
            .checked_mul(pitch as u64)
            .and_then(|off| base.checked_add(off))
            .ok_or(code::INVALID_VALUE)?;
        // SAFETY: plain values; the driver checks the device range and the stream.
        check(unsafe {
            match stream {
                None => (d.cuMemsetD8_v2)(at, byte, row_bytes),
                Some(s) => (d.cuMemsetD8Async)(at, byte, row_bytes, s),
            }
        })?;
    }
    Ok(())
}

/// Fills pitched device memory.
pub(crate) unsafe extern "C" fn cudaMemset2D(
    ptr: *mut c_void,
    pitch: usize,
    value: c_int,
    width: usize,
    height: usize,
) -> c_int {
    api(|| fill_2d(ptr, pitch, value, width, height, None))
}

/// Fills pitched device memory on `stream`.
pub(crate) unsafe extern "C" fn cudaMemset2DAsync(
    ptr: *mut c_void,
    pitch: usize,
    value: c_int,
    width: usize,
    height: usize,
    stream: Handle,
) -> c_int {
    api(|| fill_2d(ptr, pitch, value, width, height, Some(stream)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_wider_than_its_pitch_and_an_unknown_direction_are_refused_before_any_driver_call() {
        let (p, q) = (0x1000 as *mut c_void, 0x2000 as *const c_void);
        let rows = |dpitch, spitch| Rows(p, dpitch, q, spitch, 9, 1);
        let pitch = Err(code::INVALID_PITCH_VALUE);
        assert_eq!(copy_2d(rows(8, 16), 1, None), pitch);
        assert_eq!(copy_2d(rows(16, 8), 1, None), pitch);
        assert_eq!(
            copy_2d(rows(16, 16), 7, None),
            Err(code::INVALID_MEMCPY_DIRECTION)
        );
        assert_eq!(fill_2d(p, 8, 0, 9, 1, None), Err(code::INVALID_VALUE));
    }
}
