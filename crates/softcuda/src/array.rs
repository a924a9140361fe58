//! CUDA arrays (cuArrayCreate, cuArray3DCreate, their descriptors, cuArrayDestroy): opaque
//! images of 1, 2 or 4 channels of one format, 1D, 2D, 3D or layered. softcuda stores an array
//! as one device allocation of its context (kind `Array`, so cuMemFree refuses it), rows packed
//! `width * texel` bytes apart and slices (or layers) `height` rows apart; copies into and out of
//! it are the linear copies of those rows (`flatten`), and texture and surface objects describe
//! it to ptxvm as an `Image`.

use std::sync::Arc;

use cudarc::driver::sys::CUresult;

use crate::abi::CuResult;
use crate::context;
use crate::driver::Tag;
use crate::handles::Table;
use crate::memory::{self, Kind};

/// `CUDA_ARRAY3D_LAYERED`, `SURFACE_LDST`, `TEXTURE_GATHER`.
pub(crate) const LAYERED: u32 = 1;
pub(crate) const SURFACE_LDST: u32 = 2;
const TEXTURE_GATHER: u32 = 8;
/// Every flag CUDA 13 defines (depth texture, colour attachment, sparse, deferred mapping,
/// video encode/decode besides the four above).
const KNOWN_FLAGS: u32 = 0x1ff;

/// The size limits softcuda enforces and its device attributes report (the H200's).
pub(crate) const MAX_1D: usize = 131_072;
pub(crate) const MAX_2D: [usize; 2] = [131_072, 65_536];
pub(crate) const MAX_3D: usize = 16_384;
pub(crate) const MAX_LAYERED: [usize; 2] = [32_768, 2048];
/// A `TEXTURE_GATHER` array: 2D only, at most this wide and high.
pub(crate) const MAX_GATHER: usize = 32_768;

/// `CUDA_ARRAY3D_DESCRIPTOR` with its format as a raw integer (a value from C outside the Rust
/// enum would be undefined behaviour).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RawArray3DDesc {
    /// Texels per row.
    pub width: usize,
    /// Rows (0: a 1D array).
    pub height: usize,
    /// Slices, or layers of a layered array (0: not 3D).
    pub depth: usize,
    /// `CUarray_format`.
    pub format: u32,
    /// 1, 2 or 4.
    pub channels: u32,
    /// `CUDA_ARRAY3D_*` flags.
    pub flags: u32,
}

/// `CUDA_ARRAY_DESCRIPTOR` (cuArrayCreate's 1D/2D form), format raw.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RawArrayDesc {
    /// Texels per row.
    pub width: usize,
    /// Rows (0: a 1D array).
    pub height: usize,
    /// `CUarray_format`.
    pub format: u32,
    /// 1, 2 or 4.
    pub channels: u32,
}

/// A live array.
pub(crate) struct Array {
    /// Device address of texel (0, 0, 0).
    pub(crate) base: u64,
    /// The descriptor it was created with.
    pub(crate) desc: RawArray3DDesc,
}

static ARRAYS: Table<Array> = Table::new(Tag::Array);

/// The channel type of a `CUarray_format`, or `CUDA_ERROR_INVALID_VALUE`.
pub(crate) fn format(raw: u32) -> CuResult<ptxvm::TexelFormat> {
    use ptxvm::TexelFormat as F;
    Ok(match raw {
        1 => F::U8,
        2 => F::U16,
        3 => F::U32,
        8 => F::S8,
        9 => F::S16,
        10 => F::S32,
        16 => F::F16,
        32 => F::F32,
        _ => return Err(CUresult::CUDA_ERROR_INVALID_VALUE),
    })
}

/// Checks a channel count (1, 2 or 4).
pub(crate) fn channels(n: u32) -> CuResult<u8> {
    match n {
        1 | 2 | 4 => Ok(n as u8),
        _ => Err(CUresult::CUDA_ERROR_INVALID_VALUE),
    }
}

