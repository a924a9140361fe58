//! gpuhost:cuda/stream (the event resource): timestamps recorded on a stream.

use crate::calls::HostCall;
use wasmtime::component::Resource;

use crate::bindings::gpuhost::cuda::stream::HostEvent;
use crate::ctx::CudaCtxView;
use crate::error::CudaResult;

/// A guest's event.
pub struct EventRes {
    pub(crate) event: gpuhost::Event,
}

impl HostEvent for CudaCtxView<'_> {
    fn elapsed_ms_since(
        &mut self,
        end: Resource<EventRes>,
        start: Resource<EventRes>,
    ) -> CudaResult<f32> {
        let _timer = self.ctx.time(HostCall::EventElapsedMsSince);
        let start = &self.table.get(&start)?.event;
        let end = &self.table.get(&end)?.event;
        Ok(gpuhost::Event::elapsed_ms(start, end)?)
    }

    fn drop(&mut self, event: Resource<EventRes>) -> wasmtime::Result<()> {
        let _timer = self.ctx.time(HostCall::EventDrop);
        self.table.delete(event)?;
        self.ctx.usage.remove_stream_or_event();
        Ok(())
    }
}
