//! cuModuleLoadDataEx's JIT options: where the error and info logs go and how big they may be.
//! Only the log options have an effect; the others are optimisation hints a CPU interpreter
//! ignores, as NVIDIA's driver may. Also the C-boundary body of cuModuleLoadData(Ex) and the
//! image loading it shares with cuLibraryLoad*.

use std::ffi::{c_uint, c_void};

use cudarc::driver::sys::{CUjit_option as J, CUmodule, CUresult};

use crate::abi::{self, CuResult, p};
use crate::image::{self, LoadError};
use crate::module;

/// The log buffers a caller passed.
#[derive(Default)]
pub(crate) struct Logs {
    error: Option<(*mut u8, usize, usize)>,
    info: Option<(*mut u8, usize, usize)>,
}

/// Reads the option list.
///
/// # Safety
/// `options` and `values` are null or hold `n` entries each, per cuModuleLoadDataEx.
pub(crate) unsafe fn parse(n: c_uint, options: *const c_uint, values: *mut *mut c_void) -> Logs {
    let mut logs = Logs::default();
    if options.is_null() || values.is_null() {
        return logs;
    }
    let (mut err_buf, mut err_size, mut info_buf, mut info_size) = (None, None, None, None);
    for i in 0..n as usize {
        // SAFETY: both arrays hold `n` entries (caller contract).
        let (opt, value) = unsafe { (options.add(i).read(), values.add(i).read()) };
        // Size options carry the number itself in the pointer slot, as cuda.h specifies.
        match opt {
            o if o == J::CU_JIT_ERROR_LOG_BUFFER as u32 => err_buf = Some(value.cast::<u8>()),
            o if o == J::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES as u32 => {
                err_size = Some((value.addr(), i))
            }
            o if o == J::CU_JIT_INFO_LOG_BUFFER as u32 => info_buf = Some(value.cast::<u8>()),
            o if o == J::CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES as u32 => {
                info_size = Some((value.addr(), i))
            }
            _ => {}
        }
    }
    if let (Some(buf), Some((size, slot))) = (err_buf, err_size) {
        logs.error = Some((buf, size, slot));
    }
    if let (Some(buf), Some((size, slot))) = (info_buf, info_size) {
        logs.info = Some((buf, size, slot));
    }
    logs
}

/// Writes `text` (truncated, NUL-terminated) into one log and its size slot.
///
/// # Safety
/// The buffer holds `size` writable bytes and `values` is the caller's option-value array.
unsafe fn fill(log: Option<(*mut u8, usize, usize)>, text: &str, values: *mut *mut c_void) {
    let Some((buf, size, slot)) = log else { return };
    if buf.is_null() || size == 0 {
        return;
    }
    let n = text.len().min(size - 1);
    // SAFETY: `buf` has `size` bytes and n + 1 <= size; the size slot is element `slot` of
    // `values`, which the caller made writable (the driver reports the bytes used there).
    unsafe {
        std::ptr::copy_nonoverlapping(text.as_ptr(), buf, n);
        buf.add(n).write(0);
        values
            .add(slot)
            .write(std::ptr::without_provenance_mut(if n == 0 {
                0
            } else {
                n + 1
            }));
    }
}

impl Logs {
    /// Fills the error log with `error` and the info log with `info`.
    ///
    /// # Safety
    /// As for [`parse`], with the same `values`.
    pub(crate) unsafe fn write(&self, error: &str, info: &str, values: *mut *mut c_void) {
        // SAFETY: forwarded caller contract.
        unsafe {
            fill(self.error, error, values);
            fill(self.info, info, values);
        }
    }
}

/// cuModuleLoadData(Ex)'s body: PTX text found in the image, loaded, logs filled.
///
/// # Safety
/// As for cuModuleLoadDataEx: `image` is a valid image and the option arrays hold `n` entries.
pub(crate) unsafe fn load_module(
    out: *mut CUmodule,
    image: *const c_void,
    n: c_uint,
    options: *const c_uint,
    values: *mut *mut c_void,
) -> CuResult<()> {
    if out.is_null() {
        return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
    }
    // The image of a one-input link was decoded when its input was added (link.rs): loading
    // it again only makes the module.
    let load = |text: &str| match crate::link::decoded(image, text.len()) {
        Some(vm) => module::load_program(vm),
        None => module::load(text),
    };
    // SAFETY: forwarded caller contract.
    let handle = unsafe { load_image(image, n, options, values, load) }?;
    // SAFETY: `out` is non-null and writable.
    unsafe { abi::write(out, p(handle)) }
}

/// The image loading every loader shares (cuModuleLoadData*, cuLibraryLoad*): the PTX text
/// found in `image` is handed to `load`, and the JIT log options get the outcome.
///
/// # Safety
/// As for cuModuleLoadDataEx: `image` is a valid image and the option arrays hold `n` entries.
pub(crate) unsafe fn load_image<T>(
    image: *const c_void,
    n: c_uint,
    options: *const c_uint,
    values: *mut *mut c_void,
    load: impl FnOnce(&str) -> Result<T, LoadError>,
) -> CuResult<T> {
    // Module loading is one of the points where device printf output is printed.
    if let Ok(ctx) = crate::context::current() {
        ctx.printf.flush();
    }
    // SAFETY: forwarded caller contract.
    let logs = unsafe { parse(n, options, values) };
    // SAFETY: forwarded caller contract.
    let result = unsafe { image::ptx_text(image.cast()) }.and_then(|text| load(&text));
    let message = match &result {
        Ok(_) => "",
        Err((_, message)) => message.as_str(),
    };
    // SAFETY: forwarded caller contract.
    unsafe { logs.write(message, "", values) };
    result.map_err(|(code, _)| code)
}
