//! Fatbins as modules (tests/kernels/gen-fatbin.sh makes the fixtures with nvcc): one holding PTX
//! loads through cuModuleLoadData, cuModuleLoadDataEx and cuModuleLoadFatBinary and its kernel
//! runs, whether nvcc stored the PTX plain or compressed it (LZ4 or zstd, CUDA 13.0) and whether
//! SASS comes first; one holding only sm_80 SASS is CUDA_ERROR_NO_BINARY_FOR_GPU through each, on
//! an H200 (sm_90 cannot run sm_80 SASS) and on softcuda (which runs PTX only, and says so in the
//! error log).

use std::ffi::{c_uint, c_void};

use conformance::context::Context;
use conformance::driver::shared_device;
use conformance::memory::DeviceBuffer;
use conformance::stream::Stream;
use cudarc::driver::sys::{self, CUresult};

use crate::support::env_or_skip;

pub(crate) fn fixture(name: &str) -> Vec<u8> {
    let dir = std::path::PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("run by cargo"));
    let path = dir.join("tests/kernels").join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The fixture's bytes in 8-byte-aligned memory, as a fatbin embedded by nvcc is.
pub(crate) fn aligned(bytes: &[u8]) -> Vec<u64> {
    let mut words = vec![0u64; bytes.len().div_ceil(8) + 1];
    for (i, chunk) in bytes.chunks(8).enumerate() {
        let mut w = [0u8; 8];
        w[..chunk.len()].copy_from_slice(chunk);
        words[i] = u64::from_le_bytes(w);
    }
    words
}

/// How a fatbin is handed to the driver.
#[derive(Debug, Clone, Copy)]
enum Entry {
    Data,
    DataEx,
    FatBinary,
}

const ENTRIES: [Entry; 3] = [Entry::Data, Entry::DataEx, Entry::FatBinary];

/// `CU_JIT_ERROR_LOG_BUFFER` and `CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES`.
const JIT_ERROR_LOG_BUFFER: c_uint = 5;
const JIT_ERROR_LOG_BUFFER_SIZE_BYTES: c_uint = 6;

/// Loads `image` through `entry`; returns the result, the module and the JIT error log.
fn load(entry: Entry, image: &[u64]) -> (CUresult, sys::CUmodule, String) {
    let mut module: sys::CUmodule = std::ptr::null_mut();
    let data = image.as_ptr().cast::<c_void>();
    let mut log = vec![0u8; 1024];
    // SAFETY: `module` is a valid out-pointer; `image` is a whole fatbin that outlives the call;
    // the option arrays hold two entries, the log buffer `log.len()` writable bytes.
    let r = unsafe {
        match entry {
            Entry::Data => sys::cuModuleLoadData(&mut module, data),
            Entry::FatBinary => sys::cuModuleLoadFatBinary(&mut module, data),
            Entry::DataEx => {
                let mut options = [
                    std::mem::transmute::<c_uint, sys::CUjit_option>(JIT_ERROR_LOG_BUFFER),
                    std::mem::transmute::<c_uint, sys::CUjit_option>(
                        JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
                    ),
                ];
                let mut values = [
                    log.as_mut_ptr().cast::<c_void>(),
                    std::ptr::without_provenance_mut(log.len()),
                ];
                sys::cuModuleLoadDataEx(
                    &mut module,
                    data,
                    2,
                    options.as_mut_ptr(),
                    values.as_mut_ptr(),
                )
            }
        }
    };
    let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
    (r, module, String::from_utf8_lossy(&log[..end]).into_owned())
}

#[test]
fn a_fatbin_holding_ptx_loads_through_every_entry_point_and_its_kernel_runs() {
    loads_and_runs("spin_until.ptx.fatbin");
}

