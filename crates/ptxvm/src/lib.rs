//! ptxvm: a PTX front end and a warp-level SIMT interpreter, the execution engine behind
//! softcuda.
//!
//! `Module::load` lexes, parses and lowers PTX text once into flat decoded instructions;
//! `launch` runs a kernel of a loaded module over a grid against any `Memory` (an `unsafe`
//! trait: its implementer vouches for the host pointers the VM writes through).
//!
//! Execution model:
//! - A warp is 32 lanes of 64-bit registers (struct of arrays); each decoded instruction is
//!   dispatched once for all active lanes.
//! - Divergence: the lanes furthest behind run (lowest PC; a lane inside a call is at its call
//!   site); lanes merge when they reach the same place. This reconverges at the immediate
//!   post-dominator for the structured code nvcc and clang emit, calls included. A group that
//!   keeps looping back while others wait steps aside for them now and then, so lanes of one
//!   warp can wait on each other as on sm_70 and later (vm/schedule.rs, "forward progress").
//! - The warps of a block run cooperatively on one thread (round-robin slices, `bar.sync` waits
//!   for every thread that has not exited; an `mbarrier` wait that fails ends its warp's slice);
//!   blocks spread over `Launch::workers` threads.
//! - Address spaces: global memory is whatever `Memory::translate` maps; generic addresses in
//!   `[SHARED_WINDOW, +WINDOW_SIZE)` and `[LOCAL_WINDOW, +WINDOW_SIZE)` map to the block's shared
//!   and the thread's local memory (what `cvta` produces). `.const` variables live in device
//!   memory at the addresses given in `Launch::globals`.
//! - `%clock`/`%clock64` count the warp's executed instructions; `%globaltimer` is wall time.
//! - Registers and local memory are undefined until written (reused warps keep old values).
//! - Errors: malformed text → `Error::Parse`; unknown opcodes, undeclared names →
//!   `Error::Invalid`; valid PTX that is not implemented → `Error::Unsupported`. Runtime
//!   problems → `Fault` with kernel, block, thread and PTX line.
//!
//! ```
//! use ptxvm::{Launch, Memory, Module};
//! # struct NoMem;
//! # // SAFETY: it never returns a pointer, so it promises nothing.
//! # unsafe impl Memory for NoMem { fn translate(&self, _: u64, _: u64) -> Option<*mut u8> { None } }
//! let m = Module::load(".version 7.0\n.target sm_80\n.address_size 64\n\
//!     .visible .entry k() { ret; }").unwrap();
//! let l = Launch { kernel: 0, grid: [1, 1, 1], block: [32, 1, 1], dynamic_shared_bytes: 0,
//!                  params: &[], globals: &[], workers: 1,
//!                  cancel: None, deadline: None };
//! let stats = ptxvm::launch(&m, &l, &NoMem).unwrap();
//! assert_eq!(stats.warp_instructions, 1);
//! ```
#![deny(missing_docs)]

// Lets the unit tests share the integration tests' `ptxvm::`-path support files.
#[cfg(test)]
extern crate self as ptxvm;

mod api;
mod ast;
mod devio;
mod drop;
mod error;
mod image;
mod ir;
mod isa;
mod lex;
pub mod link;
mod lower;
mod parse;
pub mod sandbox;
mod small;
mod vm;
mod word;

pub use api::{
    AssertFailure, Fault, FaultKind, GlobalInfo, GlobalSpace, KernelInfo, Launch, LaunchStats,
    Memory, ParamInfo,
};
pub use devio::{DeviceOutput, record_cost};
pub use error::Error;
pub use image::{AddressMode, FilterMode, Image, Sampler, Surface, TexelFormat, Texture};
pub use ir::{LOCAL_WINDOW, SHARED_WINDOW, WINDOW_SIZE};
pub use vm::{MAX_SHARED_BYTES, launch, launch_with_output};

use ir::Kernel;

/// A loaded PTX module: decoded once, immutable, shareable across threads.
#[derive(Debug)]
pub struct Module {
    kernels: Vec<Kernel>,
    infos: Vec<KernelInfo>,
    globals: Vec<GlobalInfo>,
    target: Option<u32>,
}

/// The architecture of the module's `.target` directive as major * 10 + minor (`sm_80` → 80,
/// `sm_90a` → 90), if it names one.
fn target_arch(tokens: &[lex::Token]) -> Option<u32> {
    let i = tokens
        .iter()
        .position(|t| matches!(&t.tok, lex::Tok::Dot(d) if *d == "target"))?;
    let lex::Tok::Ident(name) = &tokens.get(i + 1)?.tok else {
        return None;
    };
    arch_number(name)
}

/// `sm_80` / `compute_90a` → 80 / 90; other words → `None`.
pub(crate) fn arch_number(name: &str) -> Option<u32> {
    let digits: String = name
        .strip_prefix("sm_")
        .or_else(|| name.strip_prefix("compute_"))?
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

impl Module {
    /// Parses and decodes PTX text. Errors name the source line (and column for syntax).
    pub fn load(ptx: &str) -> Result<Module, Error> {
        let tokens = lex::lex(ptx)?;
        let ast = parse::parse(&tokens)?;
        let (kernels, globals) = lower::lower(&ast)?;
        let infos = kernels.iter().map(|k| k.info.clone()).collect();
        Ok(Module {
            kernels,
            infos,
            globals,
            target: target_arch(&tokens),
        })
    }

    /// The virtual architecture the PTX was written for (`.target sm_80` → 80), which NVIDIA's
    /// driver reports as a function's `CU_FUNC_ATTRIBUTE_PTX_VERSION`.
    pub fn target_arch(&self) -> Option<u32> {
        self.target
    }

    /// The module's kernels (`.entry` functions), in source order.
    pub fn kernels(&self) -> &[KernelInfo] {
        &self.infos
    }

    /// Index of the kernel called `name`.
    pub fn kernel_index(&self, name: &str) -> Option<usize> {
        self.infos.iter().position(|k| k.name == name)
    }

    /// The module's `.global` and `.const` variables, in source order.
    pub fn globals(&self) -> &[GlobalInfo] {
        &self.globals
    }

    pub(crate) fn kernel(&self, i: usize) -> Option<&Kernel> {
        self.kernels.get(i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn module_is_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<Module>();
    }
}