impl Array {
    /// Bytes of one texel.
    pub(crate) fn texel_bytes(&self) -> usize {
        format(self.desc.format).map_or(0, |f| f.bytes() as usize) * self.desc.channels as usize
    }

    /// Bytes of one row.
    pub(crate) fn row_bytes(&self) -> usize {
        self.desc.width * self.texel_bytes()
    }

    /// Rows per slice (1 for a 1D array).
    pub(crate) fn rows(&self) -> usize {
        self.desc.height.max(1)
    }

    /// Slices or layers (1 for a 1D or 2D array).
    pub(crate) fn slices(&self) -> usize {
        self.desc.depth.max(1)
    }

    /// The array as ptxvm sees it.
    pub(crate) fn image(&self) -> CuResult<ptxvm::Image> {
        Ok(ptxvm::Image {
            base: self.base,
            format: format(self.desc.format)?,
            channels: channels(self.desc.channels)?,
            width: self.desc.width as u64,
            height: self.rows() as u64,
            depth: self.slices() as u64,
            row_pitch: self.row_bytes() as u64,
            slice_pitch: (self.row_bytes() * self.rows()) as u64,
            linear: false,
        })
    }
}

/// Checks a descriptor against what cuArray3DCreate accepts and softcuda's limits.
fn check(d: &RawArray3DDesc) -> CuResult<()> {
    let invalid = Err(CUresult::CUDA_ERROR_INVALID_VALUE);
    format(d.format)?;
    channels(d.channels)?;
    if d.flags & !KNOWN_FLAGS != 0 {
        return invalid;
    }
    if d.flags & !(LAYERED | SURFACE_LDST | TEXTURE_GATHER) != 0 {
        // Cubemaps, depth textures, colour attachments, sparse and deferred-mapping arrays.
        return Err(CUresult::CUDA_ERROR_NOT_SUPPORTED);
    }
    let layered = d.flags & LAYERED != 0;
    let fits = match (d.width, d.height, d.depth) {
        (0, _, _) => false,
        (w, 0, 0) => w <= MAX_1D,
        (w, h, 0) => w <= MAX_2D[0] && h <= MAX_2D[1],
        (w, h, l) if layered => w <= MAX_LAYERED[0] && h <= MAX_LAYERED[0] && l <= MAX_LAYERED[1],
        (_, 0, _) => false,
        (w, h, z) => w <= MAX_3D && h <= MAX_3D && z <= MAX_3D,
    };
    let gather_2d = d.height > 0 && d.depth == 0 && !layered && d.width.max(d.height) <= MAX_GATHER;
    if !fits || (layered && d.depth == 0) || (d.flags & TEXTURE_GATHER != 0 && !gather_2d) {
        return invalid;
    }
    Ok(())
}

/// cuArray3DCreate: a zeroed array in the current context.
pub(crate) fn create(d: &RawArray3DDesc) -> CuResult<u64> {
    let ctx = context::live()?;
    check(d)?;
    let shape = Array { base: 0, desc: *d };
    let bytes = shape
        .row_bytes()
        .checked_mul(shape.rows())
        .and_then(|b| b.checked_mul(shape.slices()))
        .ok_or(CUresult::CUDA_ERROR_INVALID_VALUE)?;
    let base = memory::alloc(ctx.id, bytes as u64, Kind::Array)?;
    let (handle, _) = ARRAYS.insert_with(|_| Arc::new(Array { base, ..shape }));
    Ok(handle)
}

/// cuArrayCreate: the 1D/2D form.
pub(crate) fn create_2d(d: &RawArrayDesc) -> CuResult<u64> {
    create(&RawArray3DDesc {
        width: d.width,
        height: d.height,
        depth: 0,
        format: d.format,
        channels: d.channels,
        flags: 0,
    })
}

