//! The texture family's executor (`isa::Family::Texture`): each lane's handle is looked up
//! through `Memory::texture` / `Memory::surface` (once per distinct handle in the warp), then
//! texels are read and written through the same checked global-memory path as `ld`/`st`. A
//! handle naming no live object is `FaultKind::InvalidHandle`.

use super::super::access::{LaneFault, lanes};
use super::super::mem::Mem;
use super::super::warp::Warp;
use crate::api::FaultKind;
use crate::image::{self, Image, Surface, Texture};
use crate::ir::{Geom, ImageQuery, Oob, Reg, Src, TextureOp};

/// The last object looked up, so a warp whose lanes share a handle looks it up once.
struct Last<T> {
    handle: u64,
    obj: Option<T>,
}

impl<T: Copy> Last<T> {
    fn get(&mut self, handle: u64, find: impl FnOnce(u64) -> Option<T>) -> Result<T, FaultKind> {
        if self.obj.is_none() || self.handle != handle {
            self.handle = handle;
            self.obj = find(handle);
        }
        self.obj.ok_or(FaultKind::InvalidHandle { handle })
    }
}

fn last<T>() -> Last<T> {
    Last {
        handle: 0,
        obj: None,
    }
}

/// Reads the raw channels of texel `(x, y, z)` of `img`.
fn fetch(mem: &mut Mem<'_>, img: &Image, x: u64, y: u64, z: u64) -> Result<[u64; 4], FaultKind> {
    let cb = img.format.bytes();
    let at = img
        .base
        .wrapping_add(z.wrapping_mul(img.slice_pitch))
        .wrapping_add(y.wrapping_mul(img.row_pitch))
        .wrapping_add(x.wrapping_mul(img.texel_bytes()));
    let mut raw = [0u64; 4];
    for (c, r) in raw.iter_mut().enumerate().take(usize::from(img.channels)) {
        let loc = mem.global_loc(at.wrapping_add(c as u64 * cb), cb)?;
        *r = mem.load(&loc, cb);
    }
    Ok(raw)
}

/// Where a surface access of `len` bytes at byte x / row / slice lands, after the
/// out-of-bounds mode; `None`: `.zero` outside the surface.
fn surface_addr(
    img: &Image,
    geom: Geom,
    oob: Oob,
    at: [i64; 3],
    len: u64,
) -> Result<Option<u64>, FaultKind> {
    let (n, layered) = image::dims(geom);
    let row_bytes = img.width.saturating_mul(img.texel_bytes()) as i64;
    let hi = [
        row_bytes - len as i64,
        img.height as i64 - 1,
        img.depth as i64 - 1,
    ];
    let mut c = [0i64; 3];
    for d in 0..3 {
        if d >= n && !(d == 2 && layered) {
            continue;
        }
        let inside = at[d] >= 0 && at[d] <= hi[d];
        c[d] = match oob {
            _ if inside => at[d],
            Oob::Trap => return Err(FaultKind::SurfaceOutOfBounds { at }),
            Oob::Zero => return Ok(None),
            Oob::Clamp if d == 0 => at[d].clamp(0, hi[d].max(0)) / len as i64 * len as i64,
            Oob::Clamp => at[d].clamp(0, hi[d].max(0)),
        };
    }
    Ok(Some(
        img.base
            .wrapping_add(c[2] as u64 * img.slice_pitch)
            .wrapping_add(c[1] as u64 * img.row_pitch)
            .wrapping_add(c[0] as u64),
    ))
}

impl Warp {
    /// A lane's `[x, y, z]` as signed integers (z of a layered geometry is the u32 layer).
    fn int_coords(&self, coords: &[Src; 3], l: usize) -> [i64; 3] {
        coords.map(|c| self.rd(c)[l] as u32 as i32 as i64)
    }

