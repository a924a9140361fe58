//! Texture and surface objects (tests/kernels/textures.ptx, hand-written): point and linear
//! filtering against a CPU computation of NVIDIA's documented sampling (linear weights in 9-bit
//! fixed point, 8 fractional bits), each address mode, normalized coordinates, u8 read as
//! normalized float or as integer, linear-memory fetches, layered reads, a surface written then
//! read, txq/suq sizes, and a destroyed texture object refused on the host.

use std::ffi::{CString, c_void};
use std::sync::{Arc, Mutex, MutexGuard};

use conformance::context::Context;
use conformance::driver::shared_device;
use conformance::memory::DeviceBuffer;
use conformance::module::Module;
use cudarc::driver::sys::{self, CUresult};

use crate::arrays::{Array, HostArrayCopy, bound_primary, host_array_2d, ok, upload};
use crate::support::own_ptx;

type Format = sys::CUarray_format;
type Mode = sys::CUaddress_mode;

/// Texture and surface object handles are small numbers that NVIDIA's driver hands out again once
/// destroyed: with parallel test threads, the test that asks about a destroyed handle met another
/// test's new object under the same number (H200, session 10). This file's tests take turns.
static OBJECTS: Mutex<()> = Mutex::new(());

/// The context and tests/kernels/textures loaded into it, and this file's turn.
fn session() -> Option<(Arc<Context>, Arc<Module>, MutexGuard<'static, ()>)> {
    let turn = OBJECTS.lock().unwrap_or_else(|p| p.into_inner());
    let (_, ctx) = bound_primary()?;
    let m = Module::load_ptx(&ctx, &own_ptx("textures")).expect("load textures.ptx");
    Some((ctx, m, turn))
}

/// Launches `kernel` on `grid` blocks of `block` threads and waits.
fn launch(m: &Module, kernel: &str, grid: u32, block: [u32; 2], args: &mut [*mut c_void]) {
    let name = CString::new(kernel).expect("no NUL");
    let mut f: sys::CUfunction = std::ptr::null_mut();
    // SAFETY: valid out-pointer, live module, NUL-terminated name.
    ok("cuModuleGetFunction", unsafe {
        sys::cuModuleGetFunction(&mut f, m.raw(), name.as_ptr())
    });
    // SAFETY: `args` holds one pointer per kernel parameter, each to a value of its size.
    let r = unsafe {
        sys::cuLaunchKernel(
            f,
            grid,
            1,
            1,
            block[0],
            block[1],
            1,
            0,
            std::ptr::null_mut(),
            args.as_mut_ptr(),
            std::ptr::null_mut(),
        )
    };
    ok(kernel, r);
    // SAFETY: no arguments; acts on the current context.
    ok("cuCtxSynchronize", unsafe { sys::cuCtxSynchronize() });
}

/// A resource descriptor naming `array`.
fn array_resource(array: &Array) -> sys::CUDA_RESOURCE_DESC {
    // SAFETY: all-zero is a valid CUDA_RESOURCE_DESC (type ARRAY, NULL handle) to fill in.
    let mut r: sys::CUDA_RESOURCE_DESC = unsafe { std::mem::zeroed() };
    r.resType = sys::CUresourcetype::CU_RESOURCE_TYPE_ARRAY;
    r.res.array.hArray = array.0;
    r
}

/// A texture descriptor: one address mode for all dimensions, a filter, `CU_TRSF_*` flags.
fn tex_desc(mode: Mode, linear: bool, flags: u32, border: [f32; 4]) -> sys::CUDA_TEXTURE_DESC {
    // SAFETY: all-zero is a valid CUDA_TEXTURE_DESC (wrap, point, no flags) to fill in.
    let mut d: sys::CUDA_TEXTURE_DESC = unsafe { std::mem::zeroed() };
    d.addressMode = [mode; 3];
    d.filterMode = if linear {
        sys::CUfilter_mode::CU_TR_FILTER_MODE_LINEAR
    } else {
        sys::CUfilter_mode::CU_TR_FILTER_MODE_POINT
    };
    d.flags = flags;
    d.borderColor = border;
    d
}

/// A texture object destroyed when dropped.
struct Tex(u64);

