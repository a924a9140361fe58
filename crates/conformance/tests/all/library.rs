//! The library API (`cuLibrary*`, `cuKernel*`) on tests/kernels/library/lib.ptx: a library loads
//! with no context current (so does a fatbin holding PTX, plain or compressed); its kernels are
//! found by name and by enumeration, and launch through cuKernelGetFunction and as a CUkernel
//! handed straight to cuLaunchKernel, cuLaunchKernelEx and a graph kernel node; its globals are read through cuLibraryGetGlobal; each context gets its
//! own module and globals; unloading waits for queued launches and leaves every handle stale.
//! The error cases and cuGetProcAddress are in `library_calls`.

use std::ffi::{CStr, CString, c_char, c_int, c_uint, c_void};
use std::ptr::{null, null_mut};
use std::sync::Arc;

use conformance::context::Context;
use cudarc::driver::sys::{self, CUresult};

use crate::fatbin::{aligned, fixture as fatbin_fixture};
use crate::support::{Steps, on_fresh_thread, own_ptx};

pub(crate) const OK: CUresult = CUresult::CUDA_SUCCESS;
const ELEMENTS: usize = 300;

/// Retains the primary context and makes it current on this thread (the driver was chosen
/// before any test body runs).
pub(crate) fn primary() -> Arc<Context> {
    let env = conformance::driver::env().expect("the driver on_fresh_thread checked");
    Context::primary(env).expect("retain the primary context")
}

/// The fixture's PTX as the NUL-terminated image cuLibraryLoadData takes.
pub(crate) fn fixture() -> CString {
    CString::new(own_ptx("library/lib")).expect("no NUL in PTX")
}

/// cuLibraryLoadData of PTX text without options.
pub(crate) fn load(image: &CStr) -> (CUresult, sys::CUlibrary) {
    // SAFETY: a NUL-terminated image that outlives the call.
    unsafe { load_image(image.as_ptr().cast()) }
}

/// cuLibraryLoadData of an image without options.
///
/// # Safety
/// `image` is NULL or an image cuLibraryLoadData takes (PTX text, a fatbin), alive for the call.
pub(crate) unsafe fn load_image(image: *const c_void) -> (CUresult, sys::CUlibrary) {
    let mut lib: sys::CUlibrary = null_mut();
    // SAFETY: valid out-pointer; the image as the caller promises; no options.
    let r = unsafe {
        sys::cuLibraryLoadData(
            &mut lib,
            image,
            null_mut(),
            null_mut(),
            0,
            null_mut(),
            null_mut(),
            0,
        )
    };
    (r, lib)
}

/// cuLibraryGetKernel; the driver validates `lib`, which may be stale on purpose.
pub(crate) fn kernel(lib: sys::CUlibrary, name: &CStr) -> (CUresult, sys::CUkernel) {
    let mut k: sys::CUkernel = null_mut();
    // SAFETY: valid out-pointer and NUL-terminated name.
    let r = unsafe { sys::cuLibraryGetKernel(&mut k, lib, name.as_ptr()) };
    (r, k)
}

/// cuKernelGetFunction in the current context.
fn function(k: sys::CUkernel) -> (CUresult, sys::CUfunction) {
    let mut f: sys::CUfunction = null_mut();
    // SAFETY: valid out-pointer; the driver validates `k`.
    let r = unsafe { sys::cuKernelGetFunction(&mut f, k) };
    (r, f)
}

/// cuLibraryGetGlobal in the current context: (result, address, size).
pub(crate) fn global(lib: sys::CUlibrary, name: &CStr) -> (CUresult, sys::CUdeviceptr, usize) {
    let (mut dptr, mut bytes): (sys::CUdeviceptr, usize) = (0, 0);
    // SAFETY: valid out-pointers and NUL-terminated name.
    let r = unsafe { sys::cuLibraryGetGlobal(&mut dptr, &mut bytes, lib, name.as_ptr()) };
    (r, dptr, bytes)
}

