//! cuLink*: PTX added to a link state comes out as an image cuModuleLoadData accepts and whose
//! kernel runs; malformed PTX is refused when added. Several separately compiled modules
//! (tests/kernels/link/, hand-written) link: externs resolve to another module's visible
//! definitions, weak definitions yield to strong ones, private names stay apart, and an
//! undefined or twice-defined symbol is an error the error log names. (NVIDIA's image is a
//! cubin; softcuda's is the linked PTX — the program cannot tell.)

use std::ffi::{CString, c_void};
use std::path::PathBuf;

use conformance::context::Context;
use conformance::driver::shared_device;
use cudarc::driver::sys::{self, CUresult};

use crate::support::{Steps, clang_ptx, env_or_skip};

/// cuLinkCreate + cuLinkAddData(PTX): the state and AddData's result.
pub(crate) fn link_ptx(ptx: &str) -> (sys::CUlinkState, CUresult) {
    let mut state: sys::CUlinkState = std::ptr::null_mut();
    let text = CString::new(ptx).expect("no NUL in PTX");
    let bytes = text.as_bytes_with_nul();
    // SAFETY: valid out-pointer, no options; `bytes` outlives the call.
    unsafe {
        let r = sys::cuLinkCreate_v2(0, std::ptr::null_mut(), std::ptr::null_mut(), &mut state);
        assert_eq!(r, CUresult::CUDA_SUCCESS, "cuLinkCreate");
        let r = sys::cuLinkAddData_v2(
            state,
            sys::CUjitInputType::CU_JIT_INPUT_PTX,
            bytes.as_ptr().cast_mut().cast(),
            bytes.len(),
            c"saxpy.ptx".as_ptr(),
            0,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        );
        (state, r)
    }
}

#[test]
fn linked_ptx_loads_and_runs_and_bad_ptx_is_refused_when_added() {
    let _shared = shared_device();
    let Some(env) = env_or_skip() else { return };
    let _ctx = Context::primary(env).expect("retain");
    let mut steps = Steps::default();

    let (state, r) = link_ptx(&clang_ptx("saxpy"));
    steps.expect("cuLinkAddData(saxpy PTX)", r, CUresult::CUDA_SUCCESS);
    let (mut image, mut size): (*mut c_void, usize) = (std::ptr::null_mut(), 0);
    // SAFETY: a live link state and valid out-pointers.
    let r = unsafe { sys::cuLinkComplete(state, &mut image, &mut size) };
    steps.expect("cuLinkComplete", r, CUresult::CUDA_SUCCESS);
    steps.check("an image", !image.is_null() && size > 0, || {
        format!("{image:?}, {size}")
    });
    let n = 300usize;
    let mut out = vec![0f32; n];
    // SAFETY: the image lives until cuLinkDestroy below; buffers and arguments live across the
    // calls that use them.
    unsafe {
        let mut module: sys::CUmodule = std::ptr::null_mut();
        steps.expect(
            "cuModuleLoadData(linked image)",
            sys::cuModuleLoadData(&mut module, image),
            CUresult::CUDA_SUCCESS,
        );
        let mut f: sys::CUfunction = std::ptr::null_mut();
        steps.expect(
            "cuModuleGetFunction",
            sys::cuModuleGetFunction(&mut f, module, c"saxpy".as_ptr()),
            CUresult::CUDA_SUCCESS,
        );
        let (mut x, mut y): (sys::CUdeviceptr, sys::CUdeviceptr) = (0, 0);
        sys::cuMemAlloc_v2(&mut x, n * 4);
        sys::cuMemAlloc_v2(&mut y, n * 4);
        let xs: Vec<f32> = (0..n).map(|i| i as f32).collect();
        sys::cuMemcpyHtoD_v2(x, xs.as_ptr().cast(), n * 4);
        sys::cuMemsetD32_v2(y, 1.0f32.to_bits(), n);
        let (mut count, mut a) = (n as i32, 2.0f32);
        let mut args: [*mut c_void; 4] = [
            (&raw mut count).cast(),
            (&raw mut a).cast(),
            (&raw mut x).cast(),
            (&raw mut y).cast(),
        ];
        let r = sys::cuLaunchKernel(
            f,
            2,
            1,
            1,
            256,
            1,
            1,
            0,
            std::ptr::null_mut(),
            args.as_mut_ptr(),
            std::ptr::null_mut(),
        );
        steps.expect("launch the linked saxpy", r, CUresult::CUDA_SUCCESS);
        steps.expect(
            "cuMemcpyDtoH",
            sys::cuMemcpyDtoH_v2(out.as_mut_ptr().cast(), y, n * 4),
            CUresult::CUDA_SUCCESS,
        );
        sys::cuMemFree_v2(x);
        sys::cuMemFree_v2(y);
        sys::cuModuleUnload(module);
        steps.expect(
            "cuLinkDestroy",
            sys::cuLinkDestroy(state),
            CUresult::CUDA_SUCCESS,
        );
    }
    steps.check(
        "y = 2x + 1",
        out.iter()
            .enumerate()
            .all(|(i, v)| *v == 2.0 * i as f32 + 1.0),
        || format!("{:?}", &out[..4]),
    );

    let (bad, r) = link_ptx(
        ".version 7.0\n.target sm_80\n.address_size 64\n.visible .entry k() { bogus.op %r1; }\n",
    );
    steps.expect(
        "cuLinkAddData(malformed PTX)",
        r,
        CUresult::CUDA_ERROR_INVALID_PTX,
    );
    // SAFETY: a live link state, destroyed once.
    unsafe { sys::cuLinkDestroy(bad) };
    steps.finish(&env.choice.kind.to_string());
}