impl Tex {
    fn new(r: &sys::CUDA_RESOURCE_DESC, d: &sys::CUDA_TEXTURE_DESC) -> Tex {
        let mut t = 0u64;
        // SAFETY: valid descriptors and out-pointer; no resource view.
        ok("cuTexObjectCreate", unsafe {
            sys::cuTexObjectCreate(&mut t, r, d, std::ptr::null())
        });
        Tex(t)
    }
}

impl Drop for Tex {
    fn drop(&mut self) {
        // SAFETY: a live texture object of this test.
        let r = unsafe { sys::cuTexObjectDestroy(self.0) };
        if r != CUresult::CUDA_SUCCESS {
            eprintln!("cuTexObjectDestroy in cleanup returned {r:?}");
        }
    }
}

/// Runs sampling kernel `kernel` over `coords` (`per` 32-bit words per thread); returns each
/// thread's four result words.
fn sample(
    ctx: &Arc<Context>,
    m: &Module,
    kernel: &str,
    tex: &Tex,
    coords: &[u32],
    per: usize,
) -> Vec<[u32; 4]> {
    let n = (coords.len() / per) as u32;
    let c = DeviceBuffer::alloc(ctx, coords.len() * 4).expect("alloc coords");
    let bytes: Vec<u8> = coords.iter().flat_map(|v| v.to_le_bytes()).collect();
    c.write(&bytes).expect("upload coords");
    let out = DeviceBuffer::alloc(ctx, n as usize * 16).expect("alloc out");
    let (mut t, mut cp, mut op, mut nn) = (tex.0, c.ptr(), out.ptr(), n);
    let mut args: [*mut c_void; 4] = [
        (&raw mut t).cast(),
        (&raw mut cp).cast(),
        (&raw mut op).cast(),
        (&raw mut nn).cast(),
    ];
    launch(m, kernel, n.div_ceil(64), [64, 1], &mut args);
    let got = out.to_vec().expect("download");
    got.chunks_exact(16)
        .map(|c| {
            std::array::from_fn(|k| u32::from_le_bytes(c[4 * k..4 * k + 4].try_into().expect("4")))
        })
        .collect()
}

fn f32s(v: &[f32]) -> Vec<u32> {
    v.iter().map(|f| f.to_bits()).collect()
}

fn as_f32(v: &[[u32; 4]]) -> Vec<f32> {
    v.iter().map(|t| f32::from_bits(t[0])).collect()
}

/// A 1D f32 array of `values`, as a texture.
fn texture_1d(values: &[f32], mode: Mode, linear: bool, flags: u32) -> (Array, Tex) {
    let a = Array::new(values.len(), 0, 0, Format::CU_AD_FORMAT_FLOAT, 1, 0);
    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    upload(&a, &bytes, bytes.len());
    let t = Tex::new(
        &array_resource(&a),
        &tex_desc(mode, linear, flags, [9.0; 4]),
    );
    (a, t)
}

/// NVIDIA's 1D linear filter on unnormalized `x` over `t` (clamped ends): the weight of the upper
/// texel is frac(x - 0.5) kept to 8 fractional bits.
fn linear_1d(t: &[f32], x: f32) -> (f32, f32) {
    let xb = x - 0.5;
    let i = xb.floor();
    let a = ((xb - i) * 256.0).round() / 256.0;
    let at = |k: f32| t[(k.max(0.0) as usize).min(t.len() - 1)];
    let (lo, hi) = (at(i), at(i + 1.0));
    ((1.0 - a) * lo + a * hi, (hi - lo).abs())
}

#[test]
fn point_filtering_reads_the_texel_holding_each_coordinate() {
    let _shared = shared_device();
    let Some((ctx, m, _turn)) = session() else {
        return;
    };
    let (w, h) = (5usize, 4usize);
    let texel = |x: usize, y: usize| (10 * x + 100 * y) as f32;
    let a = Array::new(w, h, 0, Format::CU_AD_FORMAT_FLOAT, 1, 0);
    let bytes: Vec<u8> = (0..w * h)
        .flat_map(|i| texel(i % w, i / w).to_le_bytes())
        .collect();
    upload(&a, &bytes, 4 * w);
    let t = Tex::new(
        &array_resource(&a),
        &tex_desc(Mode::CU_TR_ADDRESS_MODE_CLAMP, false, 0, [0.0; 4]),
    );
    let pts = [
        (0.0f32, 0.0f32),
        (4.99, 3.99),
        (2.5, 1.01),
        (1.2, 2.8),
        (-3.0, 9.0),
    ];
    let coords: Vec<f32> = pts.iter().flat_map(|&(x, y)| [x, y]).collect();
    let got = as_f32(&sample(&ctx, &m, "tex2d_f32", &t, &f32s(&coords), 2));
    let want: Vec<f32> = pts
        .iter()
        .map(|&(x, y)| {
            texel(
                (x.floor().max(0.0) as usize).min(w - 1),
                (y.floor().max(0.0) as usize).min(h - 1),
            )
        })
        .collect();
    assert_eq!(got, want);
}