/// The u32 at device address `addr` (a synchronous copy: earlier work on the context is done).
fn read_u32(addr: sys::CUdeviceptr) -> (CUresult, u32) {
    let mut v = 0u32;
    // SAFETY: 4 writable bytes; the driver checks `addr`.
    let r = unsafe { sys::cuMemcpyDtoH_v2((&raw mut v).cast(), addr, 4) };
    (r, v)
}

/// Writes `v` to the u32 at device address `addr`.
fn write_u32(addr: sys::CUdeviceptr, v: u32) -> CUresult {
    // SAFETY: 4 readable bytes; the driver checks `addr`.
    unsafe { sys::cuMemcpyHtoD_v2(addr, (&raw const v).cast(), 4) }
}

/// `ELEMENTS` u32 of device memory in the current context, freed on drop.
struct Out(sys::CUdeviceptr);

impl Out {
    fn new() -> Out {
        let mut p: sys::CUdeviceptr = 0;
        // SAFETY: valid out-pointer.
        let r = unsafe { sys::cuMemAlloc_v2(&mut p, ELEMENTS * 4) };
        assert_eq!(r, OK, "cuMemAlloc");
        Out(p)
    }

    /// Whether it holds `base + i` at every `i` (after the context's work so far).
    fn holds(&self, base: u32) -> Result<(), String> {
        let mut host = vec![0u32; ELEMENTS];
        // SAFETY: `host` has room for ELEMENTS u32; the allocation holds as many.
        let r = unsafe { sys::cuMemcpyDtoH_v2(host.as_mut_ptr().cast(), self.0, ELEMENTS * 4) };
        if r != OK {
            return Err(format!("cuMemcpyDtoH: {r:?}"));
        }
        let want: Vec<u32> = (0..ELEMENTS as u32).map(|i| base + i).collect();
        if host == want {
            Ok(())
        } else {
            Err(format!(
                "first values {:?}, want {base}, {}, ...",
                &host[..4],
                base + 1
            ))
        }
    }
}

impl Drop for Out {
    fn drop(&mut self) {
        // SAFETY: allocated by cuMemAlloc in `new`, freed once.
        unsafe { sys::cuMemFree_v2(self.0) };
    }
}

/// Launches add_base(out, ELEMENTS) through `f` (a CUfunction, or a CUkernel cast to one) on
/// `stream`.
fn launch_add_base(f: sys::CUfunction, out: &Out, stream: sys::CUstream) -> CUresult {
    let (mut ptr, mut n) = (out.0, ELEMENTS as u32);
    let mut args: [*mut c_void; 2] = [(&raw mut ptr).cast(), (&raw mut n).cast()];
    // SAFETY: one pointer per kernel parameter, each to a value of its size, alive for the call.
    unsafe {
        sys::cuLaunchKernel(
            f,
            3,
            1,
            1,
            128,
            1,
            1,
            0,
            stream,
            args.as_mut_ptr(),
            null_mut(),
        )
    }
}

/// Records in `steps`, as `what`, whether `out` holds `base + i` at every `i`.
fn expect_out(steps: &mut Steps, what: &str, out: &Out, base: u32) {
    let held = out.holds(base);
    steps.check(what, held.is_ok(), || held.unwrap_err());
}

