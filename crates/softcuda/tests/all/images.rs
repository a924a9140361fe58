//! Texture and surface handles in kernels, where NVIDIA's behaviour is undefined and softcuda's
//! is a typed kernel fault: a destroyed texture object, a forged surface handle and a `.trap`
//! surface access outside the surface each stop the kernel with CUDA_ERROR_LAUNCH_FAILED and a
//! message naming the cause (in a child: the fault is sticky); `.zero` drops such a store.

use std::ffi::{CStr, CString, c_char, c_void};

use cudarc::driver::sys::{CUfunction, CUmodule, CUresult};
use softcuda::exports::*;

use crate::common::{fresh_primary, in_child, ok, serial};

/// `probe(u64 tex, u64 surf, u32 x)`: a 1D texture read, then a 4-byte `.trap` surface store at
/// byte x of row x; `probe_zero` stores x with `.zero` at byte x of row x / 4.
const PTX: &str = "
.version 7.0
.target sm_80
.address_size 64
.visible .entry probe(.param .u64 tex, .param .u64 surf, .param .u32 x)
{
	.reg .b32 %r<6>;
	.reg .f32 %f<2>;
	.reg .b64 %rd<3>;
	ld.param.u64 %rd1, [tex];
	ld.param.u64 %rd2, [surf];
	ld.param.u32 %r1, [x];
	mov.f32 %f1, 0f3F000000;
	tex.1d.v4.f32.f32 {%r2, %r3, %r4, %r5}, [%rd1, {%f1}];
	sust.b.2d.b32.trap [%rd2, {%r1, %r1}], {%r1};
	ret;
}
.visible .entry probe_zero(.param .u64 surf, .param .u32 x)
{
	.reg .b32 %r<3>;
	.reg .b64 %rd<2>;
	ld.param.u64 %rd1, [surf];
	ld.param.u32 %r1, [x];
	shr.u32 %r2, %r1, 2;
	sust.b.2d.b32.zero [%rd1, {%r1, %r2}], {%r1};
	ret;
}
";

/// A 4 × 4 u32 surface-capable array, a texture over it and a surface over it.
struct Objects {
    array: *mut c_void,
    tex: u64,
    surf: u64,
    module: CUmodule,
}

fn objects() -> Objects {
    fresh_primary();
    let desc = softcuda_array_desc(4, 4, 2);
    let mut array: *mut c_void = std::ptr::null_mut();
    // SAFETY: valid descriptor and out-pointer.
    ok(unsafe { cuArray3DCreate_v2(&mut array, (&raw const desc).cast()) });
    let mut res = [0u64; 18];
    res[1] = array as u64;
    let resource: *const c_void = res.as_ptr().cast();
    let tex_desc = [0u32; 26];
    let (mut tex, mut surf) = (0u64, 0u64);
    // SAFETY: `res` and `tex_desc` have CUDA_RESOURCE_DESC's and CUDA_TEXTURE_DESC's sizes
    // (type ARRAY at offset 0, the handle at 8; wrap, point, no flags); valid out-pointers.
    unsafe {
        ok(cuTexObjectCreate(
            &mut tex,
            resource.cast(),
            tex_desc.as_ptr().cast(),
            std::ptr::null(),
        ));
        ok(cuSurfObjectCreate(&mut surf, resource.cast()));
    }
    let ptx = CString::new(PTX).expect("no NUL");
    let mut module: CUmodule = std::ptr::null_mut();
    // SAFETY: NUL-terminated PTX, valid out-pointer.
    ok(unsafe { cuModuleLoadData(&mut module, ptx.as_ptr().cast()) });
    Objects {
        array,
        tex,
        surf,
        module,
    }
}

/// `CUDA_ARRAY3D_DESCRIPTOR` of a `w` × `h` u32 array with `flags`, through the public struct.
fn softcuda_array_desc(
    w: usize,
    h: usize,
    flags: u32,
) -> cudarc::driver::sys::CUDA_ARRAY3D_DESCRIPTOR {
    cudarc::driver::sys::CUDA_ARRAY3D_DESCRIPTOR {
        Width: w,
        Height: h,
        Depth: 0,
        Format: cudarc::driver::sys::CUarray_format::CU_AD_FORMAT_UNSIGNED_INT32,
        NumChannels: 1,
        Flags: flags,
    }
}

/// Launches `kernel` of `o`'s module on one thread and synchronizes.
fn run(o: &Objects, kernel: &CStr, args: &mut [*mut c_void]) -> CUresult {
    let mut f: CUfunction = std::ptr::null_mut();
    // SAFETY: live module, NUL-terminated name, valid out-pointer.
    ok(unsafe { cuModuleGetFunction(&mut f, o.module, kernel.as_ptr()) });
    // SAFETY: one pointer per kernel parameter, each to a value of its size.
    ok(unsafe {
        cuLaunchKernel(
            f,
            1,
            1,
            1,
            1,
            1,
            1,
            0,
            std::ptr::null_mut(),
            args.as_mut_ptr(),
            std::ptr::null_mut(),
        )
    });
    // SAFETY: no arguments.
    unsafe { cuCtxSynchronize() }
}

