//! Driver calls third-party programs use that gpuhost does not: cuLaunchKernelEx with hint
//! attributes, pitched allocations with a 2D copy, several pointer attributes at once, stream
//! callbacks, and PCI bus ids that round-trip to the device.

use std::ffi::{CStr, c_char, c_void};
use std::sync::Mutex;

use conformance::context::Context;
use conformance::driver::shared_device;
use conformance::memory::DeviceBuffer;
use conformance::module::Module;
use conformance::stream::Stream;
use cudarc::driver::result;
use cudarc::driver::sys::{self, CUdevice_attribute as A, CUresult};

use crate::support::{Steps, clang_ptx, env_or_skip};

/// What the stream callback saw: (stream, status) per call.
static CALLS: Mutex<Vec<(usize, u32)>> = Mutex::new(Vec::new());

unsafe extern "C" fn record_call(stream: sys::CUstream, status: CUresult, user: *mut c_void) {
    let _ = user;
    CALLS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .push((stream as usize, status as u32));
}

#[test]
fn launch_ex_pitch_pointer_attributes_callbacks_and_pci_ids_behave_as_on_nvidia() {
    let _shared = shared_device();
    let Some(env) = env_or_skip() else { return };
    let ctx = Context::primary(env).expect("retain");
    let mut steps = Steps::default();
    let s = Stream::new(&ctx).expect("stream");

    // cuLaunchKernelEx: saxpy with a priority hint.
    let module = Module::load_ptx(&ctx, &clang_ptx("saxpy")).expect("load");
    let saxpy = module.function("saxpy").expect("saxpy");
    let n = 512usize;
    let x = DeviceBuffer::alloc(&ctx, n * 4).expect("x");
    let y = DeviceBuffer::alloc(&ctx, n * 4).expect("y");
    let xs: Vec<u8> = (0..n).flat_map(|i| (i as f32).to_le_bytes()).collect();
    x.write(&xs).expect("x");
    y.write(&vec![0u8; n * 4]).expect("y");
    let (mut count, mut a, mut px, mut py) = (n as i32, 3.0f32, x.ptr(), y.ptr());
    let mut args: [*mut c_void; 4] = [
        (&raw mut count).cast(),
        (&raw mut a).cast(),
        (&raw mut px).cast(),
        (&raw mut py).cast(),
    ];
    // SAFETY: all-zero is a valid CUlaunchAttribute; the id and value are set below.
    let mut priority: sys::CUlaunchAttribute = unsafe { std::mem::zeroed() };
    priority.id = sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PRIORITY;
    priority.value.priority = 0;
    let config = sys::CUlaunchConfig {
        gridDimX: 2,
        gridDimY: 1,
        gridDimZ: 1,
        blockDimX: 256,
        blockDimY: 1,
        blockDimZ: 1,
        sharedMemBytes: 0,
        hStream: s.raw(),
        attrs: &mut priority,
        numAttrs: 1,
    };
    // SAFETY: a valid config, a live function and one pointer per parameter.
    let r = unsafe {
        sys::cuLaunchKernelEx(
            &config,
            saxpy.raw(),
            args.as_mut_ptr(),
            std::ptr::null_mut(),
        )
    };
    steps.expect(
        "cuLaunchKernelEx with a priority attribute",
        r,
        CUresult::CUDA_SUCCESS,
    );

    // A callback after the launch, in stream order, with the stream and status SUCCESS.
    CALLS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clear();
    // SAFETY: a live stream and a callback valid for any arguments.
    let r =
        unsafe { sys::cuStreamAddCallback(s.raw(), Some(record_call), std::ptr::null_mut(), 0) };
    steps.expect("cuStreamAddCallback", r, CUresult::CUDA_SUCCESS);
    s.synchronize().expect("sync");
    let calls = CALLS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    steps.check(
        "the callback ran once with the stream and SUCCESS",
        calls == [(s.raw() as usize, 0)],
        || format!("{calls:?}"),
    );
    let ys = y.to_vec().expect("y");
    steps.check(
        "cuLaunchKernelEx ran saxpy: y = 3x",
        ys.chunks_exact(4)
            .enumerate()
            .all(|(i, c)| f32::from_le_bytes([c[0], c[1], c[2], c[3]]) == 3.0 * i as f32),
        || "wrong y".into(),
    );

    // Pitched memory: aligned rows, and a 2D copy in and out.
    let (width, height) = (100usize, 7usize);
    let (mut dptr, mut pitch) = (0u64, 0usize);
    // SAFETY: valid out-pointers.
    let r = unsafe { sys::cuMemAllocPitch_v2(&mut dptr, &mut pitch, width, height, 4) };
    steps.expect("cuMemAllocPitch", r, CUresult::CUDA_SUCCESS);
    // SAFETY: `env.device` came from cuDeviceGet.
    let align = unsafe {
        result::device::get_attribute(env.device, A::CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT)
    }
    .expect("attribute");
    steps.check(
        "pitch ≥ width and a multiple of the pitch alignment",
        pitch >= width && pitch % align as usize == 0,
        || format!("pitch {pitch}, alignment {align}"),
    );
    let host: Vec<u8> = (0..width * height).map(|i| (i % 251) as u8).collect();
    let mut back = vec![0u8; width * height];
    let copy = |src_host: *const u8, dst_host: *mut u8, to_device: bool| {
        let (host, device) = (
            sys::CUmemorytype::CU_MEMORYTYPE_HOST,
            sys::CUmemorytype::CU_MEMORYTYPE_DEVICE,
        );
        let c = sys::CUDA_MEMCPY2D {
            srcXInBytes: 0,
            srcY: 0,
            srcMemoryType: if to_device { host } else { device },
            srcHost: src_host.cast(),
            srcDevice: if to_device { 0 } else { dptr },
            srcArray: std::ptr::null_mut(),
            srcPitch: if to_device { width } else { pitch },
            dstXInBytes: 0,
            dstY: 0,
            dstMemoryType: if to_device { device } else { host },
            dstHost: dst_host.cast(),
            dstDevice: if to_device { dptr } else { 0 },
            dstArray: std::ptr::null_mut(),
            dstPitch: if to_device { pitch } else { width },
            WidthInBytes: width,
            Height: height,
        };
        // SAFETY: the descriptor covers live host and device memory.
        unsafe { sys::cuMemcpy2D_v2(&c) }
    };
    steps.expect(
        "cuMemcpy2D into pitched memory",
        copy(host.as_ptr(), std::ptr::null_mut(), true),
        CUresult::CUDA_SUCCESS,
    );
    steps.expect(
        "cuMemcpy2D out of it",
        copy(std::ptr::null(), back.as_mut_ptr(), false),
        CUresult::CUDA_SUCCESS,
    );
    steps.check("the rows round-trip", back == host, || "rows differ".into());

    // Several pointer attributes at once: context, memory type, device ordinal.
    let (mut owner, mut kind, mut ordinal): (sys::CUcontext, u32, i32) =
        (std::ptr::null_mut(), 0, -1);
    let attrs = [
        sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_CONTEXT,
        sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
        sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
    ];
    let mut data: [*mut c_void; 3] = [
        (&raw mut owner).cast(),
        (&raw mut kind).cast(),
        (&raw mut ordinal).cast(),
    ];
    // SAFETY: three attributes and three out-pointers of the right sizes.
    let r = unsafe {
        sys::cuPointerGetAttributes(3, attrs.as_ptr().cast_mut(), data.as_mut_ptr(), dptr)
    };
    steps.expect("cuPointerGetAttributes", r, CUresult::CUDA_SUCCESS);
    steps.check(
        "owner, DEVICE memory, ordinal 0",
        owner == ctx.raw() && kind == 2 && ordinal == 0,
        || format!("{owner:?} {kind} {ordinal}"),
    );
    // SAFETY: frees the pitched allocation once.
    unsafe { sys::cuMemFree_v2(dptr) };

    // PCI bus id: its bus field is the PCI_BUS_ID attribute, and it names the device back.
    let mut id = [0 as c_char; 32];
    // SAFETY: a 32-byte buffer and a valid device.
    let r = unsafe { sys::cuDeviceGetPCIBusId(id.as_mut_ptr(), 32, env.device) };
    steps.expect("cuDeviceGetPCIBusId", r, CUresult::CUDA_SUCCESS);
    // SAFETY: the driver wrote a NUL-terminated string into `id`.
    let text = unsafe { CStr::from_ptr(id.as_ptr()) }
        .to_string_lossy()
        .into_owned();
    // SAFETY: `env.device` came from cuDeviceGet.
    let bus =
        unsafe { result::device::get_attribute(env.device, A::CU_DEVICE_ATTRIBUTE_PCI_BUS_ID) }
            .expect("attribute");
    let field = text
        .split(':')
        .nth(1)
        .and_then(|b| i32::from_str_radix(b, 16).ok());
    steps.check(
        "the id's bus field is PCI_BUS_ID",
        field == Some(bus),
        || format!("{text} vs bus {bus}"),
    );
    let mut dev = -1;
    // SAFETY: a NUL-terminated id and a valid out-pointer.
    let r = unsafe { sys::cuDeviceGetByPCIBusId(&mut dev, id.as_ptr()) };
    steps.expect("cuDeviceGetByPCIBusId", r, CUresult::CUDA_SUCCESS);
    steps.check("the id names the device back", dev == env.device, || {
        format!("{dev}")
    });
    steps.finish(&env.choice.kind.to_string());
}
