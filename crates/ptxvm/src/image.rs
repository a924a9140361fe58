//! Texture and surface objects as the VM sees them: the layout of the texels a handle names
//! (`Image`), how a texture samples them (`Sampler`), and the sampling arithmetic NVIDIA
//! documents (CUDA C++ Programming Guide, "Texture Fetching"): address modes applied to texel
//! indices, point filtering, and linear filtering with 9-bit fixed-point weights (8 fractional
//! bits). The driver describes its objects through `Memory::texture` / `Memory::surface`; the
//! texels themselves are read through `Memory::translate`, so an object over freed memory is an
//! illegal-address fault, never a read of freed bytes.

use crate::ir::Geom;

/// The element type of one channel of a texel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TexelFormat {
    /// `CU_AD_FORMAT_UNSIGNED_INT8`
    U8,
    /// `CU_AD_FORMAT_UNSIGNED_INT16`
    U16,
    /// `CU_AD_FORMAT_UNSIGNED_INT32`
    U32,
    /// `CU_AD_FORMAT_SIGNED_INT8`
    S8,
    /// `CU_AD_FORMAT_SIGNED_INT16`
    S16,
    /// `CU_AD_FORMAT_SIGNED_INT32`
    S32,
    /// `CU_AD_FORMAT_HALF`
    F16,
    /// `CU_AD_FORMAT_FLOAT`
    F32,
}

impl TexelFormat {
    /// Bytes of one channel.
    pub fn bytes(self) -> u64 {
        match self {
            TexelFormat::U8 | TexelFormat::S8 => 1,
            TexelFormat::U16 | TexelFormat::S16 | TexelFormat::F16 => 2,
            _ => 4,
        }
    }

    fn is_float(self) -> bool {
        matches!(self, TexelFormat::F16 | TexelFormat::F32)
    }
}

/// Where an object's texels are and how they are laid out. Texel `(x, y, z)` (z: the slice of
/// a 3D image or the layer of a layered one) starts at
/// `base + z * slice_pitch + y * row_pitch + x * texel_bytes()`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Image {
    /// Device address of texel (0, 0, 0).
    pub base: u64,
    /// Channel type.
    pub format: TexelFormat,
    /// Channels per texel: 1, 2 or 4.
    pub channels: u8,
    /// Texels per row.
    pub width: u64,
    /// Rows (1 for a 1D image).
    pub height: u64,
    /// Slices of a 3D image, or layers of a layered one (1 otherwise).
    pub depth: u64,
    /// Bytes between rows.
    pub row_pitch: u64,
    /// Bytes between slices or layers.
    pub slice_pitch: u64,
    /// Linear memory (`CU_RESOURCE_TYPE_LINEAR`): an index past the end reads zero, whatever
    /// the address mode, and there is no filtering.
    pub linear: bool,
}

impl Image {
    /// Bytes of one texel.
    pub fn texel_bytes(&self) -> u64 {
        self.format.bytes() * u64::from(self.channels)
    }
}

/// `CUaddress_mode`: what an index outside the image reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddressMode {
    /// Repeats the image (normalized coordinates only; clamp otherwise).
    Wrap,
    /// The nearest edge texel.
    Clamp,
    /// Repeats the image mirrored every other time (normalized coordinates only).
    Mirror,
    /// The border colour.
    Border,
}

/// `CUfilter_mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FilterMode {
    /// The texel the coordinate falls in.
    Point,
    /// Weighted average of the 2, 4 or 8 nearest texels.
    Linear,
}

/// How a texture object reads its image (`CUDA_TEXTURE_DESC` as the VM needs it).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sampler {
    /// Per dimension (x, y, z).
    pub address: [AddressMode; 3],
    /// Point or linear.
    pub filter: FilterMode,
    /// Coordinates in [0, 1) rather than in texels (`CU_TRSF_NORMALIZED_COORDINATES`).
    pub normalized_coords: bool,
    /// Integer formats read as integers (`CU_TRSF_READ_AS_INTEGER`); otherwise 8- and 16-bit
    /// ones are promoted to floats in [0, 1] (unsigned) or [-1, 1] (signed).
    pub read_as_integer: bool,
    /// What `AddressMode::Border` reads.
    pub border: [f32; 4],
}