/// The live array `handle`; anything else is `CUDA_ERROR_INVALID_HANDLE`.
pub(crate) fn get(handle: u64) -> CuResult<Arc<Array>> {
    ARRAYS
        .get(handle)
        .ok_or(CUresult::CUDA_ERROR_INVALID_HANDLE)
}

/// cuArrayDestroy: forgets the array and frees its memory (work already queued on it keeps
/// its bytes alive until it finishes; objects made over it fault from then on).
pub(crate) fn destroy(handle: u64) -> CuResult<()> {
    let a = ARRAYS
        .remove(handle)
        .ok_or(CUresult::CUDA_ERROR_INVALID_HANDLE)?;
    // Gone already when its context was destroyed: nothing left to free.
    let _ = memory::free(a.base, &[Kind::Array]);
    Ok(())
}

/// One side of a copy whose memory type is `CU_MEMORYTYPE_ARRAY`, as the linear side it is:
/// `(device address, pitch, rows per slice)`, once the copy's box (`x` in bytes, `y`, `z`,
/// `width` bytes × `height` rows × `depth` slices) is checked to lie inside the array.
pub(crate) fn flatten(
    handle: u64,
    at: [usize; 3],
    extent: [usize; 3],
) -> CuResult<(u64, usize, usize)> {
    let a = get(handle).map_err(|_| CUresult::CUDA_ERROR_INVALID_VALUE)?;
    let limits = [a.row_bytes(), a.rows(), a.slices()];
    for d in 0..3 {
        let end = at[d].checked_add(extent[d]);
        if end.is_none_or(|e| e > limits[d]) {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        }
    }
    Ok((a.base, a.row_bytes(), a.rows()))
}

/// `[offset, offset + len)` of the array's bytes as a device address (cuMemcpyHtoA and kin).
pub(crate) fn linear(handle: u64, offset: usize, len: usize) -> CuResult<u64> {
    let a = get(handle)?;
    let total = a.row_bytes() * a.rows() * a.slices();
    if offset.checked_add(len).is_none_or(|e| e > total) {
        return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
    }
    Ok(a.base + offset as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn desc(width: usize, height: usize, depth: usize, flags: u32) -> RawArray3DDesc {
        RawArray3DDesc {
            width,
            height,
            depth,
            format: 32,
            channels: 1,
            flags,
        }
    }

    #[test]
    fn descriptors_are_checked_as_cuarray3dcreate_documents() {
        assert_eq!(check(&desc(16, 0, 0, 0)), Ok(()));
        assert_eq!(check(&desc(16, 8, 4, 0)), Ok(()));
        assert_eq!(check(&desc(16, 0, 4, LAYERED)), Ok(()));
        let invalid = Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        assert_eq!(check(&desc(0, 8, 0, 0)), invalid);
        assert_eq!(check(&desc(16, 0, 4, 0)), invalid);
        assert_eq!(check(&desc(16, 8, 0, LAYERED)), invalid);
        assert_eq!(check(&desc(16, 8, 0, TEXTURE_GATHER)), Ok(()));
        assert_eq!(check(&desc(16, 0, 0, TEXTURE_GATHER)), invalid);
        assert_eq!(check(&desc(16, 8, 2, TEXTURE_GATHER)), invalid);
        assert_eq!(check(&desc(MAX_3D + 1, 2, 2, 0)), invalid);
        assert_eq!(
            check(&RawArray3DDesc {
                channels: 3,
                ..desc(4, 0, 0, 0)
            }),
            invalid
        );
        assert_eq!(
            check(&RawArray3DDesc {
                format: 4,
                ..desc(4, 0, 0, 0)
            }),
            invalid
        );
        assert_eq!(check(&desc(4, 4, 0, 1 << 12)), invalid);
        assert_eq!(
            check(&desc(4, 4, 6, 4 /* CUDA_ARRAY3D_CUBEMAP */)),
            Err(CUresult::CUDA_ERROR_NOT_SUPPORTED)
        );
    }
}