#[test]
fn a_library_loads_without_a_context_and_its_kernels_launch_every_way() {
    on_fresh_thread(|_, steps| {
        let image = fixture();
        let (r, lib) = load(&image);
        steps.expect("cuLibraryLoadData with no current context", r, OK);
        if r != OK {
            return;
        }
        let mut count: c_uint = 0;
        // SAFETY: valid out-pointer and library.
        let r = unsafe { sys::cuLibraryGetKernelCount(&mut count, lib) };
        steps.expect("cuLibraryGetKernelCount", r, OK);
        steps.check("two kernels", count == 2, || format!("{count}"));
        let mut listed: [sys::CUkernel; 2] = [null_mut(); 2];
        // SAFETY: room for the 2 handles asked for.
        let r = unsafe { sys::cuLibraryEnumerateKernels(listed.as_mut_ptr(), 2, lib) };
        steps.expect("cuLibraryEnumerateKernels", r, OK);
        let (r, add) = kernel(lib, c"add_base");
        steps.expect("cuLibraryGetKernel(add_base)", r, OK);
        let (r, set) = kernel(lib, c"set_base");
        steps.expect("cuLibraryGetKernel(set_base)", r, OK);
        steps.check(
            "enumeration lists the kernels found by name",
            listed.contains(&add) && listed.contains(&set) && add != set,
            || format!("{listed:?} vs add_base {add:?}, set_base {set:?}"),
        );
        steps.check(
            "the same name gives the same kernel",
            kernel(lib, c"add_base").1 == add,
            || "a new handle".into(),
        );
        let mut name: *const c_char = null();
        // SAFETY: valid out-pointer and kernel.
        let r = unsafe { sys::cuKernelGetName(&mut name, add) };
        steps.expect("cuKernelGetName", r, OK);
        // SAFETY: on success, a NUL-terminated string valid while the kernel is.
        let got = (r == OK).then(|| unsafe { CStr::from_ptr(name) }.to_owned());
        steps.check(
            "the name is add_base",
            got.as_deref() == Some(c"add_base"),
            || format!("{got:?}"),
        );
        let mut owner: sys::CUlibrary = null_mut();
        // SAFETY: valid out-pointer and kernel.
        let r = unsafe { sys::cuKernelGetLibrary(&mut owner, add) };
        steps.expect("cuKernelGetLibrary", r, OK);
        steps.check("the kernel's library", owner == lib, || {
            format!("{owner:?}")
        });
        let (mut offset, mut size) = (0usize, 0usize);
        // SAFETY: valid out-pointers and kernel.
        let r = unsafe { sys::cuKernelGetParamInfo(add, 1, &mut offset, &mut size) };
        steps.expect(
            "cuKernelGetParamInfo with no current context (NVIDIA 580)",
            r,
            CUresult::CUDA_ERROR_INVALID_CONTEXT,
        );
        steps.expect(
            "cuKernelGetFunction with no current context",
            function(add).0,
            CUresult::CUDA_ERROR_INVALID_CONTEXT,
        );

        let ctx = primary();
        // SAFETY: valid out-pointers and kernel.
        let r = unsafe { sys::cuKernelGetParamInfo(add, 1, &mut offset, &mut size) };
        steps.expect("cuKernelGetParamInfo(add_base, 1)", r, OK);
        steps.check("n is 4 bytes at offset 8", (offset, size) == (8, 4), || {
            format!("({offset}, {size})")
        });
        let (r, f) = function(add);
        steps.expect("cuKernelGetFunction in the primary context", r, OK);
        steps.check("the same function each time", function(add).1 == f, || {
            "a new handle".into()
        });
        let mut module: sys::CUmodule = null_mut();
        // SAFETY: valid out-pointer and library.
        let r = unsafe { sys::cuLibraryGetModule(&mut module, lib) };
        steps.expect("cuLibraryGetModule", r, OK);
        let mut from_module: sys::CUfunction = null_mut();
        // SAFETY: valid out-pointer, module and NUL-terminated name.
        let r = unsafe { sys::cuModuleGetFunction(&mut from_module, module, c"add_base".as_ptr()) };
        steps.expect("cuModuleGetFunction on the library's module", r, OK);

        let (r, base, bytes) = global(lib, c"base");
        steps.expect("cuLibraryGetGlobal(base)", r, OK);
        steps.check("base is 4 bytes", bytes == 4, || format!("{bytes}"));
        steps.check("base starts at 1000", read_u32(base) == (OK, 1000), || {
            format!("{:?}", read_u32(base))
        });
        let (r, _, bytes) = global(lib, c"table");
        steps.expect("cuLibraryGetGlobal(table)", r, OK);
        steps.check("table is 32 bytes", bytes == 32, || format!("{bytes}"));

        let out = Out::new();
        let r = launch_add_base(f, &out, null_mut());
        steps.expect("cuLaunchKernel(cuKernelGetFunction's function)", r, OK);
        expect_out(steps, "add_base ran with base 1000", &out, 1000);
        steps.expect("write base = 5", write_u32(base, 5), OK);
        let r = launch_add_base(add.cast(), &out, null_mut());
        steps.expect("cuLaunchKernel(CUkernel)", r, OK);
        expect_out(steps, "the CUkernel launch saw base 5", &out, 5);

        let mut v = 42u32;
        let mut args: [*mut c_void; 1] = [(&raw mut v).cast()];
        let config = sys::CUlaunchConfig {
            gridDimX: 1,
            gridDimY: 1,
            gridDimZ: 1,
            blockDimX: 1,
            blockDimY: 1,
            blockDimZ: 1,
            sharedMemBytes: 0,
            hStream: null_mut(),
            attrs: null_mut(),
            numAttrs: 0,
        };
        // SAFETY: a complete config; one argument pointer to a u32, alive for the call.
        let r =
            unsafe { sys::cuLaunchKernelEx(&config, set.cast(), args.as_mut_ptr(), null_mut()) };
        steps.expect("cuLaunchKernelEx(CUkernel set_base(42))", r, OK);
        steps.check("set_base stored 42", read_u32(base) == (OK, 42), || {
            format!("{:?}", read_u32(base))
        });

        graph_node_runs_the_kernel(steps, add, &out);
        let mut managed: sys::CUdeviceptr = 0;
        // SAFETY: valid out-pointer (the size may be NULL) and NUL-terminated name.
        let r =
            unsafe { sys::cuLibraryGetManaged(&mut managed, null_mut(), lib, c"base".as_ptr()) };
        steps.expect(
            "cuLibraryGetManaged of a variable that is not managed",
            r,
            CUresult::CUDA_ERROR_NOT_FOUND,
        );
        let mut fptr: *mut c_void = null_mut();
        // SAFETY: valid out-pointer and NUL-terminated name.
        let r = unsafe { sys::cuLibraryGetUnifiedFunction(&mut fptr, lib, c"add_base".as_ptr()) };
        steps.expect(
            "cuLibraryGetUnifiedFunction of a plain kernel (NVIDIA 580)",
            r,
            CUresult::CUDA_ERROR_INVALID_VALUE,
        );
        drop(out);
        // SAFETY: loaded above, unloaded once.
        steps.expect("cuLibraryUnload", unsafe { sys::cuLibraryUnload(lib) }, OK);
        drop(ctx);
    });
}

