//! Which driver calls wait for a kernel that is running on another stream, and which do not
//! (gpuhost avoids the first kind on its callers' threads: issues #9 and #11). The H200 is the
//! reference (driver 580, bench/h200-runs/2026-12-02-s12/unload-stall/README.md): module loads
//! (PTX or a linked image), cuModuleUnload, cuMemFree and cuMemHostUnregister return only once
//! every running kernel has ended; cuLinkComplete, cuMemAllocAsync/cuMemFreeAsync (with a
//! synchronize of their own stream) and cuMemHostRegister do not wait.
//!
//! The kernel marks itself started in mapped host memory, then spins until the host sets a word
//! there or a `%globaltimer` deadline passes, and writes which one stopped it. A call that
//! waits is seen to return with that mark written (the kernel ended); a call that does not is
//! seen to return while the kernel's event is not complete and no mark is written (only the
//! word, set after the call, ends it early). Ordering facts, no timing thresholds. Each test
//! runs alone: a spinning kernel would hold other tests' module loads and frees.

use std::ffi::c_void;
use std::sync::Arc;
use std::time::{Duration, Instant};

use conformance::case::shape_1d;
use conformance::context::Context;
use conformance::driver::exclusive_device;
use conformance::memory::PinnedBuffer;
use conformance::module::Module;
use conformance::stream::{Event, KernelArg, Stream};
use cudarc::driver::sys::{self, CUresult};

use crate::support::env_or_skip;

/// words[0]: set by the host to stop it; words[1]: 1 once it runs; words[2]: 1 when the host's
/// word stopped it, 2 when the deadline did.
const SPIN: &str = r#"
.version 7.0
.target sm_50
.address_size 64

.visible .entry spin(.param .u64 words, .param .u64 ns)
{
    .reg .b32 %r<4>;
    .reg .b64 %rd<8>;
    .reg .pred %p<3>;
    ld.param.u64 %rd1, [words];
    ld.param.u64 %rd3, [ns];
    mov.u32 %r3, 1;
    st.volatile.global.u32 [%rd1+4], %r3;
    membar.sys;
    mov.u64 %rd4, %globaltimer;
    add.u64 %rd5, %rd4, %rd3;
    mov.u32 %r2, 2;
$L_spin:
    ld.volatile.global.u32 %r1, [%rd1];
    setp.ne.u32 %p1, %r1, 0;
    @%p1 bra $L_word;
    mov.u64 %rd6, %globaltimer;
    setp.lt.u64 %p2, %rd6, %rd5;
    @%p2 bra $L_spin;
    bra.uni $L_end;
$L_word:
    mov.u32 %r2, 1;
$L_end:
    st.volatile.global.u32 [%rd1+8], %r2;
    membar.sys;
    ret;
}
"#;

/// A small module to load while the kernel spins.
const OTHER: &str = r#"
.version 7.0
.target sm_50
.address_size 64

.visible .entry other(.param .u64 out)
{
    .reg .b64 %rd<2>;
    .reg .b32 %r<2>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, 7;
    st.global.u32 [%rd1], %r1;
    ret;
}
"#;

/// The deadline of a kernel nobody stops: long enough that a call that does not wait returns
/// well before it.
const SHORT_NS: u64 = 1_000_000_000;
/// The deadline of a kernel the host stops: only reached if the host never gets to stop it.
const LONG_NS: u64 = 20_000_000_000;
const BY_WORD: u32 = 1;
const BY_DEADLINE: u32 = 2;

/// A spinning kernel on its own stream.
struct Spinner {
    ctx: Arc<Context>,
    words: PinnedBuffer,
    stream: Stream,
    ended: Event,
    _module: Arc<Module>,
}

impl Spinner {
    /// Launches the kernel with a deadline of `ns` and returns once it runs.
    fn start(ctx: &Arc<Context>, ns: u64) -> Spinner {
        let module = Module::load_ptx(ctx, SPIN).expect("load the spinner");
        let f = module.function("spin").expect("spin");
        let words = PinnedBuffer::alloc(ctx, 16).expect("cuMemAllocHost");
        let stream = Stream::new(ctx).expect("stream");
        let ended = Event::new(ctx).expect("event");
        let dptr = words.device_ptr().expect("device pointer of pinned memory");
        stream
            .launch(
                &f,
                shape_1d(1, 1),
                &[KernelArg::Ptr(dptr), KernelArg::U64(ns)],
            )
            .expect("launch");
        ended.record(&stream).expect("record");
        let s = Spinner {
            ctx: Arc::clone(ctx),
            words,
            stream,
            ended,
            _module: module,
        };
        // Bounded only so that a broken driver fails the test instead of hanging it.
        let give_up = Instant::now() + Duration::from_secs(60);
        while s.word(1) == 0 {
            assert!(Instant::now() < give_up, "the kernel never started");
            std::thread::yield_now();
        }
        s
    }

