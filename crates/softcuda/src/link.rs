//! cuLink*: softcuda has no linker for separately compiled device code, so a link state takes
//! exactly one PTX input (text, or a fatbin holding PTX) and its "cubin" is that PTX, which
//! cuModuleLoadData accepts. PTX is checked when added, as NVIDIA's driver compiles it then.
//! More than one input, and cubin/object/library inputs, are `CUDA_ERROR_NOT_SUPPORTED`.

use std::sync::{Arc, Mutex, PoisonError};

use cudarc::driver::sys::CUresult;

use crate::abi::CuResult;
use crate::driver::Tag;
use crate::handles::Table;

/// `CUjitInputType` values.
const INPUT_CUBIN: u32 = 0;
const INPUT_PTX: u32 = 1;
const INPUT_FATBINARY: u32 = 2;
const INPUT_LIBRARY: u32 = 4;

/// One link: the PTX added so far and, once complete, the image handed out (it lives until
/// cuLinkDestroy, as NVIDIA's does).
#[derive(Default)]
pub(crate) struct LinkState {
    inner: Mutex<(Vec<String>, Option<Vec<u8>>)>,
}

static LINKS: Table<LinkState> = Table::new(Tag::Link);

/// cuLinkCreate.
pub(crate) fn create() -> CuResult<u64> {
    crate::context::live()?;
    Ok(LINKS.insert_with(|_| Arc::new(LinkState::default())).0)
}

fn get(handle: u64) -> CuResult<Arc<LinkState>> {
    crate::driver::ensure_init()?;
    LINKS.get(handle).ok_or(CUresult::CUDA_ERROR_INVALID_HANDLE)
}

/// Whether an input type is one softcuda can take (PTX text or a fatbin); others are
/// `CUDA_ERROR_NOT_SUPPORTED`, unknown values `CUDA_ERROR_INVALID_VALUE`.
pub(crate) fn check_type(kind: u32) -> CuResult<()> {
    match kind {
        INPUT_PTX | INPUT_FATBINARY => Ok(()),
        INPUT_CUBIN..=INPUT_LIBRARY => Err(CUresult::CUDA_ERROR_NOT_SUPPORTED),
        _ => Err(CUresult::CUDA_ERROR_INVALID_VALUE),
    }
}

/// cuLinkAddData/AddFile: checks the PTX and keeps it; a second input is not supported.
pub(crate) fn add(handle: u64, ptx: String) -> CuResult<()> {
    let state = get(handle)?;
    ptxvm::Module::load(&ptx).map_err(|e| crate::module::load_error(&e).0)?;
    let mut s = state.inner.lock().unwrap_or_else(PoisonError::into_inner);
    if !s.0.is_empty() || s.1.is_some() {
        return Err(CUresult::CUDA_ERROR_NOT_SUPPORTED);
    }
    s.0.push(ptx);
    Ok(())
}

/// cuLinkComplete: the image (NUL-terminated PTX) and its size; valid until cuLinkDestroy.
pub(crate) fn complete(handle: u64) -> CuResult<(*const u8, usize)> {
    let state = get(handle)?;
    let mut s = state.inner.lock().unwrap_or_else(PoisonError::into_inner);
    if s.1.is_none() {
        let ptx = s.0.pop().ok_or(CUresult::CUDA_ERROR_INVALID_VALUE)?;
        let mut image = ptx.into_bytes();
        image.push(0);
        s.1 = Some(image);
    }
    let image = s.1.as_ref().ok_or(CUresult::CUDA_ERROR_INVALID_VALUE)?;
    Ok((image.as_ptr(), image.len()))
}

/// cuLinkDestroy.
pub(crate) fn destroy(handle: u64) -> CuResult<()> {
    crate::driver::ensure_init()?;
    LINKS
        .remove(handle)
        .map(drop)
        .ok_or(CUresult::CUDA_ERROR_INVALID_HANDLE)
}
