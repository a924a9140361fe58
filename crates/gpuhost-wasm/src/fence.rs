//! A fence for `synchronize`: an empty kernel launched at a stream's end gives a gpuhost
//! `Completion` to await when the stream's tail is not a launch (an event record or wait), so
//! `synchronize` never blocks the executor thread. Loaded once per runtime and shared.

use std::sync::Arc;

use gpuhost::{ModuleImage, ModuleSource, Registry};

/// PTX ISA 7.0 for sm_80: JIT-compiled by any later driver/GPU too; softcuda runs it as is.
const FENCE_PTX: &str = "\
.version 7.0
.target sm_80
.address_size 64

.visible .entry gpuhost_wasm_fence()
{
\tret;
}
";

/// The name of the fence kernel.
pub const FENCE_KERNEL: &str = "gpuhost_wasm_fence";

/// Loads the fence kernel on `host`.
pub fn load(host: &Arc<gpuhost::Host>) -> gpuhost::Result<Arc<gpuhost::Kernel>> {
    let source = ModuleSource::new("fence", ModuleImage::Ptx(FENCE_PTX.into()));
    let registry = Registry::from_sources(host, "gpuhost-wasm-fence", vec![source])?;
    Ok(Arc::new(registry.kernel(FENCE_KERNEL)?))
}