#[test]
fn linear_filtering_blends_neighbours_with_nvidias_9_bit_weights() {
    let _shared = shared_device();
    let Some((ctx, m, _turn)) = session() else {
        return;
    };
    let values: Vec<f32> = (0..8).map(|i| (i * i) as f32 + 1.0).collect();
    let (_a, t) = texture_1d(&values, Mode::CU_TR_ADDRESS_MODE_CLAMP, true, 0);
    let xs: Vec<f32> = (0..30).map(|i| -0.4 + 0.31 * i as f32).collect();
    let got = as_f32(&sample(&ctx, &m, "tex1d_f32", &t, &f32s(&xs), 1));
    for (x, g) in xs.iter().zip(&got) {
        let (want, step) = linear_1d(&values, *x);
        // A weight off by its last bit (1/256) moves the result by step / 256.
        assert!(
            (g - want).abs() <= step / 256.0 + 1e-4,
            "x {x}: got {g}, want {want}"
        );
    }
}

#[test]
fn each_address_mode_maps_coordinates_outside_the_texture() {
    let _shared = shared_device();
    let Some((ctx, m, _turn)) = session() else {
        return;
    };
    let values = [1.0f32, 2.0, 3.0, 4.0];
    let n = values.len() as f32;
    let xs = [-0.6f32, -0.1, 0.3, 1.05, 1.4, 2.3, -1.3];
    let norm = sys::CU_TRSF_NORMALIZED_COORDINATES;
    for (mode, reference) in [
        (
            Mode::CU_TR_ADDRESS_MODE_WRAP,
            (|x: f32| x - x.floor()) as fn(f32) -> f32,
        ),
        (Mode::CU_TR_ADDRESS_MODE_CLAMP, |x: f32| {
            x.clamp(0.0, 1.0 - 1.0 / 4.0)
        }),
        (Mode::CU_TR_ADDRESS_MODE_MIRROR, |x: f32| {
            let f = x - x.floor();
            if (x.floor() as i64).rem_euclid(2) == 1 {
                1.0 - f
            } else {
                f
            }
        }),
        (Mode::CU_TR_ADDRESS_MODE_BORDER, |x: f32| x),
    ] {
        let (_a, t) = texture_1d(&values, mode, false, norm);
        let got = as_f32(&sample(&ctx, &m, "tex1d_f32", &t, &f32s(&xs), 1));
        let want: Vec<f32> = xs
            .iter()
            .map(|&x| {
                let i = (reference(x) * n).floor();
                if i < 0.0 || i >= n {
                    9.0
                } else {
                    values[(i as usize).min(3)]
                }
            })
            .collect();
        assert_eq!(got, want, "{mode:?} at {xs:?}");
    }
}

#[test]
fn normalized_coordinates_scale_by_each_dimension() {
    let _shared = shared_device();
    let Some((ctx, m, _turn)) = session() else {
        return;
    };
    let (w, h) = (8usize, 2usize);
    let a = Array::new(w, h, 0, Format::CU_AD_FORMAT_FLOAT, 1, 0);
    let bytes: Vec<u8> = (0..w * h).flat_map(|i| (i as f32).to_le_bytes()).collect();
    upload(&a, &bytes, 4 * w);
    let norm = sys::CU_TRSF_NORMALIZED_COORDINATES;
    let t = Tex::new(
        &array_resource(&a),
        &tex_desc(Mode::CU_TR_ADDRESS_MODE_CLAMP, false, norm, [0.0; 4]),
    );
    let pts = [(0.0f32, 0.0f32), (0.5, 0.5), (0.99, 0.76), (0.3, 0.2)];
    let coords: Vec<f32> = pts.iter().flat_map(|&(x, y)| [x, y]).collect();
    let got = as_f32(&sample(&ctx, &m, "tex2d_f32", &t, &f32s(&coords), 2));
    let want: Vec<f32> = pts
        .iter()
        .map(|&(x, y)| (y * h as f32).floor() * w as f32 + (x * w as f32).floor())
        .collect();
    assert_eq!(got, want);
}