    fn word(&self, i: usize) -> u32 {
        // SAFETY: 16 bytes of live pinned memory, 4-aligned (page-aligned base); the kernel
        // writes these words concurrently, hence volatile.
        unsafe { std::ptr::read_volatile(self.words.ptr().cast::<u32>().add(i)) }
    }

    /// Which stopped the kernel (0 while it runs).
    fn stopped_by(&self) -> u32 {
        self.word(2)
    }

    /// Stops the kernel (if it still runs) and waits for it.
    fn finish(self) -> u32 {
        // SAFETY: word 0 of live pinned memory; the kernel only reads it.
        unsafe { std::ptr::write_volatile(self.words.ptr().cast::<u32>(), 1) };
        self.stream.synchronize().expect("synchronize the spinner");
        self.ctx.bind().expect("bind");
        self.stopped_by()
    }
}

/// The context, alone on the device (see the module header).
fn alone() -> Option<(std::sync::RwLockWriteGuard<'static, ()>, Arc<Context>)> {
    let lock = exclusive_device();
    let env = env_or_skip()?;
    Some((lock, Context::primary(env).expect("retain")))
}

/// Asserts the call just made waited: the kernel had ended (by its deadline) when it returned.
fn assert_waited(s: Spinner, call: &str) {
    assert_eq!(
        s.stopped_by(),
        BY_DEADLINE,
        "{call} returned while a kernel on another stream was still running"
    );
    assert_eq!(s.finish(), BY_DEADLINE);
}

/// Asserts the call just made did not wait: the kernel still ran when it returned, and ended
/// because the host stopped it after.
fn assert_did_not_wait(s: Spinner, call: &str) {
    assert!(
        !s.ended.is_complete().expect("cuEventQuery"),
        "{call} waited for a kernel running on another stream"
    );
    assert_eq!(s.stopped_by(), 0, "{call}: the kernel ended early");
    assert_eq!(
        s.finish(),
        BY_WORD,
        "{call}: the kernel ran to its deadline"
    );
}

#[test]
fn cu_mem_free_returns_only_after_a_kernel_running_on_another_stream_ends() {
    let Some((_alone, ctx)) = alone() else { return };
    let mut p: sys::CUdeviceptr = 0;
    // SAFETY: valid out-pointer; the context is current (Context::primary binds it).
    let r = unsafe { sys::cuMemAlloc_v2(&mut p, 1 << 20) };
    assert_eq!(r, CUresult::CUDA_SUCCESS);
    let s = Spinner::start(&ctx, SHORT_NS);
    // SAFETY: our allocation, used by no work.
    let r = unsafe { sys::cuMemFree_v2(p) };
    assert_eq!(r, CUresult::CUDA_SUCCESS);
    assert_waited(s, "cuMemFree");
}

#[test]
fn cu_mem_free_async_does_not_wait_for_a_kernel_running_on_another_stream() {
    let Some((_alone, ctx)) = alone() else { return };
    let own = Stream::new(&ctx).expect("stream");
    let mut p: sys::CUdeviceptr = 0;
    // SAFETY: valid out-pointer and a live stream of the current context.
    let r = unsafe { sys::cuMemAllocAsync(&mut p, 1 << 20, own.raw()) };
    assert_eq!(r, CUresult::CUDA_SUCCESS);
    own.synchronize().expect("synchronize the allocation");
    let s = Spinner::start(&ctx, LONG_NS);
    // SAFETY: our allocation, used by no work; a live stream.
    let r = unsafe { sys::cuMemFreeAsync(p, own.raw()) };
    assert_eq!(r, CUresult::CUDA_SUCCESS);
    own.synchronize().expect("synchronize the free");
    assert_did_not_wait(s, "cuMemFreeAsync + cuStreamSynchronize of its stream");
}

/// 1 MiB of our own page-aligned host memory, for cuMemHostRegister.
struct HostMem(*mut u8);

const HOST_MEM: usize = 1 << 20;

impl HostMem {
    fn layout() -> std::alloc::Layout {
        std::alloc::Layout::from_size_align(HOST_MEM, 4096).expect("layout")
    }

    fn new() -> HostMem {
        // SAFETY: a non-zero-sized layout.
        let p = unsafe { std::alloc::alloc_zeroed(Self::layout()) };
        assert!(!p.is_null());
        HostMem(p)
    }