/// A texture object: an image and how to sample it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Texture {
    /// The texels.
    pub image: Image,
    /// The sampling state.
    pub sampler: Sampler,
}

/// A surface object: an image read and written by byte coordinates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Surface {
    /// The texels.
    pub image: Image,
}

/// A texture read's result: floats or integers (as register bits).
pub(crate) type Texel = [u32; 4];

/// Maps index `i` into `[0, n)` by `mode`; `None`: outside, read the border.
pub(crate) fn address(i: i64, n: u64, mode: AddressMode, normalized: bool) -> Option<u64> {
    let n = n.max(1) as i64;
    let mode = match mode {
        // Wrap and mirror need normalized coordinates; NVIDIA clamps otherwise.
        AddressMode::Wrap | AddressMode::Mirror if !normalized => AddressMode::Clamp,
        m => m,
    };
    Some(match mode {
        AddressMode::Clamp => i.clamp(0, n - 1) as u64,
        AddressMode::Border => {
            if i < 0 || i >= n {
                return None;
            }
            i as u64
        }
        AddressMode::Wrap => i.rem_euclid(n) as u64,
        AddressMode::Mirror => {
            let m = i.rem_euclid(2 * n);
            (if m < n { m } else { 2 * n - 1 - m }) as u64
        }
    })
}

/// A channel's value as read: a float (filtered or promoted) or raw integer bits.
pub(crate) fn channel_value(format: TexelFormat, raw: u64, promote: bool) -> Value {
    match format {
        TexelFormat::F32 => Value::F(f32::from_bits(raw as u32)),
        TexelFormat::F16 => Value::F(crate::vm::from_half(raw as u16, false)),
        TexelFormat::U8 if promote => Value::F(raw as u8 as f32 / 255.0),
        TexelFormat::U16 if promote => Value::F(raw as u16 as f32 / 65535.0),
        TexelFormat::S8 if promote => Value::F((raw as i8 as f32 / 127.0).max(-1.0)),
        TexelFormat::S16 if promote => Value::F((raw as i16 as f32 / 32767.0).max(-1.0)),
        TexelFormat::S8 => Value::I(raw as i8 as i32 as u32),
        TexelFormat::S16 => Value::I(raw as i16 as i32 as u32),
        _ => Value::I(raw as u32),
    }
}

/// One channel as the texture unit hands it on.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Value {
    F(f32),
    I(u32),
}

impl Value {
    pub(crate) fn bits(self) -> u32 {
        match self {
            Value::F(f) => f.to_bits(),
            Value::I(i) => i,
        }
    }
    fn float(self) -> f32 {
        match self {
            Value::F(f) => f,
            Value::I(i) => i as i32 as f32,
        }
    }
}

/// Whether a sampler hands out floats for `format` (and so may filter).
pub(crate) fn returns_float(s: &Sampler, format: TexelFormat) -> bool {
    format.is_float() || (!s.read_as_integer && format.bytes() < 4)
}

/// The filter weight of the upper texel for unnormalized coordinate `u` (already shifted by
/// -0.5): NVIDIA keeps it in 9-bit fixed point with 8 fractional bits.
pub(crate) fn weight(u: f32) -> (i64, f32) {
    let i = u.floor();
    let frac = u - i;
    (index(i), (frac * 256.0).round() / 256.0)
}

/// A floored coordinate as a texel index, bounded so that neighbour arithmetic cannot overflow
/// (a hostile kernel may pass infinities: they land far outside, where the address mode rules).
fn index(floored: f32) -> i64 {
    floored.clamp(-FAR, FAR) as i64
}

/// How far outside a texture a coordinate is kept (2^40 texels).
const FAR: f32 = (1u64 << 40) as f32;

