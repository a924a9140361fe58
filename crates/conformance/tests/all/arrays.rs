//! CUDA arrays: every format and channel count round-trips through cuMemcpy2D, pitched 2D copies
//! place a sub-rectangle, cuMemcpy3D moves a 3D array, the 1D ...HtoA/AtoH copies address the
//! array's bytes, and descriptors come back as created while bad shapes and destroyed arrays are
//! refused. Also the array helpers textures.rs uses.

use std::ffi::c_void;
use std::sync::Arc;

use conformance::context::Context;
use conformance::driver::Env;
use conformance::driver::{exclusive_device, shared_device};
use conformance::rng::Rng;
use conformance::stream::Stream;
use cudarc::driver::sys::{self, CUresult};

use crate::graph_nodes;
use crate::support::{Steps, env_or_skip};

type Format = sys::CUarray_format;

/// The driver and its primary context, current on this thread (`None`: skipped).
pub(crate) fn bound_primary() -> Option<(&'static Env, Arc<Context>)> {
    let env = env_or_skip()?;
    let ctx = Context::primary(env).expect("retain");
    ctx.bind().expect("bind");
    Some((env, ctx))
}

/// Fails with the call's name unless it succeeded.
pub(crate) fn ok(call: &str, r: CUresult) {
    assert_eq!(r, CUresult::CUDA_SUCCESS, "{call}");
}

/// The eight formats with their channel size in bytes.
pub(crate) const FORMATS: [(Format, usize); 8] = [
    (Format::CU_AD_FORMAT_UNSIGNED_INT8, 1),
    (Format::CU_AD_FORMAT_UNSIGNED_INT16, 2),
    (Format::CU_AD_FORMAT_UNSIGNED_INT32, 4),
    (Format::CU_AD_FORMAT_SIGNED_INT8, 1),
    (Format::CU_AD_FORMAT_SIGNED_INT16, 2),
    (Format::CU_AD_FORMAT_SIGNED_INT32, 4),
    (Format::CU_AD_FORMAT_HALF, 2),
    (Format::CU_AD_FORMAT_FLOAT, 4),
];

/// A CUDA array destroyed when dropped.
pub(crate) struct Array(pub sys::CUarray);

impl Array {
    /// cuArray3DCreate with the given shape; panics unless it succeeds.
    pub(crate) fn new(w: usize, h: usize, d: usize, format: Format, ch: u32, flags: u32) -> Array {
        let (r, a) = create(w, h, d, format, ch, flags);
        ok("cuArray3DCreate", r);
        Array(a)
    }
}

impl Drop for Array {
    fn drop(&mut self) {
        // SAFETY: a live array created by this test.
        let r = unsafe { sys::cuArrayDestroy(self.0) };
        if r != CUresult::CUDA_SUCCESS {
            eprintln!("cuArrayDestroy in cleanup returned {r:?}");
        }
    }
}

/// A descriptor to be overwritten by cuArray3DGetDescriptor.
fn descriptor() -> sys::CUDA_ARRAY3D_DESCRIPTOR {
    sys::CUDA_ARRAY3D_DESCRIPTOR {
        Width: 0,
        Height: 0,
        Depth: 0,
        Format: Format::CU_AD_FORMAT_FLOAT,
        NumChannels: 0,
        Flags: 0,
    }
}

/// cuArray3DCreate's answer and handle.
fn create(
    w: usize,
    h: usize,
    d: usize,
    format: Format,
    ch: u32,
    flags: u32,
) -> (CUresult, sys::CUarray) {
    let desc = sys::CUDA_ARRAY3D_DESCRIPTOR {
        Width: w,
        Height: h,
        Depth: d,
        Format: format,
        NumChannels: ch,
        Flags: flags,
    };
    let mut a: sys::CUarray = std::ptr::null_mut();
    // SAFETY: valid descriptor and out-pointer.
    let r = unsafe { sys::cuArray3DCreate_v2(&mut a, &desc) };
    (r, a)
}

/// Copies a box of `width` bytes × `height` rows × `depth` slices between host memory (rows
/// `pitch` apart, slices `slice_rows` rows apart) and an array at (`x` bytes, `y`, `z`), with
/// cuMemcpy3D when `three_d`, else cuMemcpy2D (one slice), in the direction `to_array` says.
pub(crate) struct HostArrayCopy {
    pub host: *mut u8,
    pub pitch: usize,
    pub slice_rows: usize,
    pub array: sys::CUarray,
    pub at: [usize; 3],
    pub extent: [usize; 3],
    pub to_array: bool,
    pub three_d: bool,
}

