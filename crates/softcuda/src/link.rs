//! cuLink*: ptxvm's linker (`ptxvm::link`) joins the PTX inputs of a link state (text, or a
//! fatbin holding PTX) into one module, whose text is the "cubin" cuLinkComplete hands out and
//! cuModuleLoadData accepts. As NVIDIA's driver does, an input is checked when added (a second
//! strong definition of a symbol is refused then) and an extern nothing defines is refused at
//! cuLinkComplete; the error log given to cuLinkCreate names the symbol. Cubin, object and
//! library inputs are `CUDA_ERROR_NOT_SUPPORTED`.
//!
//! A link of one PTX input (how gpuhost compiles a module) hands out that input unchanged, so
//! it is decoded once, when added, instead of parsed for the linker, linked and then decoded
//! again at cuModuleLoadData: the decoded program is kept with the image and cuModuleLoadData of
//! the image uses it (see [`decoded`]). Only input that decodes alone and declares no `.extern`
//! (but dynamic shared memory) takes this path, so the linker's answers are unchanged: anything
//! else goes through the linker as before.

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
    /// The only input, decoded and not given to the linker (with the name it was added under),
    /// while there is one that took the one-input path.
    decoded: Option<(String, Arc<ptxvm::Module>)>,
    inputs: usize,
    /// The image, once complete; it lives until cuLinkDestroy, as NVIDIA's does.
    image: Option<Vec<u8>>,
}

/// The images of complete one-input links and their decoded programs: (image address, image
/// length, program). An entry goes at its link's cuLinkDestroy, before the image is freed.
static DECODED: Mutex<Vec<(usize, usize, Arc<ptxvm::Module>)>> = Mutex::new(Vec::new());

/// The decoded program of the image at `image` (`len` bytes of text, its NUL not counted), if
/// it is a live one-input link's image.
pub(crate) fn decoded(image: *const c_void, len: usize) -> Option<Arc<ptxvm::Module>> {
    let images = DECODED.lock().unwrap_or_else(PoisonError::into_inner);
    images
        .iter()
        .find(|(at, n, _)| *at == image.addr() && *n == len + 1)
        .map(|(_, _, vm)| Arc::clone(vm))
}

/// Whether PTX text may skip the linker: every `.extern` in it declares dynamic shared memory
/// (an extern function or variable needs the linker's resolution, or its refusal).
fn links_alone(ptx: &str) -> bool {
    ptx.match_indices(".extern")
        .all(|(i, w)| ptx[i + w.len()..].trim_start().starts_with(".shared"))
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
    if s.inputs == 0
        && links_alone(&ptx)
        && let Ok(vm) = crate::module::decode(&ptx)
    {
        s.decoded = Some((name.to_owned(), Arc::new(vm)));
    } else {
        // A second input: the first goes to the linker after all (and stays the image, should
        // this one be refused).
        if let Some((first, _)) = s.decoded.take() {
            let st = &mut *s;
            let text = st.only.as_deref().unwrap_or_default();
            st.linker
                .add(&first, text)
                .map_err(|e| failure(&state, &e))?;
        }
        s.linker.add(name, &ptx).map_err(|e| failure(&state, &e))?;
    }
    s.inputs += 1;
    s.only = (s.inputs == 1).then_some(ptx);
    Ok(())
}

/// cuLinkComplete: the image (NUL-terminated PTX) and its size; valid until cuLinkDestroy.
pub(crate) fn complete(handle: u64) -> CuResult<(*const u8, usize)> {
    let state = get(handle)?;
    let mut s = state.inner.lock().unwrap_or_else(PoisonError::into_inner);
    if s.image.is_none() {
        if s.inputs == 0 {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        }
        let mut image = match (s.decoded.is_some(), s.only.take()) {
            // One input that decoded alone: it is the image, with nothing to link.
            (true, Some(only)) => only,
            (_, only) => {
                let linked = std::mem::take(&mut s.linker)
                    .link()
                    .map_err(|e| failure(&state, &e))?;
                only.unwrap_or(linked)
            }
        }
        .into_bytes();
        image.push(0);
        state.logs.error("");
        if let Some((_, vm)) = s.decoded.take() {
            let mut images = DECODED.lock().unwrap_or_else(PoisonError::into_inner);
            images.push((image.as_ptr().addr(), image.len(), vm));
        }
        s.image = Some(image);
    }
    let image = s.image.as_ref().ok_or(CUresult::CUDA_ERROR_INVALID_VALUE)?;
    Ok((image.as_ptr(), image.len()))
}

