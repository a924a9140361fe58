//! Memcpy nodes built by hand (cuGraphAddMemcpyNode): a `CUDA_MEMCPY3D` of linear memory (host,
//! device or unified; rows `pitch` bytes apart, slices `height` rows apart) is checked when the
//! node is made and run at each launch as the 2D copies cuMemcpy2D makes, one per slice. A CUDA
//! array side is the device memory behind it (`array::flatten`), its box checked against the
//! array's size; cuMemcpy3D runs through the same code.

use cudarc::driver::sys::CUresult;

use crate::abi::CuResult;
use crate::array;
use crate::copy::{self, Side2D};
use crate::memory;

/// `CUDA_MEMCPY3D` field for field, with the memory-type enums as raw integers (a value from C
/// outside the Rust enum would be undefined behaviour) and pointers as addresses, so a node
/// can keep it and give it back unchanged.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RawMemcpy3D {
    /// Source column, in bytes.
    pub src_x_in_bytes: usize,
    /// Source row.
    pub src_y: usize,
    /// Source slice.
    pub src_z: usize,
    /// Source mipmap level (arrays only).
    pub src_lod: usize,
    /// Source `CUmemorytype`.
    pub src_memory_type: u32,
    /// Source host pointer (host memory type).
    pub src_host: usize,
    /// Source device address (device or unified memory type).
    pub src_device: u64,
    /// Source CUDA array.
    pub src_array: usize,
    /// Must be NULL.
    pub reserved0: usize,
    /// Bytes between source rows.
    pub src_pitch: usize,
    /// Rows between source slices.
    pub src_height: usize,
    /// Destination column, in bytes.
    pub dst_x_in_bytes: usize,
    /// Destination row.
    pub dst_y: usize,
    /// Destination slice.
    pub dst_z: usize,
    /// Destination mipmap level (arrays only).
    pub dst_lod: usize,
    /// Destination `CUmemorytype`.
    pub dst_memory_type: u32,
    /// Destination host pointer (host memory type).
    pub dst_host: usize,
    /// Destination device address (device or unified memory type).
    pub dst_device: u64,
    /// Destination CUDA array.
    pub dst_array: usize,
    /// Must be NULL.
    pub reserved1: usize,
    /// Bytes between destination rows.
    pub dst_pitch: usize,
    /// Rows between destination slices.
    pub dst_height: usize,
    /// Bytes per row.
    pub width_in_bytes: usize,
    /// Rows per slice.
    pub height: usize,
    /// Slices.
    pub depth: usize,
}

use crate::copy::{
    MEMORYTYPE_ARRAY as ARRAY, MEMORYTYPE_DEVICE as DEVICE, MEMORYTYPE_HOST as HOST,
    MEMORYTYPE_UNIFIED as UNIFIED,
};

/// One side of the copy as plain values.
struct End {
    memory_type: u32,
    addr: u64,
    x: usize,
    y: usize,
    z: usize,
    pitch: usize,
    slice_rows: usize,
}

impl RawMemcpy3D {
    fn src(&self) -> End {
        End {
            memory_type: self.src_memory_type,
            addr: pick(
                self.src_memory_type,
                self.src_host,
                self.src_device,
                self.src_array,
            ),
            x: self.src_x_in_bytes,
            y: self.src_y,
            z: self.src_z,
            pitch: self.src_pitch,
            slice_rows: self.src_height,
        }
    }

    fn dst(&self) -> End {
        End {
            memory_type: self.dst_memory_type,
            addr: pick(
                self.dst_memory_type,
                self.dst_host,
                self.dst_device,
                self.dst_array,
            ),
            x: self.dst_x_in_bytes,
            y: self.dst_y,
            z: self.dst_z,
            pitch: self.dst_pitch,
            slice_rows: self.dst_height,
        }
    }

    /// `len` bytes from `src` to `dst`, each a (`CUmemorytype`, address): one row (a captured
    /// cuMemcpy*Async).
    pub(crate) fn linear(src: (u32, u64), dst: (u32, u64), len: usize) -> RawMemcpy3D {
        let side = |(memory_type, addr)| Side2D {
            memory_type,
            addr,
            x: 0,
            y: 0,
            pitch: len,
        };
        RawMemcpy3D::planar(&side(src), &side(dst), len, 1)
    }

    /// cuMemcpy2D's copy of `height` rows of `width` bytes (a captured cuMemcpy2DAsync).
    pub(crate) fn planar(src: &Side2D, dst: &Side2D, width: usize, height: usize) -> RawMemcpy3D {
        let (src_host, src_device) = split(src);
        let (dst_host, dst_device) = split(dst);
        RawMemcpy3D {
            src_x_in_bytes: src.x,
            src_y: src.y,
            src_memory_type: src.memory_type,
            src_host,
            src_device,
            src_pitch: src.pitch,
            src_height: height,
            dst_x_in_bytes: dst.x,
            dst_y: dst.y,
            dst_memory_type: dst.memory_type,
            dst_host,
            dst_device,
            dst_pitch: dst.pitch,
            dst_height: height,
            width_in_bytes: width,
            height,
            depth: 1,
            ..RawMemcpy3D::default()
        }
    }

    /// One row in one slice (what cuGraphExecMemcpyNodeSetParams accepts).
    pub(crate) fn is_1d(&self) -> bool {
        self.height == 1 && self.depth == 1
    }
}

/// A side's address as the (host pointer, device address) fields of `CUDA_MEMCPY3D`.
fn split(side: &Side2D) -> (usize, u64) {
    if side.memory_type == HOST {
        (side.addr as usize, 0)
    } else {
        (0, side.addr)
    }
}