impl HostArrayCopy {
    /// The copy as a `CUDA_MEMCPY3D`.
    pub(crate) fn params(&self) -> sys::CUDA_MEMCPY3D {
        let (host, array) = (
            sys::CUmemorytype::CU_MEMORYTYPE_HOST,
            sys::CUmemorytype::CU_MEMORYTYPE_ARRAY,
        );
        let null = std::ptr::null_mut::<c_void>();
        let to = self.to_array;
        let (st, dt) = if to { (host, array) } else { (array, host) };
        let none: sys::CUarray = std::ptr::null_mut();
        let (sa, da) = if to {
            (none, self.array)
        } else {
            (self.array, none)
        };
        let (sh, dh): (*const c_void, *mut c_void) = if to {
            (self.host.cast_const().cast(), null)
        } else {
            (std::ptr::null(), self.host.cast())
        };
        let (sp, dp) = if to { (self.pitch, 0) } else { (0, self.pitch) };
        let (sr, dr) = if to {
            (self.slice_rows, 0)
        } else {
            (0, self.slice_rows)
        };
        let (s_at, d_at) = if to {
            ([0; 3], self.at)
        } else {
            (self.at, [0; 3])
        };
        let [w, h, d] = self.extent;
        sys::CUDA_MEMCPY3D {
            srcXInBytes: s_at[0],
            srcY: s_at[1],
            srcZ: s_at[2],
            srcLOD: 0,
            srcMemoryType: st,
            srcHost: sh,
            srcDevice: 0,
            srcArray: sa,
            reserved0: null,
            srcPitch: sp,
            srcHeight: sr,
            dstXInBytes: d_at[0],
            dstY: d_at[1],
            dstZ: d_at[2],
            dstLOD: 0,
            dstMemoryType: dt,
            dstHost: dh,
            dstDevice: 0,
            dstArray: da,
            reserved1: null,
            dstPitch: dp,
            dstHeight: dr,
            WidthInBytes: w,
            Height: h,
            Depth: d,
        }
    }

    /// Runs the copy with cuMemcpy3D, or cuMemcpy2D (slice 0) unless `three_d`.
    pub(crate) fn run(&self) -> CUresult {
        let c = self.params();
        if self.three_d {
            // SAFETY: the host buffer covers the copy's rows and slices (caller); the array is
            // live.
            return unsafe { sys::cuMemcpy3D_v2(&c) };
        }
        let c2 = sys::CUDA_MEMCPY2D {
            srcXInBytes: c.srcXInBytes,
            srcY: c.srcY,
            srcMemoryType: c.srcMemoryType,
            srcHost: c.srcHost,
            srcDevice: 0,
            srcArray: c.srcArray,
            srcPitch: c.srcPitch,
            dstXInBytes: c.dstXInBytes,
            dstY: c.dstY,
            dstMemoryType: c.dstMemoryType,
            dstHost: c.dstHost,
            dstDevice: 0,
            dstArray: c.dstArray,
            dstPitch: c.dstPitch,
            WidthInBytes: c.WidthInBytes,
            Height: c.Height,
        };
        // SAFETY: the host buffer covers the copy (caller); the array is live.
        unsafe { sys::cuMemcpy2D_v2(&c2) }
    }
}

/// cuMemcpy2D of `rows` rows of `width` bytes between host memory (rows `pitch` apart) and an
/// array at (`x` bytes, `y`).
pub(crate) fn host_array_2d(
    host: *mut u8,
    pitch: usize,
    array: sys::CUarray,
    (x, y): (usize, usize),
    (width, rows): (usize, usize),
    to_array: bool,
) -> CUresult {
    HostArrayCopy {
        host,
        pitch,
        slice_rows: rows,
        array,
        at: [x, y, 0],
        extent: [width, rows, 1],
        to_array,
        three_d: false,
    }
    .run()
}

/// Uploads `bytes` (tight rows of `row` bytes) into the array's slice 0.
pub(crate) fn upload(array: &Array, bytes: &[u8], row: usize) {
    let mut v = bytes.to_vec();
    let r = host_array_2d(
        v.as_mut_ptr(),
        row,
        array.0,
        (0, 0),
        (row, bytes.len() / row),
        true,
    );
    ok("cuMemcpy2D host → array", r);
}