#[test]
fn fatbins_holding_ptx_plain_or_compressed_load_as_libraries() {
    on_fresh_thread(|_, steps| {
        // nvcc 13.0's: plain PTX, and PTX compressed by -compress-all and each --compress-mode
        // (gen-fatbin.sh).
        for name in [
            "spin_until.ptx.fatbin",
            "spin_until.ptx.all.fatbin",
            "spin_until.ptx.size.fatbin",
            "spin_until.ptx.speed.fatbin",
            "spin_until.ptx.balance.fatbin",
        ] {
            let image = aligned(&fatbin_fixture(name));
            // SAFETY: a whole fatbin in aligned memory that outlives the call.
            let (r, lib) = unsafe { load_image(image.as_ptr().cast()) };
            steps.expect(&format!("cuLibraryLoadData({name})"), r, OK);
            if r != OK {
                continue;
            }
            let (r, _) = kernel(lib, c"spin_until");
            steps.expect(&format!("{name}: cuLibraryGetKernel(spin_until)"), r, OK);
            // SAFETY: loaded above, unloaded once.
            let r = unsafe { sys::cuLibraryUnload(lib) };
            steps.expect(&format!("{name}: cuLibraryUnload"), r, OK);
        }
    });
}

/// A graph kernel node naming the library kernel in `kern` (with `func` NULL and `ctx` NULL: the
/// current context) runs add_base; the graph is launched and destroyed here.
fn graph_node_runs_the_kernel(steps: &mut Steps, add: sys::CUkernel, out: &Out) {
    let (mut ptr, mut n) = (out.0, ELEMENTS as u32);
    let mut args: [*mut c_void; 2] = [(&raw mut ptr).cast(), (&raw mut n).cast()];
    let params = sys::CUDA_KERNEL_NODE_PARAMS {
        func: null_mut(),
        gridDimX: 3,
        gridDimY: 1,
        gridDimZ: 1,
        blockDimX: 128,
        blockDimY: 1,
        blockDimZ: 1,
        sharedMemBytes: 0,
        kernelParams: args.as_mut_ptr(),
        extra: null_mut(),
        kern: add,
        ctx: null_mut(),
    };
    let (mut graph, mut node, mut exec): (sys::CUgraph, sys::CUgraphNode, sys::CUgraphExec) =
        (null_mut(), null_mut(), null_mut());
    // SAFETY: valid out-pointers; the node's parameters are read during cuGraphAddKernelNode
    // while `args` lives; the graph and its executable are destroyed once.
    unsafe {
        steps.expect("cuGraphCreate", sys::cuGraphCreate(&mut graph, 0), OK);
        let r = sys::cuGraphAddKernelNode_v2(&mut node, graph, null(), 0, &params);
        steps.expect("cuGraphAddKernelNode(kern = the CUkernel)", r, OK);
        let r = sys::cuGraphInstantiateWithFlags(&mut exec, graph, 0);
        steps.expect("cuGraphInstantiate", r, OK);
        let r = sys::cuGraphLaunch(exec, null_mut());
        steps.expect("cuGraphLaunch", r, OK);
        steps.expect("cuCtxSynchronize", sys::cuCtxSynchronize(), OK);
        sys::cuGraphExecDestroy(exec);
        sys::cuGraphDestroy(graph);
    }
    expect_out(steps, "the graph node ran add_base with base 42", out, 42);
}