/// A link state whose error log (CU_JIT_ERROR_LOG_BUFFER) is kept here: the option arrays and
/// the buffer outlive the state, as cuLinkCreate asks.
struct Link {
    state: sys::CUlinkState,
    log: Box<[u8; 4096]>,
    _options: Box<[sys::CUjit_option; 2]>,
    _values: Box<[*mut c_void; 2]>,
}

impl Link {
    fn new() -> Link {
        let mut log = Box::new([0u8; 4096]);
        let mut options = Box::new([
            sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER,
            sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
        ]);
        // The size option carries the number itself in the pointer slot (cuda.h).
        let mut values = Box::new([
            log.as_mut_ptr().cast::<c_void>(),
            std::ptr::without_provenance_mut(log.len()),
        ]);
        let mut state: sys::CUlinkState = std::ptr::null_mut();
        // SAFETY: two options with their values; the boxes stay put until after cuLinkDestroy.
        let r = unsafe {
            sys::cuLinkCreate_v2(2, options.as_mut_ptr(), values.as_mut_ptr(), &mut state)
        };
        assert_eq!(r, CUresult::CUDA_SUCCESS, "cuLinkCreate with an error log");
        Link {
            state,
            log,
            _options: options,
            _values: values,
        }
    }

    /// cuLinkAddData of the fixture `name` (tests/kernels/link/<name>.ptx).
    fn add(&mut self, name: &str) -> CUresult {
        // PTX is a C string even with its size given: NVIDIA's ptxas reads to the NUL.
        let text = CString::new(std::fs::read(fixture(name)).expect("fixture")).expect("no NUL");
        let text = text.as_bytes_with_nul();
        let cname = CString::new(format!("{name}.ptx")).expect("no NUL");
        // SAFETY: a live state; `text` and `cname` outlive the call.
        unsafe {
            sys::cuLinkAddData_v2(
                self.state,
                sys::CUjitInputType::CU_JIT_INPUT_PTX,
                text.as_ptr().cast_mut().cast(),
                text.len(),
                cname.as_ptr(),
                0,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        }
    }

    /// cuLinkAddFile of the fixture `name`.
    fn add_file(&mut self, name: &str) -> CUresult {
        let path = CString::new(fixture(name).to_str().expect("UTF-8 path")).expect("no NUL");
        // SAFETY: a live state; `path` outlives the call.
        unsafe {
            sys::cuLinkAddFile_v2(
                self.state,
                sys::CUjitInputType::CU_JIT_INPUT_PTX,
                path.as_ptr(),
                0,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        }
    }

    /// cuLinkComplete: its result and the image (valid while `self` lives).
    fn complete(&mut self) -> (CUresult, *mut c_void) {
        let (mut image, mut size): (*mut c_void, usize) = (std::ptr::null_mut(), 0);
        // SAFETY: a live state and valid out-pointers.
        let r = unsafe { sys::cuLinkComplete(self.state, &mut image, &mut size) };
        (r, image)
    }

    /// The error log so far.
    fn log(&self) -> String {
        let end = self
            .log
            .iter()
            .position(|&b| b == 0)
            .unwrap_or(self.log.len());
        String::from_utf8_lossy(&self.log[..end]).into_owned()
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        // SAFETY: the state is live and destroyed once; the log arrays drop after this.
        unsafe { sys::cuLinkDestroy(self.state) };
    }
}

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("run by cargo"))
        .join("tests/kernels/link")
        .join(format!("{name}.ptx"))
}

