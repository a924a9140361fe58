//! Texture and surface objects (cuTexObjectCreate, cuSurfObjectCreate and their queries): a
//! process-wide handle naming a resource (an array, linear memory or pitched 2D memory) and, for
//! a texture, how it is sampled. Kernels reach them through `ptxvm::Memory::texture` /
//! `surface`; a handle that is not live there is a kernel fault, never a read of freed state.

use std::sync::Arc;

use cudarc::driver::sys::CUresult;

use crate::abi::CuResult;
use crate::array;
use crate::context;
use crate::driver::Tag;
use crate::handles::Table;
use crate::memory;

/// `CU_RESOURCE_TYPE_*`.
const RESOURCE_ARRAY: u32 = 0;
const RESOURCE_MIPMAPPED_ARRAY: u32 = 1;
const RESOURCE_LINEAR: u32 = 2;
const RESOURCE_PITCH2D: u32 = 3;

/// `CU_TRSF_*` flags softcuda honours or may ignore: read as integer, normalized coordinates,
/// trilinear optimisation off and seamless cubemaps (neither changes a non-mipmapped 2D read).
const TRSF_READ_AS_INTEGER: u32 = 1;
const TRSF_NORMALIZED_COORDINATES: u32 = 2;
const TRSF_SRGB: u32 = 0x10;
const TRSF_KNOWN: u32 = 0x1 | 0x2 | 0x10 | 0x20 | 0x40;

/// The alignment a linear or pitched resource's address needs: cuMemAlloc's 256 bytes (NVIDIA
/// asks for `CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT`, 512, which its allocations meet; softcuda's
/// only guarantee 256). The pitch must be a multiple of `TEXTURE_PITCH_ALIGNMENT` (32).
const TEXTURE_ALIGNMENT: u64 = memory::ALIGN as u64;
const PITCH_ALIGNMENT: u64 = 32;

/// `CUDA_RESOURCE_DESC`: the type, its 128-byte union as words (read by the type's layout:
/// an array handle; or devPtr, format | channels << 32, then sizeInBytes or width, height,
/// pitchInBytes), and the flags.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RawResourceDesc {
    /// `CUresourcetype`.
    pub res_type: u32,
    /// The union `res`.
    pub res: [u64; 16],
    /// Must be 0.
    pub flags: u32,
}

/// `CUDA_TEXTURE_DESC`, enums raw.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RawTextureDesc {
    /// `CUaddress_mode` per dimension.
    pub address_mode: [u32; 3],
    /// `CUfilter_mode`.
    pub filter_mode: u32,
    /// `CU_TRSF_*`.
    pub flags: u32,
    /// Ignored (no anisotropic filtering).
    pub max_anisotropy: u32,
    /// Mipmaps: ignored (no mipmapped arrays).
    pub mipmap_filter_mode: u32,
    /// Ignored.
    pub mipmap_level_bias: f32,
    /// Ignored.
    pub min_mipmap_level_clamp: f32,
    /// Ignored.
    pub max_mipmap_level_clamp: f32,
    /// What border addressing reads.
    pub border_color: [f32; 4],
    /// Reserved.
    pub reserved: [i32; 12],
}

struct TexObject {
    resource: RawResourceDesc,
    desc: RawTextureDesc,
    texture: ptxvm::Texture,
}

struct SurfObject {
    resource: RawResourceDesc,
    surface: ptxvm::Surface,
}

static TEXTURES: Table<TexObject> = Table::new(Tag::TexObject);
static SURFACES: Table<SurfObject> = Table::new(Tag::SurfObject);

/// The image a resource names, checked as cuTexObjectCreate documents (alignment, pitch,
/// bounds inside one allocation).
fn image(r: &RawResourceDesc) -> CuResult<ptxvm::Image> {
    let invalid = Err(CUresult::CUDA_ERROR_INVALID_VALUE);
    if r.flags != 0 {
        return invalid;
    }
    let (ptr, fmt) = (r.res[0], r.res[1]);
    let texel = |format: ptxvm::TexelFormat, ch: u8| format.bytes() * u64::from(ch);
    match r.res_type {
        RESOURCE_ARRAY => array::get(r.res[0])
            .map_err(|_| CUresult::CUDA_ERROR_INVALID_VALUE)?
            .image(),
        RESOURCE_LINEAR | RESOURCE_PITCH2D => {
            let format = array::format(fmt as u32)?;
            let ch = array::channels((fmt >> 32) as u32)?;
            if ptr == 0 || !ptr.is_multiple_of(TEXTURE_ALIGNMENT) {
                return invalid;
            }
            let tb = texel(format, ch);
            let (width, height, pitch) = if r.res_type == RESOURCE_LINEAR {
                (r.res[2] / tb, 1, r.res[2])
            } else {
                (r.res[2], r.res[3], r.res[4])
            };
            let row = width
                .checked_mul(tb)
                .ok_or(CUresult::CUDA_ERROR_INVALID_VALUE)?;
            if width == 0
                || height == 0
                || row > pitch
                || (r.res_type == RESOURCE_PITCH2D && !pitch.is_multiple_of(PITCH_ALIGNMENT))
            {
                return invalid;
            }
            let bytes = pitch
                .checked_mul(height - 1)
                .and_then(|b| b.checked_add(row))
                .ok_or(CUresult::CUDA_ERROR_INVALID_VALUE)?;
            memory::span(ptr, bytes)?;
            Ok(ptxvm::Image {
                base: ptr,
                format,
                channels: ch,
                width,
                height,
                depth: 1,
                row_pitch: pitch,
                slice_pitch: pitch * height,
                linear: r.res_type == RESOURCE_LINEAR,
            })
        }
        RESOURCE_MIPMAPPED_ARRAY => Err(CUresult::CUDA_ERROR_NOT_SUPPORTED),
        _ => invalid,
    }
}