#[test]
fn each_context_gets_its_own_module_and_globals_of_one_library() {
    on_fresh_thread(|dev, steps| {
        let image = fixture();
        let (r, lib) = load(&image);
        assert_eq!(r, OK, "cuLibraryLoadData");
        let (_, add) = kernel(lib, c"add_base");
        let main_ctx = primary();
        let (r, base_primary, _) = global(lib, c"base");
        steps.expect("cuLibraryGetGlobal in the primary context", r, OK);
        let (_, f_primary) = function(add);
        let out_primary = Out::new();

        let mut created: sys::CUcontext = null_mut();
        // SAFETY: valid out-pointer; the device came from cuDeviceGet. The new context becomes
        // current on this (fresh) thread.
        let r = unsafe { sys::cuCtxCreate_v2(&mut created, 0, dev) };
        assert_eq!(r, OK, "cuCtxCreate");
        let (r, base_created, _) = global(lib, c"base");
        steps.expect("cuLibraryGetGlobal in a created context", r, OK);
        steps.check(
            "each context has its own global",
            base_created != base_primary,
            || format!("both at {base_created:#x}"),
        );
        steps.check(
            "a new context's global starts at its initial value",
            read_u32(base_created) == (OK, 1000),
            || format!("{:?}", read_u32(base_created)),
        );
        let (r, f_created) = function(add);
        steps.expect("cuKernelGetFunction in the created context", r, OK);
        steps.check(
            "each context has its own function",
            f_created != f_primary,
            || format!("both {f_created:?}"),
        );
        steps.expect("write base = 7 here", write_u32(base_created, 7), OK);
        let out_created = Out::new();
        let r = launch_add_base(add.cast(), &out_created, null_mut());
        steps.expect("cuLaunchKernel(CUkernel) in the created context", r, OK);
        expect_out(steps, "it used this context's base", &out_created, 7);
        drop(out_created);
        // SAFETY: created above on this thread, destroyed once (which pops it).
        let r = unsafe { sys::cuCtxDestroy_v2(created) };
        steps.expect("cuCtxDestroy", r, OK);

        main_ctx.bind().expect("bind the primary context");
        steps.check(
            "the primary context's global kept its value",
            read_u32(base_primary) == (OK, 1000),
            || format!("{:?}", read_u32(base_primary)),
        );
        let r = launch_add_base(add.cast(), &out_primary, null_mut());
        steps.expect("the kernel still launches in the primary context", r, OK);
        expect_out(steps, "with the primary context's base", &out_primary, 1000);
        drop(out_primary);
        // SAFETY: loaded above, unloaded once.
        steps.expect("cuLibraryUnload", unsafe { sys::cuLibraryUnload(lib) }, OK);
        drop(main_ctx);
    });
}