#[test]
fn u8_texels_read_as_normalized_floats_unless_read_as_integer() {
    let _shared = shared_device();
    let Some((ctx, m, _turn)) = session() else {
        return;
    };
    let texels: [u8; 8] = [0, 51, 128, 255, 7, 8, 9, 10];
    let a = Array::new(2, 1, 0, Format::CU_AD_FORMAT_UNSIGNED_INT8, 4, 0);
    upload(&a, &texels, 8);
    let clamp = Mode::CU_TR_ADDRESS_MODE_CLAMP;
    let coords = f32s(&[0.5, 0.5, 1.5, 0.5]);
    let t = Tex::new(&array_resource(&a), &tex_desc(clamp, false, 0, [0.0; 4]));
    let got = sample(&ctx, &m, "tex2d_f32", &t, &coords, 2);
    for (k, g) in got.iter().enumerate() {
        let want: Vec<f32> = texels[4 * k..4 * k + 4]
            .iter()
            .map(|&b| b as f32 / 255.0)
            .collect();
        let g: Vec<f32> = g.iter().map(|&b| f32::from_bits(b)).collect();
        // b / 255 to within one unit in the last place (the conversion's documented accuracy
        // is not given; softcuda's is the correctly rounded quotient).
        let close = g
            .iter()
            .zip(&want)
            .all(|(g, w)| (g - w).abs() <= f32::EPSILON * w);
        assert!(
            close,
            "texel {k} as normalized float: got {g:?}, want {want:?}"
        );
    }
    let ti = Tex::new(
        &array_resource(&a),
        &tex_desc(clamp, false, sys::CU_TRSF_READ_AS_INTEGER, [0.0; 4]),
    );
    let got = sample(&ctx, &m, "tex2d_u32", &ti, &coords, 2);
    for (k, g) in got.iter().enumerate() {
        let want: Vec<u32> = texels[4 * k..4 * k + 4]
            .iter()
            .map(|&b| u32::from(b))
            .collect();
        assert_eq!(g.to_vec(), want, "texel {k} as integer");
    }
}

#[test]
fn linear_memory_fetches_by_integer_index_and_layers_select_their_slice() {
    let _shared = shared_device();
    let Some((ctx, m, _turn)) = session() else {
        return;
    };
    let values: Vec<f32> = (0..16).map(|i| i as f32 * 1.5).collect();
    let buf = DeviceBuffer::alloc(&ctx, 64).expect("alloc");
    buf.write(
        &values
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect::<Vec<u8>>(),
    )
    .expect("write");
    // SAFETY: all-zero is a valid CUDA_RESOURCE_DESC to fill in.
    let mut r: sys::CUDA_RESOURCE_DESC = unsafe { std::mem::zeroed() };
    r.resType = sys::CUresourcetype::CU_RESOURCE_TYPE_LINEAR;
    r.res.linear.devPtr = buf.ptr();
    r.res.linear.format = Format::CU_AD_FORMAT_FLOAT;
    r.res.linear.numChannels = 1;
    r.res.linear.sizeInBytes = 64;
    let t = Tex::new(
        &r,
        &tex_desc(Mode::CU_TR_ADDRESS_MODE_CLAMP, false, 0, [0.0; 4]),
    );
    let idx = [0u32, 5, 15];
    let got = as_f32(&sample(&ctx, &m, "tex1d_fetch", &t, &idx, 1));
    assert_eq!(got, idx.map(|i| values[i as usize]));

    // A 2-layer 3 × 2 array: layer l, texel (x, y) holds 100 l + 10 y + x.
    let a = Array::new(
        3,
        2,
        2,
        Format::CU_AD_FORMAT_FLOAT,
        1,
        sys::CUDA_ARRAY3D_LAYERED,
    );
    let mut bytes: Vec<u8> = (0..12)
        .flat_map(|i| ((100 * (i / 6) + 10 * (i % 6 / 3) + i % 3) as f32).to_le_bytes())
        .collect();
    let r = HostArrayCopy {
        host: bytes.as_mut_ptr(),
        pitch: 12,
        slice_rows: 2,
        array: a.0,
        at: [0; 3],
        extent: [12, 2, 2],
        to_array: true,
        three_d: true,
    }
    .run();
    ok("cuMemcpy3D into a layered array", r);
    let t = Tex::new(
        &array_resource(&a),
        &tex_desc(Mode::CU_TR_ADDRESS_MODE_CLAMP, false, 0, [0.0; 4]),
    );
    let coords = [
        1u32,
        2.5f32.to_bits(),
        1.5f32.to_bits(),
        0,
        0,
        0.5f32.to_bits(),
        0.5f32.to_bits(),
        0,
    ];
    let got = as_f32(&sample(&ctx, &m, "tex_a2d_f32", &t, &coords, 4));
    assert_eq!(got, vec![112.0, 0.0]);
}