/// A texel's missing channels: 0 for y and z, 1 for w (as a float or integer).
pub(crate) fn fill_missing(t: &mut [Value; 4], channels: u8, float: bool) {
    for (c, v) in t.iter_mut().enumerate().skip(usize::from(channels)) {
        let one = if float { Value::F(1.0) } else { Value::I(1) };
        *v = if c == 3 {
            one
        } else if float {
            Value::F(0.0)
        } else {
            Value::I(0)
        };
    }
}

/// Blends `(1 - a) * lo + a * hi` channel by channel.
pub(crate) fn lerp(lo: &[Value; 4], hi: &[Value; 4], a: f32) -> [Value; 4] {
    let mut out = *lo;
    for c in 0..4 {
        out[c] = Value::F((1.0 - a) * lo[c].float() + a * hi[c].float());
    }
    out
}

/// The coordinates a geometry samples, and whether its z is a layer index.
pub(crate) fn dims(geom: Geom) -> (usize, bool) {
    match geom {
        Geom::D1 => (1, false),
        Geom::D2 => (2, false),
        Geom::D3 => (3, false),
        Geom::A1 => (1, true),
        Geom::A2 => (2, true),
    }
}

/// What a texture read returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Read {
    /// `tex`: the (filtered) texel; `int_coords` for `.s32` coordinates.
    Sample { int_coords: bool },
    /// `tld4`: channel `comp` of the four texels linear filtering would blend, counter-clockwise
    /// from the lower left: (i, j+1), (i+1, j+1), (i+1, j), (i, j).
    Gather { comp: u8 },
}