/// cuLinkDestroy: frees the image, first forgetting its decoded program.
pub(crate) fn destroy(handle: u64) -> CuResult<()> {
    crate::driver::ensure_init()?;
    let state = LINKS
        .remove(handle)
        .ok_or(CUresult::CUDA_ERROR_INVALID_HANDLE)?;
    let s = state.inner.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(image) = &s.image {
        let at = image.as_ptr().addr();
        let mut images = DECODED.lock().unwrap_or_else(PoisonError::into_inner);
        images.retain(|(a, _, _)| *a != at);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exports::{cuCtxSetCurrent, cuDevicePrimaryCtxRetain, cuInit};

    /// The test kernels (tests/fixtures/kernels.cu), whose only `.extern` is dynamic shared
    /// memory.
    const KERNELS: &str = include_str!("../tests/fixtures/kernels.ptx");

    /// A module that declares a function another module must define.
    const NEEDS_LINKING: &str = ".version 8.0\n.target sm_90\n.address_size 64\n\
        .extern .func helper();\n.visible .entry k() { call helper; ret; }\n";

    #[test]
    fn only_dynamic_shared_memory_externs_may_skip_the_linker() {
        assert!(links_alone(KERNELS));
        assert!(links_alone(".extern\n\t.shared .b8 s[];"));
        assert!(!links_alone(NEEDS_LINKING));
        assert!(!links_alone(".extern .global .u32 g;"));
    }

    fn current_context() {
        let mut ctx = std::ptr::null_mut();
        // SAFETY: plain calls with a valid out-pointer; device 0 exists by default.
        unsafe {
            assert_eq!(cuInit(0), CUresult::CUDA_SUCCESS);
            assert_eq!(
                cuDevicePrimaryCtxRetain(&mut ctx, 0),
                CUresult::CUDA_SUCCESS
            );
            assert_eq!(cuCtxSetCurrent(ctx), CUresult::CUDA_SUCCESS);
        }
    }

    fn new_link() -> u64 {
        // SAFETY: no log options, so no pointers are kept.
        let logs = unsafe { crate::jit::parse(0, std::ptr::null(), std::ptr::null_mut()) };
        create(logs, std::ptr::null_mut()).expect("cuLinkCreate")
    }

    #[test]
    fn a_one_input_link_keeps_its_program_for_the_image_until_destroyed() {
        current_context();
        let link = new_link();
        add(link, "kernels.ptx", KERNELS.to_owned()).unwrap();
        let (image, size) = complete(link).unwrap();
        assert_eq!(size, KERNELS.len() + 1, "the input is the image");
        let vm = decoded(image.cast(), KERNELS.len()).expect("decoded when added");
        assert!(crate::module::load_program(vm).is_ok());
        assert!(
            decoded(image.cast(), KERNELS.len() - 1).is_none(),
            "another length"
        );
        destroy(link).unwrap();
        assert!(decoded(image.cast(), KERNELS.len()).is_none());
    }

    #[test]
    fn a_second_input_or_an_extern_goes_through_the_linker() {
        current_context();
        let link = new_link();
        add(link, "needs.ptx", NEEDS_LINKING.to_owned()).unwrap();
        // NVIDIA's answer for an extern nothing defines, at cuLinkComplete (conformance's link
        // tests).
        assert_eq!(
            complete(link).err(),
            Some(CUresult::CUDA_ERROR_INVALID_SOURCE)
        );
        destroy(link).unwrap();

        let link = new_link();
        add(link, "a.ptx", KERNELS.to_owned()).unwrap();
        // A second input redefining the first's kernels: refused when added, as the linker
        // refuses a second strong definition, which it can only do if it has the first.
        let second = add(link, "b.ptx", KERNELS.to_owned());
        assert!(second.is_err(), "{second:?}");
        // The refused input is not part of the link: the first is the image, as added.
        let (_, size) = complete(link).unwrap();
        assert_eq!(size, KERNELS.len() + 1);
        destroy(link).unwrap();
    }
}