    /// Lane `l`'s surface access of `access = (geometry, mode, bytes)`: its address, or `None`
    /// where `.zero` skips it.
    fn surface_lane(
        &self,
        mem: &mut Mem<'_>,
        surf: &mut Last<Surface>,
        handle: Reg,
        coords: &[Src; 3],
        (geom, oob, len): (Geom, Oob, u64),
        l: usize,
    ) -> Result<Option<u64>, LaneFault> {
        let s = surf
            .get(self.regs[handle as usize][l], |h| mem.mem.surface(h))
            .map_err(|e| (e, l))?;
        surface_addr(&s.image, geom, oob, self.int_coords(coords, l), len).map_err(|e| (e, l))
    }

    /// Executes a texture or surface op for the lanes in `mask`; a fault names the lane.
    pub(super) fn texture(
        &mut self,
        op: &TextureOp,
        mem: &mut Mem<'_>,
        mask: u32,
    ) -> Result<(), LaneFault> {
        match op {
            TextureOp::Tex {
                geom,
                read,
                ds,
                handle,
                coords,
            } => {
                let mut tex = last::<Texture>();
                let mut out = [[0u64; 32]; 4];
                for l in lanes(mask) {
                    let t = tex
                        .get(self.regs[*handle as usize][l], |h| mem.mem.texture(h))
                        .map_err(|e| (e, l))?;
                    let c = coords.map(|c| self.rd(c)[l]);
                    let v =
                        image::sample(&t, *geom, *read, c, |x, y, z| fetch(mem, &t.image, x, y, z))
                            .map_err(|e| (e, l))?;
                    for k in 0..4 {
                        out[k][l] = u64::from(v[k]);
                    }
                }
                for k in 0..4 {
                    self.wr(ds[k], &out[k], mask);
                }
            }
            TextureOp::Query {
                surface,
                q,
                d,
                handle,
            } => {
                let (mut tex, mut surf) = (last::<Texture>(), last::<Surface>());
                let mut out = [0u64; 32];
                for l in lanes(mask) {
                    let h = self.regs[*handle as usize][l];
                    let img = if *surface {
                        surf.get(h, |h| mem.mem.surface(h)).map(|s| s.image)
                    } else {
                        tex.get(h, |h| mem.mem.texture(h)).map(|t| t.image)
                    }
                    .map_err(|e| (e, l))?;
                    out[l] = match q {
                        ImageQuery::Width => img.width,
                        ImageQuery::Height => img.height,
                        ImageQuery::Depth => img.depth,
                    };
                }
                self.wr(*d, &out, mask);
            }
            TextureOp::Suld {
                geom,
                oob,
                bytes,
                n,
                ds,
                handle,
                coords,
            } => {
                let (es, n) = (u64::from(*bytes), usize::from(*n));
                let mut surf = last::<Surface>();
                let mut out = [[0u64; 32]; 4];
                for l in lanes(mask) {
                    let access = (*geom, *oob, es * n as u64);
                    let Some(a) = self.surface_lane(mem, &mut surf, *handle, coords, access, l)?
                    else {
                        continue;
                    };
                    for (k, o) in out.iter_mut().enumerate().take(n) {
                        let loc = mem.global_loc(a + k as u64 * es, es).map_err(|e| (e, l))?;
                        o[l] = mem.load(&loc, es);
                    }
                }
                for k in 0..n {
                    self.wr(ds[k], &out[k], mask);
                }
            }
            TextureOp::Sust {
                geom,
                oob,
                bytes,
                n,
                srcs,
                handle,
                coords,
            } => {
                let (es, n) = (u64::from(*bytes), usize::from(*n));
                let vals = srcs.map(|s| self.rd(s));
                let mut surf = last::<Surface>();
                for l in lanes(mask) {
                    let access = (*geom, *oob, es * n as u64);
                    let Some(a) = self.surface_lane(mem, &mut surf, *handle, coords, access, l)?
                    else {
                        continue;
                    };
                    for (k, v) in vals.iter().enumerate().take(n) {
                        let loc = mem.global_loc(a + k as u64 * es, es).map_err(|e| (e, l))?;
                        mem.store(&loc, es, v[l]);
                    }
                }
            }
        }
        Ok(())
    }
}