#[test]
fn every_format_and_channel_count_round_trips_through_an_array() {
    let _shared = shared_device();
    let Some((env, _ctx)) = bound_primary() else {
        return;
    };
    let mut rng = Rng::new(10);
    let mut steps = Steps::default();
    let (w, h) = (5usize, 3usize);
    for (format, size) in FORMATS {
        for ch in [1u32, 2, 4] {
            let row = w * size * ch as usize;
            let pitch = row + 8;
            let mut src = rng.vec(pitch * h, |r| r.next_u32() as u8);
            let a = Array::new(w, h, 0, format, ch, 0);
            let step = format!("{format:?} x{ch}");
            let r = host_array_2d(src.as_mut_ptr(), pitch, a.0, (0, 0), (row, h), true);
            steps.expect(&format!("{step} upload"), r, CUresult::CUDA_SUCCESS);
            let mut back = vec![0u8; row * h];
            let r = host_array_2d(back.as_mut_ptr(), row, a.0, (0, 0), (row, h), false);
            steps.expect(&format!("{step} download"), r, CUresult::CUDA_SUCCESS);
            let want: Vec<u8> = src.chunks(pitch).flat_map(|c| c[..row].to_vec()).collect();
            steps.check(&step, back == want, || {
                "bytes differ after the round trip".into()
            });
            let mut d = descriptor();
            // SAFETY: valid out-pointer and live array.
            let r = unsafe { sys::cuArray3DGetDescriptor_v2(&mut d, a.0) };
            steps.expect(&format!("{step} descriptor"), r, CUresult::CUDA_SUCCESS);
            let same =
                (d.Width, d.Height, d.Depth, d.Format, d.NumChannels) == (w, h, 0, format, ch);
            steps.check(&format!("{step} descriptor"), same, || format!("{d:?}"));
        }
    }
    steps.finish(&env.choice.kind.to_string());
}

#[test]
fn pitched_2d_copies_place_a_sub_rectangle_of_an_array() {
    let _shared = shared_device();
    let Some((_env, _ctx)) = bound_primary() else {
        return;
    };
    let (w, h) = (8usize, 6usize);
    let a = Array::new(w, h, 0, Format::CU_AD_FORMAT_UNSIGNED_INT8, 1, 0);
    upload(&a, &vec![0u8; w * h], w);
    // A 3 × 2 block with 16-byte source rows lands at (x 2, y 3).
    let mut block: Vec<u8> = (0..32).map(|i| 100 + i as u8).collect();
    let r = host_array_2d(block.as_mut_ptr(), 16, a.0, (2, 3), (3, 2), true);
    ok("cuMemcpy2D into a sub-rectangle", r);
    let mut back = vec![0u8; w * h];
    ok(
        "cuMemcpy2D out",
        host_array_2d(back.as_mut_ptr(), w, a.0, (0, 0), (w, h), false),
    );
    let mut want = vec![0u8; w * h];
    for (y, x) in [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)] {
        want[(3 + y) * w + 2 + x] = block[y * 16 + x];
    }
    assert_eq!(back, want);
    // A rectangle reaching past the array is refused.
    let r = host_array_2d(block.as_mut_ptr(), 16, a.0, (6, 5), (3, 2), true);
    assert_eq!(
        r,
        CUresult::CUDA_ERROR_INVALID_VALUE,
        "copy past the array's edge"
    );
}

#[test]
fn cumemcpy3d_moves_a_3d_array_and_its_slices() {
    let _shared = shared_device();
    let Some((_env, _ctx)) = bound_primary() else {
        return;
    };
    let (w, h, d) = (4usize, 3usize, 2usize);
    let a = Array::new(w, h, d, Format::CU_AD_FORMAT_FLOAT, 1, 0);
    let row = 4 * w;
    // Host rows 24 bytes apart, slices 4 rows apart.
    let (pitch, slice_rows) = (24usize, 4usize);
    let src: Vec<u8> = (0..pitch * slice_rows * d).map(|i| i as u8).collect();
    let mut back = vec![0u8; row * h * d];
    let copy = |to_array: bool, host: *mut u8, pitch: usize, rows: usize| {
        HostArrayCopy {
            host,
            pitch,
            slice_rows: rows,
            array: a.0,
            at: [0; 3],
            extent: [row, h, d],
            to_array,
            three_d: true,
        }
        .run()
    };
    ok(
        "cuMemcpy3D host → array",
        copy(true, src.as_ptr().cast_mut(), pitch, slice_rows),
    );
    ok(
        "cuMemcpy3D array → host",
        copy(false, back.as_mut_ptr(), row, h),
    );
    let mut want = Vec::new();
    for z in 0..d {
        for y in 0..h {
            let at = (z * slice_rows + y) * pitch;
            want.extend_from_slice(&src[at..at + row]);
        }
    }
    assert_eq!(back, want);
}