/// Loads a linked image, runs `link_main` over `n` threads and returns its output.
fn run_linked(steps: &mut Steps, image: *mut c_void, n: usize) -> Vec<u32> {
    let mut out = vec![0u32; n];
    // SAFETY: the image is live (its link state is); buffers and arguments live across the
    // calls that use them.
    unsafe {
        let mut module: sys::CUmodule = std::ptr::null_mut();
        let r = sys::cuModuleLoadData(&mut module, image);
        steps.expect("cuModuleLoadData(linked image)", r, CUresult::CUDA_SUCCESS);
        if r != CUresult::CUDA_SUCCESS {
            return out;
        }
        let mut f: sys::CUfunction = std::ptr::null_mut();
        steps.expect(
            "cuModuleGetFunction(link_main)",
            sys::cuModuleGetFunction(&mut f, module, c"link_main".as_ptr()),
            CUresult::CUDA_SUCCESS,
        );
        let mut dst: sys::CUdeviceptr = 0;
        sys::cuMemAlloc_v2(&mut dst, n * 4);
        let mut count = n as u32;
        let mut args: [*mut c_void; 2] = [(&raw mut dst).cast(), (&raw mut count).cast()];
        let grid = n.div_ceil(64) as u32;
        let r = sys::cuLaunchKernel(
            f,
            grid,
            1,
            1,
            64,
            1,
            1,
            0,
            std::ptr::null_mut(),
            args.as_mut_ptr(),
            std::ptr::null_mut(),
        );
        steps.expect("launch link_main", r, CUresult::CUDA_SUCCESS);
        steps.expect(
            "cuMemcpyDtoH",
            sys::cuMemcpyDtoH_v2(out.as_mut_ptr().cast(), dst, n * 4),
            CUresult::CUDA_SUCCESS,
        );
        sys::cuMemFree_v2(dst);
        sys::cuModuleUnload(module);
    }
    out
}

/// Checks `out[i] == want(i)` for every i.
fn check_output(steps: &mut Steps, step: &str, out: &[u32], want: impl Fn(u32) -> u32) {
    let bad = out.iter().enumerate().find(|&(i, v)| *v != want(i as u32));
    steps.check(step, bad.is_none(), || {
        let (i, v) = bad.unwrap_or((0, &0));
        format!("out[{i}] = {v}, want {}", want(i as u32))
    });
}