#[test]
fn a_fatbin_whose_ptx_nvcc_compressed_loads_and_runs_whatever_the_compress_mode() {
    // `all` is -Xfatbin=-compress-all; size/speed/balance are --compress-mode (see gen-fatbin.sh).
    for mode in ["all", "size", "speed", "balance"] {
        loads_and_runs(&format!("spin_until.ptx.{mode}.fatbin"));
    }
}

#[test]
fn an_nvcc_default_build_for_sm_90_loads_and_runs() {
    // SASS first, then (compressed) PTX: what a plain `nvcc -arch=sm_90` embeds.
    loads_and_runs("spin_until.sm_90.fatbin");
}

/// Loads the fixture `name` through every entry point and runs its `spin_until` once.
fn loads_and_runs(name: &str) {
    let _shared = shared_device();
    let Some(env) = env_or_skip() else { return };
    let ctx = Context::primary(env).expect("retain");
    let image = aligned(&fixture(name));
    let stream = Stream::new(&ctx).expect("stream");
    for entry in ENTRIES {
        let (r, module, log) = load(entry, &image);
        assert_eq!(
            r,
            CUresult::CUDA_SUCCESS,
            "{name} through {entry:?} on {}: {log}",
            env.choice.kind
        );
        let mut f: sys::CUfunction = std::ptr::null_mut();
        // SAFETY: valid out-pointer, a live module, a NUL-terminated name.
        let r = unsafe { sys::cuModuleGetFunction(&mut f, module, c"spin_until".as_ptr()) };
        assert_eq!(r, CUresult::CUDA_SUCCESS, "{entry:?}: cuModuleGetFunction");
        // flag at 0 (already the wanted value, so the kernel ends at once), started at 4,
        // seen at 8.
        let cells = DeviceBuffer::alloc(&ctx, 16).expect("alloc");
        cells.fill(0).expect("clear");
        let mut want = 7u32;
        cells.write_at(0, &want.to_le_bytes()).expect("flag");
        let (mut flag, mut started, mut seen, mut spins) =
            (cells.ptr(), cells.ptr() + 4, cells.ptr() + 8, 1i64);
        let mut args: [*mut c_void; 5] = [
            (&raw mut flag).cast(),
            (&raw mut want).cast(),
            (&raw mut started).cast(),
            (&raw mut seen).cast(),
            (&raw mut spins).cast(),
        ];
        // SAFETY: a live function; one pointer per parameter, each to a value of its size.
        let r = unsafe {
            sys::cuLaunchKernel(
                f,
                1,
                1,
                1,
                32,
                1,
                1,
                0,
                stream.raw(),
                args.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        };
        assert_eq!(r, CUresult::CUDA_SUCCESS, "{entry:?}: launch spin_until");
        stream.synchronize().expect("sync");
        let bytes = cells.to_vec().expect("read");
        assert_eq!(
            &bytes[4..12],
            &[1, 0, 0, 0, 1, 0, 0, 0],
            "{entry:?}: started and seen"
        );
        // SAFETY: the module was loaded above and is unloaded once, its kernel done.
        let r = unsafe { sys::cuModuleUnload(module) };
        assert_eq!(r, CUresult::CUDA_SUCCESS, "{entry:?}: cuModuleUnload");
    }
}

#[test]
fn a_fatbin_holding_only_sm_80_sass_is_no_binary_for_gpu_through_every_entry_point() {
    let _shared = shared_device();
    let Some(env) = env_or_skip() else { return };
    let _ctx = Context::primary(env).expect("retain");
    let image = aligned(&fixture("spin_until.sm_80.fatbin"));
    for entry in ENTRIES {
        let (r, _, log) = load(entry, &image);
        assert_eq!(
            r,
            CUresult::CUDA_ERROR_NO_BINARY_FOR_GPU,
            "{entry:?} on {}: {log}",
            env.choice.kind
        );
        if env.is_soft() && matches!(entry, Entry::DataEx) {
            assert!(
                log.contains("PTX only") && log.contains("sm_80"),
                "softcuda's log says why: {log}"
            );
        }
    }
}