    fn register(&self) -> CUresult {
        // SAFETY: HOST_MEM bytes of our own live memory, not registered yet.
        unsafe { sys::cuMemHostRegister_v2(self.0.cast(), HOST_MEM, 0) }
    }

    fn unregister(&self) -> CUresult {
        // SAFETY: registered by `register`; no copy uses it.
        unsafe { sys::cuMemHostUnregister(self.0.cast()) }
    }
}

impl Drop for HostMem {
    fn drop(&mut self) {
        // Unregistered by every test that passes; after a failed assertion, here (an error when
        // it is not registered changes nothing).
        let _ = self.unregister();
        // SAFETY: allocated in `new` with this layout, not registered any more, freed once.
        unsafe { std::alloc::dealloc(self.0, Self::layout()) };
    }
}

#[test]
fn cu_mem_host_unregister_returns_only_after_a_running_kernel_ends() {
    let Some((_alone, ctx)) = alone() else { return };
    let mem = HostMem::new();
    assert_eq!(mem.register(), CUresult::CUDA_SUCCESS);
    let s = Spinner::start(&ctx, SHORT_NS);
    assert_eq!(mem.unregister(), CUresult::CUDA_SUCCESS);
    assert_waited(s, "cuMemHostUnregister");
}

#[test]
fn cu_mem_host_register_does_not_wait_for_a_running_kernel() {
    let Some((_alone, ctx)) = alone() else { return };
    let mem = HostMem::new();
    let s = Spinner::start(&ctx, LONG_NS);
    assert_eq!(mem.register(), CUresult::CUDA_SUCCESS);
    assert_did_not_wait(s, "cuMemHostRegister");
    assert_eq!(mem.unregister(), CUresult::CUDA_SUCCESS);
}

#[test]
fn cu_module_load_data_returns_only_after_a_running_kernel_ends() {
    let Some((_alone, ctx)) = alone() else { return };
    let s = Spinner::start(&ctx, SHORT_NS);
    let other = Module::load_ptx(&ctx, OTHER).expect("cuModuleLoadData");
    assert_waited(s, "cuModuleLoadData");
    drop(other);
}

#[test]
fn cu_module_unload_returns_only_after_a_running_kernel_ends() {
    let Some((_alone, ctx)) = alone() else { return };
    let other = Module::load_ptx(&ctx, OTHER).expect("cuModuleLoadData");
    let s = Spinner::start(&ctx, SHORT_NS);
    drop(other);
    assert_waited(s, "cuModuleUnload");
}

/// cuLinkCreate + AddData(PTX) + Complete: the image, copied out, before cuLinkDestroy.
fn link(ptx: &str) -> Vec<u8> {
    let (state, r) = crate::link::link_ptx(ptx);
    assert_eq!(r, CUresult::CUDA_SUCCESS, "cuLinkAddData");
    let (mut image, mut size): (*mut c_void, usize) = (std::ptr::null_mut(), 0);
    // SAFETY: a live link state and valid out-pointers; the image is copied before the state
    // is destroyed, once.
    unsafe {
        let r = sys::cuLinkComplete(state, &mut image, &mut size);
        assert_eq!(r, CUresult::CUDA_SUCCESS, "cuLinkComplete");
        let out = std::slice::from_raw_parts(image.cast::<u8>(), size).to_vec();
        assert_eq!(sys::cuLinkDestroy(state), CUresult::CUDA_SUCCESS);
        out
    }
}

#[test]
fn cu_link_complete_does_not_wait_for_a_running_kernel_and_loading_its_image_does() {
    let Some((_alone, ctx)) = alone() else { return };
    let s = Spinner::start(&ctx, LONG_NS);
    let image = link(OTHER);
    assert_did_not_wait(s, "cuLinkCreate/AddData/Complete");

    let s = Spinner::start(&ctx, SHORT_NS);
    let mut module: sys::CUmodule = std::ptr::null_mut();
    // SAFETY: a complete image made by cuLinkComplete (copied, alive for the call); the
    // context is current (the spinner bound it).
    let r = unsafe { sys::cuModuleLoadData(&mut module, image.as_ptr().cast()) };
    assert_eq!(r, CUresult::CUDA_SUCCESS, "cuModuleLoadData(linked image)");
    assert_waited(s, "cuModuleLoadData(linked image)");
    // SAFETY: loaded above, unloaded once; no kernel of it ran.
    let r = unsafe { sys::cuModuleUnload(module) };
    assert_eq!(r, CUresult::CUDA_SUCCESS);
}