fn pick(memory_type: u32, host: usize, device: u64, array: usize) -> u64 {
    match memory_type {
        HOST => host as u64,
        ARRAY => array as u64,
        _ => device,
    }
}

impl End {
    /// An array side as the device memory behind the copy's box (`width` bytes × `height`
    /// rows × `depth` slices, checked to lie inside the array); other sides unchanged.
    fn resolved(self, width: usize, height: usize, depth: usize) -> CuResult<End> {
        if self.memory_type != ARRAY {
            return Ok(self);
        }
        let at = [self.x, self.y, self.z];
        let (addr, pitch, slice_rows) = array::flatten(self.addr, at, [width, height, depth])?;
        Ok(End {
            memory_type: DEVICE,
            addr,
            pitch,
            slice_rows,
            ..self
        })
    }

    /// The row `y` rows into slice `z` of the copy, as cuMemcpy2D's side.
    fn slice(&self, z: usize) -> CuResult<Side2D> {
        let y = self
            .z
            .checked_add(z)
            .and_then(|z| z.checked_mul(self.slice_rows))
            .and_then(|r| r.checked_add(self.y))
            .ok_or(CUresult::CUDA_ERROR_INVALID_VALUE)?;
        Ok(Side2D {
            memory_type: self.memory_type,
            addr: self.addr,
            x: self.x,
            y,
            pitch: self.pitch,
        })
    }

    /// Checks the side against the copy's shape: a known memory type, rows and slices that hold
    /// the copy, and (for device memory) one allocation holding every byte it touches.
    fn check(&self, width: usize, height: usize, depth: usize) -> CuResult<()> {
        match self.memory_type {
            HOST | DEVICE | UNIFIED => {}
            _ => return Err(CUresult::CUDA_ERROR_INVALID_VALUE),
        }
        let invalid = CUresult::CUDA_ERROR_INVALID_VALUE;
        if (height > 1 || depth > 1) && self.pitch < width {
            return Err(invalid);
        }
        if depth > 1 && self.slice_rows < height {
            return Err(invalid);
        }
        if self.addr == 0 {
            return Err(invalid);
        }
        if width == 0 || height == 0 || depth == 0 {
            return Ok(());
        }
        let first = self.slice(0)?;
        let last = self.slice(depth - 1)?;
        let offset = |s: &Side2D, row: usize| {
            s.y.checked_add(row)
                .and_then(|r| r.checked_mul(s.pitch))
                .and_then(|o| o.checked_add(s.x))
                .and_then(|o| self.addr.checked_add(o as u64))
                .ok_or(invalid)
        };
        let start = offset(&first, 0)?;
        let end = offset(&last, height - 1)?
            .checked_add(width as u64)
            .ok_or(invalid)?;
        let in_table = memory::find(start).is_some();
        if self.memory_type == DEVICE || (self.memory_type == UNIFIED && in_table) {
            memory::span(start, end - start).map(drop)?;
        }
        Ok(())
    }
}

/// Checks a copy for a memcpy node (as cuMemcpy3D would, at the time the node is made).
pub(crate) fn check(m: &RawMemcpy3D) -> CuResult<()> {
    if m.reserved0 != 0 || m.reserved1 != 0 {
        return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
    }
    let (w, h, d) = (m.width_in_bytes, m.height, m.depth);
    m.src().resolved(w, h, d)?.check(w, h, d)?;
    m.dst().resolved(w, h, d)?.check(w, h, d)
}

/// Queues the copy on `stream` (`None`: cuMemcpy3D's synchronous form): one 2D copy per slice.
pub(crate) fn run(m: &RawMemcpy3D, stream: Option<u64>) -> CuResult<()> {
    let (w, h, d) = (m.width_in_bytes, m.height, m.depth);
    let (src, dst) = (m.src().resolved(w, h, d)?, m.dst().resolved(w, h, d)?);
    for z in 0..d {
        copy::copy_2d(&src.slice(z)?, &dst.slice(z)?, w, h, stream)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn device_copy(src: u64, dst: u64, width: usize, height: usize, depth: usize) -> RawMemcpy3D {
        RawMemcpy3D {
            src_memory_type: DEVICE,
            src_device: src,
            src_pitch: width,
            src_height: height,
            dst_memory_type: DEVICE,
            dst_device: dst,
            dst_pitch: width,
            dst_height: height,
            width_in_bytes: width,
            height,
            depth,
            ..RawMemcpy3D::default()
        }
    }

    #[test]
    fn a_copy_reaching_past_its_allocation_or_from_a_dead_array_is_refused() {
        crate::driver::init(0).unwrap();
        let a = memory::alloc(u64::MAX, 4 * 64, memory::Kind::Device).unwrap();
        let b = memory::alloc(u64::MAX, 4 * 64, memory::Kind::Device).unwrap();
        assert_eq!(check(&device_copy(a, b, 64, 2, 2)), Ok(()));
        assert_eq!(
            check(&device_copy(a, b, 64, 2, 3)),
            Err(CUresult::CUDA_ERROR_INVALID_VALUE)
        );
        let mut from_array = device_copy(a, b, 64, 1, 1);
        from_array.src_memory_type = ARRAY;
        from_array.src_array = 0x10d;
        assert_eq!(check(&from_array), Err(CUresult::CUDA_ERROR_INVALID_VALUE));
        let mut narrow = device_copy(a, b, 64, 2, 1);
        narrow.dst_pitch = 32;
        assert_eq!(check(&narrow), Err(CUresult::CUDA_ERROR_INVALID_VALUE));
        memory::free(a, &[memory::Kind::Device]).unwrap();
        memory::free(b, &[memory::Kind::Device]).unwrap();
    }
}
