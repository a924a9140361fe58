//! Bundles for sandboxed guests. A bundle is the operator's code, but a sandboxed guest picks
//! its arguments: a count or index scalar past the guest's buffers would let an unrewritten
//! kernel read or write other guests' memory. So a bundle granted to sandboxed guests is loaded
//! as its PTX rewritten by the same sandbox as the guests' own modules: once per device, shared
//! by every Store it is granted to ([`crate::CudaCtx::with_sandboxed_bundle`]). Each Store gets
//! its own copy of a module's globals, made at its first kernel of that module (bundle.rs). A
//! module without PTX (a cubin or fatbin only) cannot be confined, and is refused at load.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use gpuhost::{ModuleImage, ModuleSource, Registry};
use ptxvm::sandbox::{GlobalsLayout, SandboxedKernel};

use crate::error::Error;

/// What the sandbox made of a bundle: each module's globals layout and each kernel's launch
/// facts. It holds nothing on the device; the rewritten registry is returned beside it, so the
/// embedder alone decides when that is released.
#[derive(Debug)]
pub struct BundleRewrite {
    /// The globals layout of each module, in the manifest's order.
    pub(crate) modules: Vec<GlobalsLayout>,
    /// Each kernel's module (an index into `modules`) and its sandbox facts.
    pub(crate) kernels: HashMap<String, (usize, SandboxedKernel)>,
}

impl BundleRewrite {
    /// Loads the bundle in `dir` on `host` for sandboxed guests: every module's PTX rewritten by
    /// the sandbox and loaded as one registry. Grant both with
    /// [`crate::CudaCtx::with_sandboxed_bundle`].
    pub fn load(
        host: &Arc<gpuhost::Host>,
        dir: impl AsRef<Path>,
    ) -> Result<(Arc<Registry>, Arc<BundleRewrite>), Error> {
        let (name, sources) = gpuhost::read_bundle(dir.as_ref(), &host.facts().sm_tag())?;
        let mut rewritten = Vec::with_capacity(sources.len());
        let mut modules = Vec::with_capacity(sources.len());
        let mut kernels = HashMap::new();
        for (index, src) in sources.iter().enumerate() {
            let refused = |reason: String| Error::BundleNotConfinable {
                module: src.name.clone(),
                reason,
            };
            let ptx = src.ptx().ok_or_else(|| {
                refused(
                    "it has no PTX (a cubin or fatbin only, which the sandbox cannot check): add \
                     the module's PTX to the manifest (`ptx = \"...\"`), or run the function \
                     trusted (sandbox = false)"
                        .into(),
                )
            })?;
            let s = crate::confine::sandbox(ptx)
                .map_err(|e| refused(format!("the PTX sandbox refused it: {e}")))?;
            for k in s.kernels {
                kernels.insert(k.name.clone(), (index, k));
            }
            modules.push(s.globals);
            let mut module = ModuleSource::new(src.name.clone(), ModuleImage::Ptx(s.ptx));
            module.file = src.file.clone();
            rewritten.push(module);
        }
        let registry = Registry::from_sources(host, name, rewritten)?;
        Ok((registry, Arc::new(BundleRewrite { modules, kernels })))
    }
}