/// Reads texture `t` at `coords` (register bits: f32, or s32 for integer coordinates; z of a
/// layered geometry is the u32 layer) as `read` says, reading texel `(x, y, z)`'s raw channels
/// through `fetch`. Returns the four result registers' low 32 bits.
pub(crate) fn sample<E>(
    t: &Texture,
    geom: Geom,
    read: Read,
    coords: [u64; 3],
    mut fetch: impl FnMut(u64, u64, u64) -> Result<[u64; 4], E>,
) -> Result<Texel, E> {
    let (img, s) = (&t.image, &t.sampler);
    let (n, layered) = dims(geom);
    let int_coords = read == (Read::Sample { int_coords: true });
    let size = [img.width, img.height, img.depth];
    let float = returns_float(s, img.format);
    let promote = !s.read_as_integer;
    let layer = layered.then(|| u64::from(coords[2] as u32).min(img.depth.max(1) - 1));
    let border: [Value; 4] = s.border.map(|b| {
        if float {
            Value::F(b)
        } else {
            Value::I(b as u32)
        }
    });
    // One texel by integer index per sampled dimension: address mode applied, border or linear
    // memory's zero outside.
    let mut texel = |idx: [i64; 3]| -> Result<[Value; 4], E> {
        let mut at = [0u64; 3];
        for d in 0..n {
            let mapped = if img.linear {
                (idx[d] >= 0 && (idx[d] as u64) < size[d]).then_some(idx[d] as u64)
            } else {
                address(
                    idx[d],
                    size[d],
                    s.address[d],
                    s.normalized_coords && !int_coords,
                )
            };
            match mapped {
                Some(i) => at[d] = i,
                None if img.linear => return Ok([Value::I(0); 4]),
                None => return Ok(border),
            }
        }
        if let Some(l) = layer {
            at[2] = l;
        }
        let raw = fetch(at[0], at[1], at[2])?;
        let mut v = [Value::I(0); 4];
        for (c, r) in raw.iter().enumerate().take(usize::from(img.channels)) {
            v[c] = channel_value(img.format, *r, promote);
        }
        fill_missing(&mut v, img.channels, float);
        Ok(v)
    };
    if int_coords {
        let idx = [0, 1, 2].map(|d| {
            if d < n {
                coords[d] as u32 as i32 as i64
            } else {
                0
            }
        });
        return Ok(texel(idx)?.map(Value::bits));
    }
    let mut u = [0f32; 3];
    for d in 0..n {
        u[d] = f32::from_bits(coords[d] as u32);
        if s.normalized_coords {
            u[d] *= size[d] as f32;
        }
        // NaN reads as 0 and infinities as far outside (softcuda's choice; the hardware's
        // fixed-point conversion is undocumented), so weights stay finite.
        u[d] = if u[d].is_nan() {
            0.0
        } else {
            u[d].clamp(-FAR, FAR)
        };
    }
    if let Read::Gather { comp } = read {
        let (i, j) = (weight(u[0] - 0.5).0, weight(u[1] - 0.5).0);
        let mut out = [0u32; 4];
        for (o, (x, y)) in out
            .iter_mut()
            .zip([(i, j + 1), (i + 1, j + 1), (i + 1, j), (i, j)])
        {
            *o = texel([x, y, 0])?[usize::from(comp & 3)].bits();
        }
        return Ok(out);
    }
    if s.filter == FilterMode::Point || !float || img.linear {
        let idx = [0, 1, 2].map(|d| if d < n { index(u[d].floor()) } else { 0 });
        return Ok(texel(idx)?.map(Value::bits));
    }
    // Linear: blend the 2^n texels around u - 0.5, one dimension at a time.
    let w: Vec<(i64, f32)> = (0..n).map(|d| weight(u[d] - 0.5)).collect();
    let mut corners = Vec::with_capacity(1 << n);
    for corner in 0..(1usize << n) {
        let idx = [0, 1, 2].map(|d| {
            if d < n {
                w[d].0 + ((corner >> d) & 1) as i64
            } else {
                0
            }
        });
        corners.push(texel(idx)?);
    }
    for &(_, a) in &w {
        // Corner bit 0 is the current dimension once lower ones have been folded away.
        corners = corners
            .chunks_exact(2)
            .map(|p| lerp(&p[0], &p[1], a))
            .collect();
    }
    Ok(corners[0].map(Value::bits))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texture(width: u64, height: u64, filter: FilterMode, mode: AddressMode) -> Texture {
        Texture {
            image: Image {
                base: 0,
                format: TexelFormat::F32,
                channels: 1,
                width,
                height,
                depth: 1,
                row_pitch: 4 * width,
                slice_pitch: 4 * width * height,
                linear: false,
            },
            sampler: Sampler {
                address: [mode; 3],
                filter,
                normalized_coords: false,
                read_as_integer: false,
                border: [-1.0, -2.0, -3.0, -4.0],
            },
        }
    }

    /// Samples a 2D texture whose texel (x, y) holds 10 * x + 100 * y.
    fn sample_2d(t: &Texture, x: f32, y: f32) -> [f32; 4] {
        let coords = [x, y, 0.0].map(|c| u64::from(c.to_bits()));
        let read = Read::Sample { int_coords: false };
        let v = sample(t, Geom::D2, read, coords, |x, y, _| {
            Ok::<_, ()>([(10 * x + 100 * y) as f32, 0.0, 0.0, 0.0].map(|f| u64::from(f.to_bits())))
        })
        .unwrap();
        v.map(f32::from_bits)
    }

    #[test]
    fn point_sampling_reads_the_texel_holding_the_coordinate_and_fills_missing_channels() {
        let t = texture(4, 4, FilterMode::Point, AddressMode::Clamp);
        assert_eq!(sample_2d(&t, 2.9, 1.1), [120.0, 0.0, 0.0, 1.0]);
        assert_eq!(sample_2d(&t, -5.0, 9.0), [300.0, 0.0, 0.0, 1.0]);
        let b = texture(4, 4, FilterMode::Point, AddressMode::Border);
        assert_eq!(sample_2d(&b, 4.0, 0.0), [-1.0, -2.0, -3.0, -4.0]);
    }

    #[test]
    fn gather_returns_one_channel_of_the_bilinear_footprint_counter_clockwise_from_lower_left() {
        let t = texture(4, 4, FilterMode::Point, AddressMode::Clamp);
        let coords = [1.3f32, 2.6, 0.0].map(|c| u64::from(c.to_bits()));
        let v = sample(&t, Geom::D2, Read::Gather { comp: 0 }, coords, |x, y, _| {
            Ok::<_, ()>([u64::from(((10 * x + 100 * y) as f32).to_bits()), 0, 0, 0])
        })
        .unwrap();
        // u - 0.5 = (0.8, 2.1): i = 0, j = 2.
        assert_eq!(v.map(f32::from_bits), [300.0, 310.0, 210.0, 200.0]);
    }

    #[test]
    fn linear_sampling_blends_the_four_nearest_texels() {
        let t = texture(4, 4, FilterMode::Linear, AddressMode::Clamp);
        // At texel centres the texel itself; halfway between, the mean.
        assert_eq!(sample_2d(&t, 1.5, 2.5)[0], 210.0);
        assert_eq!(sample_2d(&t, 2.0, 2.0)[0], 165.0);
        // x = 1.1 blends texels 0 (0) and 1 (10) with weight 0.6 rounded to 1/256 (154/256);
        // y = 1.5 is row 1's centre (+100).
        let want = 10.0 * (154.0 / 256.0) + 100.0;
        assert!((sample_2d(&t, 1.1, 1.5)[0] - want).abs() < 1e-4);
    }

    #[test]
    fn address_modes_map_indices_as_nvidia_documents() {
        use AddressMode::*;
        assert_eq!(address(-1, 4, Clamp, true), Some(0));
        assert_eq!(address(5, 4, Clamp, true), Some(3));
        assert_eq!(address(-1, 4, Wrap, true), Some(3));
        assert_eq!(address(5, 4, Wrap, true), Some(1));
        assert_eq!(address(-1, 4, Mirror, true), Some(0));
        assert_eq!(address(4, 4, Mirror, true), Some(3));
        assert_eq!(address(6, 4, Mirror, true), Some(1));
        assert_eq!(address(4, 4, Border, true), None);
        assert_eq!(address(3, 4, Border, false), Some(3));
        // Unnormalized coordinates clamp where wrap or mirror was asked for.
        assert_eq!(address(5, 4, Wrap, false), Some(3));
    }

    #[test]
    fn infinite_and_nan_coordinates_sample_without_overflow() {
        let t = texture(4, 4, FilterMode::Linear, AddressMode::Wrap);
        for c in [f32::INFINITY, f32::NEG_INFINITY, f32::NAN, 1e30] {
            let v = sample_2d(&t, c, c);
            assert!(v[0].is_finite(), "{c}: {v:?}");
        }
    }

    #[test]
    fn linear_weights_have_eight_fractional_bits() {
        assert_eq!(weight(1.25), (1, 0.25));
        let (i, a) = weight(0.3);
        assert_eq!(i, 0);
        assert_eq!(a * 256.0, (a * 256.0).round());
        assert_eq!(weight(-0.5), (-1, 0.5));
    }

    #[test]
    fn eight_and_sixteen_bit_formats_promote_to_unit_floats() {
        assert_eq!(channel_value(TexelFormat::U8, 255, true), Value::F(1.0));
        assert_eq!(channel_value(TexelFormat::S8, 0x80, true), Value::F(-1.0));
        assert_eq!(channel_value(TexelFormat::U16, 0, true), Value::F(0.0));
        assert_eq!(
            channel_value(TexelFormat::S16, 0xffff, false),
            Value::I(u32::MAX)
        );
        assert_eq!(channel_value(TexelFormat::F16, 0x3c00, true), Value::F(1.0));
        assert_eq!(
            channel_value(TexelFormat::F16, 0xc000, true),
            Value::F(-2.0)
        );
        assert_eq!(
            channel_value(TexelFormat::F16, 0x0001, true),
            Value::F(5.960_464_5e-8)
        );
    }
}