#[test]
fn separately_compiled_modules_link_externs_to_visible_definitions_and_keep_privates_apart() {
    let _shared = shared_device();
    let Some(env) = env_or_skip() else { return };
    let _ctx = Context::primary(env).expect("retain");
    let mut steps = Steps::default();

    let mut link = Link::new();
    steps.expect(
        "cuLinkAddData(main.ptx)",
        link.add("main"),
        CUresult::CUDA_SUCCESS,
    );
    steps.expect(
        "cuLinkAddFile(lib.ptx)",
        link.add_file("lib"),
        CUresult::CUDA_SUCCESS,
    );
    let (r, image) = link.complete();
    steps.expect("cuLinkComplete", r, CUresult::CUDA_SUCCESS);
    if r == CUresult::CUDA_SUCCESS {
        let out = run_linked(&mut steps, image, 200);
        // lib's combine(i) = 3i + lib's tag (20); main's helper adds main's tag (1000); lib's
        // offset is 100. A private mixed up with the other module's gives another number.
        check_output(&mut steps, "out[i] = 3i + 1120", &out, |i| 3 * i + 1120);
    }
    steps.finish(&env.choice.kind.to_string());
}

#[test]
fn a_weak_definition_yields_to_a_strong_one_and_serves_alone() {
    let _shared = shared_device();
    let Some(env) = env_or_skip() else { return };
    let _ctx = Context::primary(env).expect("retain");
    let mut steps = Steps::default();

    let mut both = Link::new();
    for name in ["main", "weak", "lib"] {
        steps.expect(
            &format!("cuLinkAddData({name}.ptx)"),
            both.add(name),
            CUresult::CUDA_SUCCESS,
        );
    }
    let (r, image) = both.complete();
    steps.expect("cuLinkComplete(main, weak, lib)", r, CUresult::CUDA_SUCCESS);
    if r == CUresult::CUDA_SUCCESS {
        let out = run_linked(&mut steps, image, 100);
        check_output(&mut steps, "strong lib wins: 3i + 1120", &out, |i| {
            3 * i + 1120
        });
    }

    let mut alone = Link::new();
    for name in ["main", "weak"] {
        steps.expect(
            &format!("cuLinkAddData({name}.ptx)"),
            alone.add(name),
            CUresult::CUDA_SUCCESS,
        );
    }
    let (r, image) = alone.complete();
    steps.expect("cuLinkComplete(main, weak)", r, CUresult::CUDA_SUCCESS);
    if r == CUresult::CUDA_SUCCESS {
        let out = run_linked(&mut steps, image, 100);
        // weak combine(i) = i, main's tag 1000, weak offset 7.
        check_output(&mut steps, "weak alone: i + 1007", &out, |i| i + 1007);
    }
    steps.finish(&env.choice.kind.to_string());
}

#[test]
fn an_undefined_extern_fails_link_complete_and_a_second_definition_fails_its_add() {
    let _shared = shared_device();
    let Some(env) = env_or_skip() else { return };
    let _ctx = Context::primary(env).expect("retain");
    let mut steps = Steps::default();
    let names_a_symbol = |log: &str| log.contains("combine") || log.contains("offset");

    let mut undefined = Link::new();
    steps.expect(
        "cuLinkAddData(main.ptx)",
        undefined.add("main"),
        CUresult::CUDA_SUCCESS,
    );
    let (r, _) = undefined.complete();
    steps.expect(
        "cuLinkComplete(main alone)",
        r,
        CUresult::CUDA_ERROR_INVALID_SOURCE,
    );
    let log = undefined.log();
    steps.check(
        "the error log names the undefined symbol",
        names_a_symbol(&log),
        || log.clone(),
    );

    let mut twice = Link::new();
    steps.expect(
        "cuLinkAddData(main.ptx)",
        twice.add("main"),
        CUresult::CUDA_SUCCESS,
    );
    steps.expect(
        "cuLinkAddData(lib.ptx)",
        twice.add("lib"),
        CUresult::CUDA_SUCCESS,
    );
    steps.expect(
        "cuLinkAddData(lib.ptx again)",
        twice.add("lib"),
        CUresult::CUDA_ERROR_INVALID_SOURCE,
    );
    let log = twice.log();
    steps.check(
        "the error log names the twice-defined symbol",
        names_a_symbol(&log),
        || log.clone(),
    );
    steps.finish(&env.choice.kind.to_string());
}