#[test]
fn htoa_and_atoh_address_the_bytes_of_a_1d_array() {
    let _shared = shared_device();
    let Some((_env, _ctx)) = bound_primary() else {
        return;
    };
    let a = Array::new(64, 0, 0, Format::CU_AD_FORMAT_UNSIGNED_INT16, 2, 0);
    let src: Vec<u8> = (0..256).map(|i| (i * 7) as u8).collect();
    // SAFETY: 256 readable bytes into a 256-byte array.
    ok("cuMemcpyHtoA", unsafe {
        sys::cuMemcpyHtoA_v2(a.0, 0, src.as_ptr().cast(), 256)
    });
    let mut back = vec![0u8; 100];
    // SAFETY: 100 writable bytes from bytes 50..150 of the array.
    ok("cuMemcpyAtoH", unsafe {
        sys::cuMemcpyAtoH_v2(back.as_mut_ptr().cast(), a.0, 50, 100)
    });
    assert_eq!(back, src[50..150]);
    // SAFETY: as above, but past the array's 256 bytes.
    let r = unsafe { sys::cuMemcpyAtoH_v2(back.as_mut_ptr().cast(), a.0, 200, 100) };
    assert_eq!(
        r,
        CUresult::CUDA_ERROR_INVALID_VALUE,
        "copy past the array's end"
    );
}

#[test]
fn bad_shapes_are_refused_and_an_array_is_destroyed() {
    let _shared = shared_device();
    let Some((env, _ctx)) = bound_primary() else {
        return;
    };
    let mut steps = Steps::default();
    let f = Format::CU_AD_FORMAT_FLOAT;
    let invalid = CUresult::CUDA_ERROR_INVALID_VALUE;
    steps.expect("width 0", create(0, 4, 0, f, 1, 0).0, invalid);
    steps.expect("3 channels", create(4, 4, 0, f, 3, 0).0, invalid);
    steps.expect("depth without height", create(4, 0, 4, f, 1, 0).0, invalid);
    steps.expect(
        "3D past the 3D limit",
        create(1 << 20, 4, 4, f, 1, 0).0,
        invalid,
    );
    let (r, a) = create(4, 4, 0, f, 1, 0);
    steps.expect("a 4 × 4 array", r, CUresult::CUDA_SUCCESS);
    // SAFETY: a live array, destroyed once.
    steps.expect(
        "destroy",
        unsafe { sys::cuArrayDestroy(a) },
        CUresult::CUDA_SUCCESS,
    );
    // Using the handle after its destroy crashes NVIDIA's driver (a pointer there);
    // softcuda's own tests check that it refuses it (images::a_destroyed_array_...).
    steps.finish(&env.choice.kind.to_string());
}

#[test]
fn graph_memcpy_nodes_copy_into_and_out_of_an_array() {
    // Alone: graphs on NVIDIA are not thread-safe objects (as in graph_nodes.rs).
    let _exclusive = exclusive_device();
    let Some((_env, ctx)) = bound_primary() else {
        return;
    };
    let (w, h) = (16usize, 3usize);
    let a = Array::new(w, h, 0, Format::CU_AD_FORMAT_UNSIGNED_INT8, 1, 0);
    let mut src: Vec<u8> = (0..w * h).map(|i| (i * 5 + 1) as u8).collect();
    let mut back = vec![0u8; w * h];
    let copy = |host: *mut u8, to_array| HostArrayCopy {
        host,
        pitch: w,
        slice_rows: h,
        array: a.0,
        at: [0; 3],
        extent: [w, h, 1],
        to_array,
        three_d: true,
    };
    let g = graph_nodes::new_graph();
    let (r, up) = graph_nodes::add_copy(g, &[], &copy(src.as_mut_ptr(), true).params(), &ctx);
    ok("cuGraphAddMemcpyNode host → array", r);
    let (r, _) = graph_nodes::add_copy(g, &[up], &copy(back.as_mut_ptr(), false).params(), &ctx);
    ok("cuGraphAddMemcpyNode array → host", r);
    let (r, exec) = graph_nodes::instantiate(g);
    ok("cuGraphInstantiate", r);
    let s = Stream::new(&ctx).expect("stream");
    ok("cuGraphLaunch", graph_nodes::run(exec, &s));
    graph_nodes::destroy(exec, g);
    assert_eq!(back, src);
}