#[test]
fn unloading_waits_for_queued_launches_to_run_to_the_end() {
    on_fresh_thread(|_, steps| {
        let image = fixture();
        let (r, untouched) = load(&image);
        assert_eq!(r, OK, "cuLibraryLoadData");
        // SAFETY: loaded above, never used, unloaded once.
        let r = unsafe { sys::cuLibraryUnload(untouched) };
        steps.expect("cuLibraryUnload of a library never used", r, OK);

        let ctx = primary();
        let (r, lib) = load(&image);
        assert_eq!(r, OK, "cuLibraryLoadData");
        let (_, add) = kernel(lib, c"add_base");
        let (_, f) = function(add);
        let mut stream: sys::CUstream = null_mut();
        // SAFETY: valid out-pointer.
        let r = unsafe { sys::cuStreamCreate(&mut stream, 0) };
        assert_eq!(r, OK, "cuStreamCreate");
        let outs: Vec<Out> = (0..8).map(|_| Out::new()).collect();
        for (i, out) in outs.iter().enumerate() {
            let r = launch_add_base(f, out, stream);
            steps.expect(&format!("queued launch {i}"), r, OK);
        }
        // SAFETY: loaded above, unloaded once, with launches still queued on `stream`.
        let r = unsafe { sys::cuLibraryUnload(lib) };
        steps.expect("cuLibraryUnload with launches queued", r, OK);
        // SAFETY: a live stream.
        steps.expect(
            "cuStreamSynchronize",
            unsafe { sys::cuStreamSynchronize(stream) },
            OK,
        );
        for (i, out) in outs.iter().enumerate() {
            expect_out(
                steps,
                &format!("queued launch {i} ran to the end"),
                out,
                1000,
            );
        }
        // Using the handles afterwards crashes NVIDIA's driver (they are pointers there):
        // softcuda's own tests check that it refuses them (library::an_unloaded_library_...).
        drop(outs);
        // SAFETY: created above, destroyed once.
        unsafe { sys::cuStreamDestroy_v2(stream) };
        drop(ctx);
    });
}