/// The sampler a texture descriptor asks for.
fn sampler(d: &RawTextureDesc) -> CuResult<ptxvm::Sampler> {
    use ptxvm::{AddressMode, FilterMode};
    let invalid = CUresult::CUDA_ERROR_INVALID_VALUE;
    if d.flags & !TRSF_KNOWN != 0 {
        return Err(invalid);
    }
    if d.flags & TRSF_SRGB != 0 {
        return Err(CUresult::CUDA_ERROR_NOT_SUPPORTED);
    }
    let mut address = [AddressMode::Wrap; 3];
    for (a, &raw) in address.iter_mut().zip(&d.address_mode) {
        *a = match raw {
            0 => AddressMode::Wrap,
            1 => AddressMode::Clamp,
            2 => AddressMode::Mirror,
            3 => AddressMode::Border,
            _ => return Err(invalid),
        };
    }
    let filter = match d.filter_mode {
        0 => FilterMode::Point,
        1 => FilterMode::Linear,
        _ => return Err(invalid),
    };
    Ok(ptxvm::Sampler {
        address,
        filter,
        normalized_coords: d.flags & TRSF_NORMALIZED_COORDINATES != 0,
        read_as_integer: d.flags & TRSF_READ_AS_INTEGER != 0,
        border: d.border_color,
    })
}

/// cuTexObjectCreate (without a resource view: softcuda has none).
pub(crate) fn create_texture(r: &RawResourceDesc, d: &RawTextureDesc) -> CuResult<u64> {
    context::live()?;
    let texture = ptxvm::Texture {
        image: image(r)?,
        sampler: sampler(d)?,
    };
    let (h, _) = TEXTURES.insert_with(|_| {
        Arc::new(TexObject {
            resource: *r,
            desc: *d,
            texture,
        })
    });
    Ok(h)
}

/// cuSurfObjectCreate: an array created with `CUDA_ARRAY3D_SURFACE_LDST`.
pub(crate) fn create_surface(r: &RawResourceDesc) -> CuResult<u64> {
    context::live()?;
    let invalid = CUresult::CUDA_ERROR_INVALID_VALUE;
    if r.res_type != RESOURCE_ARRAY {
        return Err(invalid);
    }
    let a = array::get(r.res[0]).map_err(|_| invalid)?;
    if a.desc.flags & array::SURFACE_LDST == 0 {
        return Err(invalid);
    }
    let surface = ptxvm::Surface { image: a.image()? };
    let (h, _) = SURFACES.insert_with(|_| {
        Arc::new(SurfObject {
            resource: *r,
            surface,
        })
    });
    Ok(h)
}

/// cuTexObjectDestroy; a handle that is not live is `CUDA_ERROR_INVALID_VALUE`.
pub(crate) fn destroy_texture(h: u64) -> CuResult<()> {
    TEXTURES
        .remove(h)
        .map(drop)
        .ok_or(CUresult::CUDA_ERROR_INVALID_VALUE)
}

/// cuSurfObjectDestroy; as `destroy_texture`.
pub(crate) fn destroy_surface(h: u64) -> CuResult<()> {
    SURFACES
        .remove(h)
        .map(drop)
        .ok_or(CUresult::CUDA_ERROR_INVALID_VALUE)
}

/// cuTexObjectGetResourceDesc / GetTextureDesc: the descriptors as given.
pub(crate) fn texture_descs(h: u64) -> CuResult<(RawResourceDesc, RawTextureDesc)> {
    let t = TEXTURES.get(h).ok_or(CUresult::CUDA_ERROR_INVALID_VALUE)?;
    Ok((t.resource, t.desc))
}

/// cuSurfObjectGetResourceDesc.
pub(crate) fn surface_resource(h: u64) -> CuResult<RawResourceDesc> {
    let s = SURFACES.get(h).ok_or(CUresult::CUDA_ERROR_INVALID_VALUE)?;
    Ok(s.resource)
}

/// A kernel's view of texture `h`.
pub(crate) fn texture(h: u64) -> Option<ptxvm::Texture> {
    TEXTURES.get(h).map(|t| t.texture)
}

/// A kernel's view of surface `h`.
pub(crate) fn surface(h: u64) -> Option<ptxvm::Surface> {
    SURFACES.get(h).map(|s| s.surface)
}