#[test]
fn a_surface_written_by_a_kernel_reads_back_and_sizes_are_queried() {
    let _shared = shared_device();
    let Some((ctx, m, _turn)) = session() else {
        return;
    };
    let (w, h) = (6usize, 5usize);
    let ldst = sys::CUDA_ARRAY3D_SURFACE_LDST;
    let src = Array::new(w, h, 0, Format::CU_AD_FORMAT_UNSIGNED_INT32, 1, ldst);
    let dst = Array::new(w, h, 0, Format::CU_AD_FORMAT_UNSIGNED_INT32, 1, ldst);
    let values: Vec<u32> = (0..(w * h) as u32).map(|i| i * 3 + 7).collect();
    upload(
        &src,
        &values
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect::<Vec<u8>>(),
        4 * w,
    );
    let surf = |a: &Array| {
        let mut s = 0u64;
        // SAFETY: valid descriptor (a surface-capable array) and out-pointer.
        ok("cuSurfObjectCreate", unsafe {
            sys::cuSurfObjectCreate(&mut s, &array_resource(a))
        });
        s
    };
    let (mut s_in, mut s_out) = (surf(&src), surf(&dst));
    let (mut ww, mut hh) = (w as u32, h as u32);
    let mut args: [*mut c_void; 4] = [
        (&raw mut s_in).cast(),
        (&raw mut s_out).cast(),
        (&raw mut ww).cast(),
        (&raw mut hh).cast(),
    ];
    launch(&m, "surf2d_add_one", 1, [8, 8], &mut args);
    let mut back = vec![0u8; 4 * w * h];
    ok(
        "cuMemcpy2D array → host",
        host_array_2d(back.as_mut_ptr(), 4 * w, dst.0, (0, 0), (4 * w, h), false),
    );
    let got: Vec<u32> = back
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes(c.try_into().expect("4")))
        .collect();
    assert_eq!(got, values.iter().map(|v| v + 1).collect::<Vec<u32>>());

    let t = Tex::new(
        &array_resource(&src),
        &tex_desc(
            Mode::CU_TR_ADDRESS_MODE_CLAMP,
            false,
            sys::CU_TRSF_READ_AS_INTEGER,
            [0.0; 4],
        ),
    );
    let out = DeviceBuffer::alloc(&ctx, 24).expect("alloc");
    let (mut tt, mut op) = (t.0, out.ptr());
    let mut args: [*mut c_void; 3] = [
        (&raw mut tt).cast(),
        (&raw mut s_out).cast(),
        (&raw mut op).cast(),
    ];
    launch(&m, "sizes", 1, [1, 1], &mut args);
    let sizes: Vec<u32> = out
        .to_vec()
        .expect("read")
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes(c.try_into().expect("4")))
        .collect();
    // txq/suq of a 2D array: depth is reported as 1 on softcuda; NVIDIA's answer settles it.
    assert_eq!(
        &sizes[..2],
        &[w as u32, h as u32],
        "txq width, height: {sizes:?}"
    );
    assert_eq!(
        &sizes[3..5],
        &[w as u32, h as u32],
        "suq width, height: {sizes:?}"
    );
    for s in [s_in, s_out] {
        // SAFETY: live surface objects of this test, destroyed once.
        ok("cuSurfObjectDestroy", unsafe {
            sys::cuSurfObjectDestroy(s)
        });
    }
}