#[test]
fn kernel_attributes_follow_cu_kernel_set_attribute_unless_the_function_sets_its_own() {
    use sys::CUfunction_attribute as A;
    on_fresh_thread(|dev, steps| {
        let image = fixture();
        let (r, lib) = load(&image);
        assert_eq!(r, OK, "cuLibraryLoadData");
        let (_, add) = kernel(lib, c"add_base");
        let (_, set) = kernel(lib, c"set_base");
        let get = |k: sys::CUkernel, attr: A, dev: sys::CUdevice| {
            let mut v: c_int = -7;
            // SAFETY: valid out-pointer; the driver validates the rest.
            let r = unsafe { sys::cuKernelGetAttribute(&mut v, attr, k, dev) };
            (r, v)
        };
        let max_threads = get(set, A::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, dev);
        steps.check("set_base's .maxntid 256", max_threads == (OK, 256), || {
            format!("{max_threads:?}")
        });
        let dynamic = A::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES;
        // SAFETY: plain values and a live kernel.
        let r = unsafe { sys::cuKernelSetAttribute(dynamic, 64 << 10, add, dev) };
        steps.expect("cuKernelSetAttribute(64 KiB dynamic shared)", r, OK);
        steps.check(
            "cuKernelGetAttribute reads it back",
            get(add, dynamic, dev) == (OK, 64 << 10),
            || format!("{:?}", get(add, dynamic, dev)),
        );

        let ctx = primary();
        let (_, f) = function(add);
        let func_get = |f: sys::CUfunction| {
            let mut v: c_int = -7;
            // SAFETY: valid out-pointer and function.
            let r = unsafe { sys::cuFuncGetAttribute(&mut v, dynamic, f) };
            (r, v)
        };
        steps.check(
            "the kernel's function has the kernel's limit",
            func_get(f) == (OK, 64 << 10),
            || format!("{:?}", func_get(f)),
        );
        let out = Out::new();
        let (mut ptr, mut n) = (out.0, ELEMENTS as u32);
        let mut args: [*mut c_void; 2] = [(&raw mut ptr).cast(), (&raw mut n).cast()];
        // SAFETY: one pointer per kernel parameter, each to a value of its size.
        let r = unsafe {
            sys::cuLaunchKernel(
                add.cast(),
                3,
                1,
                1,
                128,
                1,
                1,
                60 << 10,
                null_mut(),
                args.as_mut_ptr(),
                null_mut(),
            )
        };
        steps.expect(
            "a CUkernel launch with 60 KiB of dynamic shared memory",
            r,
            OK,
        );
        expect_out(steps, "it ran", &out, 1000);

        // SAFETY: plain values and a live function.
        let r = unsafe { sys::cuFuncSetAttribute(f, dynamic, 1024) };
        steps.expect("cuFuncSetAttribute(1 KiB)", r, OK);
        // SAFETY: plain values and a live kernel.
        let r = unsafe { sys::cuKernelSetAttribute(dynamic, 2048, add, dev) };
        steps.expect("cuKernelSetAttribute(2 KiB) afterwards", r, OK);
        steps.check(
            "the function's own setting wins",
            func_get(f) == (OK, 1024),
            || format!("{:?}", func_get(f)),
        );
        steps.check(
            "cuKernelGetAttribute reads the kernel's setting",
            get(add, dynamic, dev) == (OK, 2048),
            || format!("{:?}", get(add, dynamic, dev)),
        );
        // SAFETY: plain values and a live kernel.
        let r = unsafe {
            sys::cuKernelSetCacheConfig(add, sys::CUfunc_cache::CU_FUNC_CACHE_PREFER_SHARED, dev)
        };
        steps.expect("cuKernelSetCacheConfig(PREFER_SHARED)", r, OK);
        steps.expect(
            "cuKernelGetAttribute for a device that does not exist",
            get(add, dynamic, 1 << 20).0,
            CUresult::CUDA_ERROR_INVALID_DEVICE,
        );
        // SAFETY: plain values and a live kernel.
        let r = unsafe { sys::cuKernelSetAttribute(A::CU_FUNC_ATTRIBUTE_NUM_REGS, 8, add, dev) };
        steps.expect(
            "cuKernelSetAttribute of a read-only attribute",
            r,
            CUresult::CUDA_ERROR_INVALID_VALUE,
        );
        // Over set_base's .maxntid 256 and within the device's 1024: the kernel's own limit,
        // which NVIDIA's driver reports as an invalid value (the H200, session 42), not as the
        // "too many resources" of a block its registers cannot hold. (Its value is base's own,
        // so a launch that ran anyway would change nothing later steps see.)
        let mut v = 1000u32;
        let mut args: [*mut c_void; 1] = [(&raw mut v).cast()];
        // SAFETY: one pointer per kernel parameter, each to a value of its size.
        let r = unsafe {
            sys::cuLaunchKernel(
                set.cast(),
                1,
                1,
                1,
                512,
                1,
                1,
                0,
                null_mut(),
                args.as_mut_ptr(),
                null_mut(),
            )
        };
        steps.expect(
            "a launch of 512 threads of a .maxntid 256 kernel",
            r,
            CUresult::CUDA_ERROR_INVALID_VALUE,
        );
        drop(out);
        // SAFETY: loaded above, unloaded once.
        steps.expect("cuLibraryUnload", unsafe { sys::cuLibraryUnload(lib) }, OK);
        drop(ctx);
    });
}
