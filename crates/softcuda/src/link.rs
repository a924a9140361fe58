//! cuLink*: ptxvm's linker (`ptxvm::link`) joins the PTX inputs of a link state (text, or a
//! fatbin holding PTX) into one module, whose text is the "cubin" cuLinkComplete hands out and
//! cuModuleLoadData accepts. As NVIDIA's driver does, an input is checked when added (a second
//! strong definition of a symbol is refused then) and an extern nothing defines is refused at
//! cuLinkComplete; the error log given to cuLinkCreate names the symbol. Cubin, object and
//! library inputs are `CUDA_ERROR_NOT_SUPPORTED`.

use std::ffi::c_void;
use std::sync::{Arc, Mutex, PoisonError};

use cudarc::driver::sys::CUresult;

use crate::abi::CuResult;
use crate::driver::Tag;
use crate::handles::Table;
use crate::jit::Logs;

/// `CUjitInputType` values.
const INPUT_CUBIN: u32 = 0;
const INPUT_PTX: u32 = 1;
const INPUT_FATBINARY: u32 = 2;
const INPUT_LIBRARY: u32 = 4;

/// The log buffers cuLinkCreate was given and its option-value array, whose size slots the
/// driver writes (NVIDIA keeps the array for the link state's life, so may softcuda).
struct CallerLogs {
    logs: Logs,
    values: *mut *mut c_void,
}

// SAFETY: the pointers are only written through in cuLink* calls on this state, under its lock;
// cuLinkCreate's contract keeps the buffers and the array valid until cuLinkDestroy, from any
// thread the application calls on.
unsafe impl Send for CallerLogs {}
// SAFETY: as for Send: shared access goes through the state's mutex.
unsafe impl Sync for CallerLogs {}

impl CallerLogs {
    fn error(&self, message: &str) {
        // SAFETY: `values` is the array `logs` was parsed from (cuLinkCreate), valid until
        // cuLinkDestroy by its contract.
        unsafe { self.logs.write(message, "", self.values) };
    }
}

#[derive(Default)]
struct State {
    linker: ptxvm::link::Linker,
    /// The only input's text while there is one: a one-input link hands it out unchanged.
    only: Option<String>,
    inputs: usize,
    /// The image, once complete; it lives until cuLinkDestroy, as NVIDIA's does.
    image: Option<Vec<u8>>,
}

/// One link.
pub(crate) struct LinkState {
    logs: CallerLogs,
    inner: Mutex<State>,
}

static LINKS: Table<LinkState> = Table::new(Tag::Link);

/// cuLinkCreate, with the logs parsed from its options and their value array.
pub(crate) fn create(logs: Logs, values: *mut *mut c_void) -> CuResult<u64> {
    crate::context::live()?;
    let state = LinkState {
        logs: CallerLogs { logs, values },
        inner: Mutex::new(State::default()),
    };
    Ok(LINKS.insert_with(|_| Arc::new(state)).0)
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

/// The code and log text of a link failure.
fn failure(state: &LinkState, e: &ptxvm::Error) -> CUresult {
    let (code, message) = crate::module::load_error(e);
    state.logs.error(&message);
    code
}

/// cuLinkAddData/AddFile: checks the PTX (`name` is how messages call it) and adds it.
pub(crate) fn add(handle: u64, name: &str, ptx: String) -> CuResult<()> {
    let state = get(handle)?;
    let mut s = state.inner.lock().unwrap_or_else(PoisonError::into_inner);
    if s.image.is_some() {
        return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
    }
    s.linker.add(name, &ptx).map_err(|e| failure(&state, &e))?;
    s.inputs += 1;
    s.only = (s.inputs == 1).then_some(ptx);
    Ok(())
}

/// cuLinkComplete: the image (NUL-terminated PTX) and its size; valid until cuLinkDestroy.
pub(crate) fn complete(handle: u64) -> CuResult<(*const u8, usize)> {
    let state = get(handle)?;
    let mut s = state.inner.lock().unwrap_or_else(PoisonError::into_inner);
    if s.image.is_none() {
        if s.linker.is_empty() {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        }
        let linked = std::mem::take(&mut s.linker)
            .link()
            .map_err(|e| failure(&state, &e))?;
        let mut image = s.only.take().unwrap_or(linked).into_bytes();
        image.push(0);
        state.logs.error("");
        s.image = Some(image);
    }
    let image = s.image.as_ref().ok_or(CUresult::CUDA_ERROR_INVALID_VALUE)?;
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