#[test]
fn descriptors_come_back_and_a_destroyed_texture_object_is_refused() {
    let _shared = shared_device();
    let Some((_ctx, _m, _turn)) = session() else {
        return;
    };
    let (a, t) = texture_1d(&[1.0, 2.0], Mode::CU_TR_ADDRESS_MODE_BORDER, true, 0);
    // SAFETY: all-zero is a valid descriptor to be overwritten.
    let mut r: sys::CUDA_RESOURCE_DESC = unsafe { std::mem::zeroed() };
    // SAFETY: valid out-pointer and live texture object.
    ok("cuTexObjectGetResourceDesc", unsafe {
        sys::cuTexObjectGetResourceDesc(&mut r, t.0)
    });
    assert_eq!(r.resType, sys::CUresourcetype::CU_RESOURCE_TYPE_ARRAY);
    // SAFETY: the union holds the array member for resType ARRAY.
    assert_eq!(unsafe { r.res.array.hArray }, a.0);
    // SAFETY: all-zero is a valid descriptor to be overwritten.
    let mut d: sys::CUDA_TEXTURE_DESC = unsafe { std::mem::zeroed() };
    // SAFETY: valid out-pointer and live texture object.
    ok("cuTexObjectGetTextureDesc", unsafe {
        sys::cuTexObjectGetTextureDesc(&mut d, t.0)
    });
    assert_eq!(d.addressMode[0], Mode::CU_TR_ADDRESS_MODE_BORDER);
    assert_eq!(d.filterMode, sys::CUfilter_mode::CU_TR_FILTER_MODE_LINEAR);
    let h = t.0;
    drop(t);
    // SAFETY: valid out-pointer; the handle was destroyed: the driver must refuse it.
    let got = unsafe { sys::cuTexObjectGetResourceDesc(&mut r, h) };
    assert_ne!(
        got,
        CUresult::CUDA_SUCCESS,
        "a destroyed texture object answered"
    );
}

#[test]
fn pitched_memory_and_3d_arrays_filter_linearly_in_every_dimension() {
    let _shared = shared_device();
    let Some((ctx, m, _turn)) = session() else {
        return;
    };
    // Texel (x, y, z) holds x + 10 y + 100 z; a linear function, so linear filtering inside the
    // texture returns the function of the weighted coordinate: per dimension, the lower texel's
    // index plus its weight rounded to 1/256.
    let f = |x: usize, y: usize, z: usize| (x + 10 * y + 100 * z) as f32;
    let filtered = |u: f32| {
        let b = u - 0.5;
        b.floor() + ((b - b.floor()) * 256.0).round() / 256.0
    };
    let clamp = Mode::CU_TR_ADDRESS_MODE_CLAMP;

    // Pitched 2D memory: 6 × 4 f32 texels in rows 32 bytes apart.
    let (w, h, pitch) = (6usize, 4usize, 32usize);
    let buf = DeviceBuffer::alloc(&ctx, pitch * h).expect("alloc");
    let mut bytes = vec![0u8; pitch * h];
    for y in 0..h {
        for x in 0..w {
            bytes[y * pitch + 4 * x..][..4].copy_from_slice(&f(x, y, 0).to_le_bytes());
        }
    }
    buf.write(&bytes).expect("write");
    // SAFETY: all-zero is a valid CUDA_RESOURCE_DESC (type ARRAY, all fields 0) to fill in.
    let mut r: sys::CUDA_RESOURCE_DESC = unsafe { std::mem::zeroed() };
    r.resType = sys::CUresourcetype::CU_RESOURCE_TYPE_PITCH2D;
    r.res.pitch2D.devPtr = buf.ptr();
    r.res.pitch2D.format = Format::CU_AD_FORMAT_FLOAT;
    r.res.pitch2D.numChannels = 1;
    r.res.pitch2D.width = w;
    r.res.pitch2D.height = h;
    r.res.pitch2D.pitchInBytes = pitch;
    let t = Tex::new(&r, &tex_desc(clamp, true, 0, [0.0; 4]));
    let pts = [(1.3f32, 1.7f32), (2.5, 2.5), (4.9, 0.6)];
    let coords: Vec<f32> = pts.iter().flat_map(|&(x, y)| [x, y]).collect();
    let got = as_f32(&sample(&ctx, &m, "tex2d_f32", &t, &f32s(&coords), 2));
    for (&(x, y), g) in pts.iter().zip(&got) {
        let want = filtered(x) + 10.0 * filtered(y);
        // Each weight may differ in its last bit (rounded or truncated): step / 256 each.
        assert!(
            (g - want).abs() <= 11.0 / 256.0 + 1e-3,
            "pitch2D at ({x}, {y}): got {g}, want {want}"
        );
    }

    // A 4 × 3 × 3 array.
    let (w, h, d) = (4usize, 3usize, 3usize);
    let a = Array::new(w, h, d, Format::CU_AD_FORMAT_FLOAT, 1, 0);
    let mut bytes: Vec<u8> = (0..w * h * d)
        .flat_map(|i| f(i % w, i / w % h, i / (w * h)).to_le_bytes())
        .collect();
    let r = HostArrayCopy {
        host: bytes.as_mut_ptr(),
        pitch: 4 * w,
        slice_rows: h,
        array: a.0,
        at: [0; 3],
        extent: [4 * w, h, d],
        to_array: true,
        three_d: true,
    }
    .run();
    ok("cuMemcpy3D into a 3D array", r);
    let t = Tex::new(&array_resource(&a), &tex_desc(clamp, true, 0, [0.0; 4]));
    let pts = [(1.2f32, 1.6f32, 1.9f32), (2.5, 1.5, 1.5), (0.8, 2.1, 1.3)];
    let coords: Vec<f32> = pts.iter().flat_map(|&(x, y, z)| [x, y, z, 0.0]).collect();
    let got = as_f32(&sample(&ctx, &m, "tex3d_f32", &t, &f32s(&coords), 4));
    for (&(x, y, z), g) in pts.iter().zip(&got) {
        let want = filtered(x) + 10.0 * filtered(y) + 100.0 * filtered(z);
        assert!(
            (g - want).abs() <= 111.0 / 256.0 + 1e-3,
            "3D at ({x}, {y}, {z}): got {g}, want {want}"
        );
    }
}