/// The last kernel fault's message.
fn fault() -> String {
    let mut msg = [0 as c_char; 512];
    // SAFETY: a 512-byte buffer.
    ok(unsafe { softcuda_last_fault(msg.as_mut_ptr(), 512) });
    // SAFETY: softcuda wrote a NUL-terminated string into it.
    unsafe { CStr::from_ptr(msg.as_ptr()) }
        .to_string_lossy()
        .into_owned()
}

/// Runs `probe` in a child with the texture handle `tex(o)` and surface x `x`; checks the
/// launch fails with a message containing `says`.
fn probe_fails(name: &str, tex: fn(&Objects) -> u64, x: u32, says: &'static str) {
    in_child(
        name,
        |_| {},
        move || {
            let o = objects();
            let (mut t, mut s, mut xx) = (tex(&o), o.surf, x);
            let r = run(
                &o,
                c"probe",
                &mut [
                    (&raw mut t).cast(),
                    (&raw mut s).cast(),
                    (&raw mut xx).cast(),
                ],
            );
            assert_eq!(r, CUresult::CUDA_ERROR_LAUNCH_FAILED);
            let msg = fault();
            assert!(msg.contains(says), "{msg}");
        },
    );
}

#[test]
fn a_destroyed_texture_object_in_a_kernel_is_a_launch_failure() {
    probe_fails(
        "images::a_destroyed_texture_object_in_a_kernel_is_a_launch_failure",
        |o| {
            // SAFETY: a live texture object, destroyed once.
            ok(unsafe { cuTexObjectDestroy(o.tex) });
            o.tex
        },
        0,
        "is not a live object",
    );
}

#[test]
fn a_surface_object_given_as_a_texture_is_a_launch_failure() {
    probe_fails(
        "images::a_surface_object_given_as_a_texture_is_a_launch_failure",
        |o| o.surf,
        0,
        "is not a live object",
    );
}

#[test]
fn a_trap_mode_surface_store_outside_the_surface_is_a_launch_failure() {
    probe_fails(
        "images::a_trap_mode_surface_store_outside_the_surface_is_a_launch_failure",
        |o| o.tex,
        16,
        "outside the surface",
    );
}

#[test]
fn a_zero_mode_surface_store_outside_the_surface_is_dropped() {
    in_child(
        "images::a_zero_mode_surface_store_outside_the_surface_is_dropped",
        |_| {},
        || {
            let o = objects();
            for x in [16u32, 4] {
                let (mut s, mut xx) = (o.surf, x);
                ok(run(
                    &o,
                    c"probe_zero",
                    &mut [(&raw mut s).cast(), (&raw mut xx).cast()],
                ));
            }
            let mut back = [0u32; 16];
            // SAFETY: 64 writable bytes from the 64-byte array.
            ok(unsafe { cuMemcpyAtoH_v2(back.as_mut_ptr().cast(), o.array, 0, 64) });
            // Only x = 4 (byte 4 of row 1: texel (1, 1)) landed.
            let mut want = [0u32; 16];
            want[5] = 4;
            assert_eq!(back, want);
        },
    );
}

#[test]
fn a_destroyed_array_is_a_stale_handle_to_every_call() {
    // NVIDIA's array handles are pointers, and using one after cuArrayDestroy crashes its
    // driver (conformance cannot compare this); softcuda checks every handle.
    let _g = serial();
    fresh_primary();
    let desc = softcuda_array_desc(4, 4, 0);
    let mut array: *mut c_void = std::ptr::null_mut();
    // SAFETY: valid descriptor and out-pointer.
    ok(unsafe { cuArray3DCreate_v2(&mut array, (&raw const desc).cast()) });
    // SAFETY: a live array, destroyed once.
    ok(unsafe { cuArrayDestroy(array.cast()) });
    // SAFETY: the stale handle is the behaviour under test.
    let again = unsafe { cuArrayDestroy(array.cast()) };
    assert_eq!(
        again,
        CUresult::CUDA_ERROR_INVALID_HANDLE,
        "a second destroy"
    );
    let mut d = softcuda_array_desc(0, 0, 0);
    // SAFETY: valid out-pointer; the stale handle is the behaviour under test.
    let r = unsafe { cuArray3DGetDescriptor_v2((&raw mut d).cast(), array.cast()) };
    assert_eq!(r, CUresult::CUDA_ERROR_INVALID_HANDLE, "its descriptor");
    let mut back = [0u32; 16];
    // SAFETY: 64 writable bytes; the stale handle is the behaviour under test.
    let r = unsafe { cuMemcpyAtoH_v2(back.as_mut_ptr().cast(), array.cast(), 0, 64) };
    assert_eq!(r, CUresult::CUDA_ERROR_INVALID_HANDLE, "a copy out of it");
}
