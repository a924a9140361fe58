//! The cuLink* entry points (a part of [`super`]'s list kept apart for size): thin shims over
//! `link`. cuLinkCreate's error and info log options are honoured (the error log gets what a
//! failed cuLinkAddData or cuLinkComplete found); other JIT options are accepted and ignored.
#![allow(non_snake_case, clippy::missing_safety_doc)]

use std::ffi::{CStr, c_char, c_uint, c_void};

use cudarc::driver::sys::CUresult;

use super::handle_value;
use crate::abi::{self, CuResult, p};
use crate::{image, jit, link};

type State = *mut c_void;

/// Checks a JIT option list's shape: `n` options need both arrays.
fn check_options(n: c_uint, options: *const c_uint, values: *mut *mut c_void) -> CuResult<()> {
    if n > 0 && (options.is_null() || values.is_null()) {
        return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
    }
    Ok(())
}

/// The PTX of an input of `kind` held in `bytes` (NUL-terminated by the caller of this helper).
///
/// # Safety
/// `bytes` ends with a NUL; a fatbin in it is well formed (cuLinkAddData's contract).
unsafe fn input_ptx(kind: c_uint, bytes: &[u8]) -> CuResult<String> {
    link::check_type(kind)?;
    if kind == 1 {
        let text =
            CStr::from_bytes_until_nul(bytes).map_err(|_| CUresult::CUDA_ERROR_INVALID_PTX)?;
        return text
            .to_str()
            .map(str::to_owned)
            .map_err(|_| CUresult::CUDA_ERROR_INVALID_PTX);
    }
    // SAFETY: forwarded caller contract.
    unsafe { image::ptx_text(bytes.as_ptr()) }.map_err(|(code, _)| code)
}

exports! {
    /// A link state in the current context.
    fn cuLinkCreate_v2(numOptions: c_uint, options: *mut c_uint, optionValues: *mut *mut c_void, stateOut: *mut State) {
        check_options(numOptions, options, optionValues)?;
        if stateOut.is_null() {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        }
        // SAFETY: both arrays hold `numOptions` entries (checked non-null above when there are
        // any), per cuLinkCreate's contract.
        let logs = unsafe { jit::parse(numOptions, options, optionValues) };
        // SAFETY: `stateOut` is cuLinkCreate_v2's out-pointer: NULL (refused) or writable per
        // cuda.h.
        unsafe { abi::write(stateOut, p(link::create(logs, optionValues)?)) }
    }

    /// Adds `size` bytes of PTX (or a fatbin holding PTX), called `name` in the logs.
    fn cuLinkAddData_v2(state: State, kind: c_uint, data: *mut c_void, size: usize, name: *const c_char, numOptions: c_uint, options: *mut c_uint, optionValues: *mut *mut c_void) {
        check_options(numOptions, options, optionValues)?;
        let name = if name.is_null() {
            String::from("<unnamed>")
        } else {
            // SAFETY: non-null and NUL-terminated: cuLinkAddData's contract.
            unsafe { CStr::from_ptr(name) }.to_string_lossy().into_owned()
        };
        if data.is_null() || size == 0 {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        }
        // SAFETY: non-null (checked above) and holding `size` readable bytes (cuda.h contract).
        let mut bytes = unsafe { std::slice::from_raw_parts(data.cast::<u8>(), size) }.to_vec();
        bytes.push(0);
        // SAFETY: `bytes` ends with a NUL (pushed above); a fatbin in it is well formed by
        // cuLinkAddData's contract.
        link::add(handle_value(state), &name, unsafe { input_ptx(kind, &bytes) }?)
    }

    /// Adds the PTX (or fatbin) file at `path`, called by its path in the logs.
    fn cuLinkAddFile_v2(state: State, kind: c_uint, path: *const c_char, numOptions: c_uint, options: *mut c_uint, optionValues: *mut *mut c_void) {
        check_options(numOptions, options, optionValues)?;
        // SAFETY: `path` is NULL (refused) or NUL-terminated: cuLinkAddFile's contract.
        let (path, bytes) = unsafe { abi::read_image_file(path) }?;
        // SAFETY: `bytes` ends with a NUL (read_image_file appends one); a fatbin in the file is
        // well formed by cuLinkAddFile's contract.
        link::add(handle_value(state), &path, unsafe { input_ptx(kind, &bytes) }?)
    }

    /// The linked image (here: the PTX), valid until cuLinkDestroy; `sizeOut` may be NULL.
    fn cuLinkComplete(state: State, cubinOut: *mut *mut c_void, sizeOut: *mut usize) {
        if cubinOut.is_null() {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        }
        let (image, size) = link::complete(handle_value(state))?;
        // SAFETY: `cubinOut` is cuLinkComplete's out-pointer: NULL (refused) or writable per
        // cuda.h.
        unsafe { abi::write(cubinOut, image.cast_mut().cast()) }?;
        if !sizeOut.is_null() {
            // SAFETY: `sizeOut` is cuLinkComplete's out-pointer: NULL (refused) or writable per
            // cuda.h.
            unsafe { abi::write(sizeOut, size) }?;
        }
        Ok(())
    }

    /// Destroys a link state and the image it handed out.
    fn cuLinkDestroy(state: State) { link::destroy(handle_value(state)) }
}