#[test]
fn tld4_gathers_one_channel_of_the_bilinear_footprint_counter_clockwise_from_lower_left() {
    let _shared = shared_device();
    let Some((ctx, m, _turn)) = session() else {
        return;
    };
    // A 5 × 4 two-channel float array: texel (x, y) holds (x + 10 y, -(x + 10 y)).
    let (w, h) = (5usize, 4usize);
    let gather = sys::CUDA_ARRAY3D_TEXTURE_GATHER;
    let a = Array::new(w, h, 0, Format::CU_AD_FORMAT_FLOAT, 2, gather);
    let v = |x: usize, y: usize| (x + 10 * y) as f32;
    let bytes: Vec<u8> = (0..w * h)
        .flat_map(|i| [v(i % w, i / w), -v(i % w, i / w)])
        .flat_map(f32::to_le_bytes)
        .collect();
    upload(&a, &bytes, 8 * w);
    let t = Tex::new(
        &array_resource(&a),
        &tex_desc(Mode::CU_TR_ADDRESS_MODE_CLAMP, false, 0, [0.0; 4]),
    );
    let pts = [(1.3f32, 2.6f32), (3.5, 1.5), (0.2, 0.2)];
    let coords: Vec<f32> = pts.iter().flat_map(|&(x, y)| [x, y]).collect();
    for (kernel, sign) in [("tld4_r", 1.0f32), ("tld4_g", -1.0)] {
        let got = sample(&ctx, &m, kernel, &t, &f32s(&coords), 2);
        for (&(x, y), g) in pts.iter().zip(&got) {
            let (i, j) = ((x - 0.5).floor() as i64, (y - 0.5).floor() as i64);
            let at = |x: i64, y: i64| {
                sign * v(
                    x.clamp(0, w as i64 - 1) as usize,
                    y.clamp(0, h as i64 - 1) as usize,
                )
            };
            let want = [at(i, j + 1), at(i + 1, j + 1), at(i + 1, j), at(i, j)];
            assert_eq!(g.map(f32::from_bits), want, "{kernel} at ({x}, {y})");
        }
    }
}
