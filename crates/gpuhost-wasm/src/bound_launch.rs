//! gpuhost:cuda/stream (the bound-launch resource): a launch whose kernel, geometry and
//! arguments are lifted and checked once, so enqueuing it again carries two handles across the
//! boundary instead of an argument list. It owns what it launches — its own kernel handle and a
//! clone of each buffer argument — each with its share of the guest's quota, so a buffer or
//! module the guest dropped stays counted for as long as a bound launch keeps it alive.
//! A stream collecting launches for a graph (burst/) shares one collected form of it across
//! its collected launches, made at the first and dropped when the launch changes.

use crate::calls::HostCall;
use std::sync::{Arc, Weak};

use gpuhost::{Arg as GpuArg, DeviceBuffer, LaunchConfig as GpuConfig};
use smallvec::SmallVec;
use wasmtime::component::{Resource, ResourceTable};

use crate::bindings::WitError;
use crate::bindings::gpuhost::cuda::stream::{Arg, HostBoundLaunch, LaunchConfig};
use crate::burst::{Collected, Deferred};
use crate::confine::{HIDDEN_PLACEHOLDERS, KernelSandbox};
use crate::ctx::{CudaCtx, CudaCtxView};
use crate::error::CudaResult;
use crate::limits::{Charge, Usage};
use crate::module::KernelRes;
use crate::stream::{
    INLINE_ARGS, Lifted, StreamRes, buffer_offset, check_arg_count, lift, to_gpu_config,
};

/// One bound argument: a buffer it keeps alive, or a scalar (never a borrowed variant).
enum Bound {
    Buffer {
        buf: DeviceBuffer,
        offset: usize,
        charge: Charge,
    },
    Scalar(GpuArg<'static>),
}

/// A guest's bound launch.
pub struct BoundLaunchRes {
    kernel: Arc<gpuhost::Kernel>,
    kernel_charge: Charge,
    sandbox: Option<Arc<KernelSandbox>>,
    config: GpuConfig,
    args: Vec<Bound>,
    /// The launch as it is now, collected (made at its first collection; reset by a change).
    collected: Option<Arc<Deferred>>,
    /// The stream `set-stream` gave it: the table slot of the guest's stream and that stream's
    /// gpuhost stream, which tells the stream from a later one in the same slot (the `Weak`
    /// keeps its allocation, so no other stream gets its address). Not the stream itself: the
    /// guest's dropping it must not keep it.
    stream: Option<(u32, Weak<gpuhost::Stream>)>,
}

impl BoundLaunchRes {
    /// The arguments as gpuhost takes them (inline for the usual handful: no allocation).
    pub(crate) fn args(&self) -> SmallVec<[GpuArg<'_>; INLINE_ARGS]> {
        let mut out = SmallVec::new();
        self.args_into(&mut out);
        out
    }

    /// [`BoundLaunchRes::args`] into the caller's (empty) list: a launch issued straight to the
    /// stream builds its list in place, where a returned list was copied out whole, and a plain
    /// loop of pushes is cheaper than `collect` through `Extend` (callgrind, a bound launch
    /// alone: gpuhost-wasm's own instructions 612 → 564).
    pub(crate) fn args_into<'a>(&'a self, out: &mut SmallVec<[GpuArg<'a>; INLINE_ARGS]>) {
        out.reserve(self.args.len());
        for a in &self.args {
            out.push(match a {
                Bound::Buffer { buf, offset, .. } => GpuArg::Buffer(buf, *offset),
                Bound::Scalar(v) => *v,
            });
        }
    }

    pub(crate) fn kernel(&self) -> &Arc<gpuhost::Kernel> {
        &self.kernel
    }

    pub(crate) fn sandbox(&self) -> Option<&KernelSandbox> {
        self.sandbox.as_deref()
    }

    /// Checks the launch as it is now without launching (a sandboxed kernel: the user's
    /// argument count and local memory here, the hidden arguments as placeholders for gpuhost).
    fn check(&self, ctx: &CudaCtx) -> CudaResult<()> {
        let mut args = self.args();
        if let Some(sb) = &self.sandbox {
            sb.check(&ctx.limits, ctx.host.facts(), &self.config, args.len())?;
            args.extend(HIDDEN_PLACEHOLDERS);
        }
        Ok(self.kernel.check_launch(&self.config, &args)?)
    }

    pub(crate) fn config(&self) -> GpuConfig {
        self.config
    }

    /// The launch as it is now, in the form a stream collects for a graph: made once and then
    /// shared, since what it launches changes only through `set-arg` and `set-config`.
    pub(crate) fn collected(&mut self) -> Arc<Deferred> {
        if let Some(d) = &self.collected {
            return d.clone();
        }
        let d = Arc::new(Deferred::new(
            &self.kernel,
            &self.kernel_charge,
            self.config,
            &self.args(),
            self.sandbox.as_ref(),
        ));
        self.collected = Some(d.clone());
        d
    }

    /// Forgets the collected form (the launch changed): launches collected before keep theirs.
    fn changed(&mut self, usage: &mut Usage) {
        if let Some(d) = self.collected.take() {
            Collected::Shared(d).release(usage);
        }
    }

    /// Gives back the quota shares of its kernel and buffers (not its own kernel-handle count).
    fn release_shares(mut self, usage: &mut Usage) {
        // First: launches collected and not issued keep their share of the kernel's module.
        self.changed(usage);
        self.kernel_charge.release(usage);
        for a in self.args {
            a.release(usage);
        }
    }
}

impl Bound {
    /// Gives back a buffer argument's quota share.
    fn release(self, usage: &mut Usage) {
        if let Bound::Buffer { charge, .. } = self {
            charge.release(usage);
        }
    }
}

/// Takes ownership of one lifted argument: a buffer argument is range-checked and cloned out of
/// the table with its quota share.
fn bind_arg(table: &ResourceTable, i: usize, a: &Arg) -> CudaResult<Bound> {
    Ok(match lift(a) {
        Lifted::Buffer(b) => {
            let res = table.get(&b.buffer)?;
            Bound::Buffer {
                offset: buffer_offset(i, b.offset, res.buf.len())?,
                buf: res.buf.clone(),
                charge: res.charge.clone(),
            }
        }
        Lifted::Scalar(v) => Bound::Scalar(v),
    })
}

impl CudaCtxView<'_> {
    /// The guest's stream that `set-stream` gave `launch`, if the guest still has it: the slot
    /// it was in holds a stream (of any other type, or empty, it was dropped) and that stream
    /// is the same one (else the slot was reused by a stream made after it was dropped).
    fn stream_of(&self, launch: &Resource<BoundLaunchRes>) -> CudaResult<Resource<StreamRes>> {
        let Some((rep, set)) = &self.table.get(launch)?.stream else {
            return Err(WitError::InvalidHandle(
                "this bound launch has no stream to enqueue on: give it one with set-stream".into(),
            )
            .into());
        };
        let stream = Resource::<StreamRes>::new_borrow(*rep);
        match self.table.get(&stream) {
            Ok(s) if std::ptr::eq(Arc::as_ptr(&s.stream), set.as_ptr()) => Ok(stream),
            _ => Err(WitError::InvalidHandle(
                "the stream set for this bound launch was dropped: give it a live one with set-stream"
                    .into(),
            )
            .into()),
        }
    }
}

impl HostBoundLaunch for CudaCtxView<'_> {
    fn bind(
        &mut self,
        kernel: Resource<KernelRes>,
        config: LaunchConfig,
        args: Vec<Arg>,
    ) -> CudaResult<Resource<BoundLaunchRes>> {
        let _timer = self.ctx.time(HostCall::BoundLaunchBind);
        check_arg_count(args.len(), self.ctx.limits.max_launch_args)?;
        let k = self.table.get(&kernel)?;
        let kernel_charge = k.charge.clone();
        let sandbox = k.sandbox.clone();
        let kernel = Arc::new(k.kernel.registry().kernel(k.kernel.name())?);
        let args = args
            .iter()
            .enumerate()
            .map(|(i, a)| bind_arg(self.table, i, a))
            .collect::<CudaResult<Vec<_>>>()?;
        let bound = BoundLaunchRes {
            kernel,
            kernel_charge,
            sandbox,
            config: to_gpu_config(&config),
            args,
            collected: None,
            stream: None,
        };
        bound.check(self.ctx)?;
        // From here on it holds quota shares: every failure path gives them back.
        if let Err(e) = self.ctx.usage.add_kernel(&self.ctx.limits) {
            bound.release_shares(&mut self.ctx.usage);
            return Err(e.into());
        }
        self.table.push(bound).map_err(|e| {
            // The table handed nothing back; the shares dropped with it were clones of live ones.
            self.ctx.usage.remove_kernel();
            e.into()
        })
    }

    fn set_arg(
        &mut self,
        launch: Resource<BoundLaunchRes>,
        index: u32,
        arg: Arg,
    ) -> CudaResult<()> {
        let _timer = self.ctx.time(HostCall::BoundLaunchSetArg);
        let new = bind_arg(self.table, index as usize, &arg)?;
        let b = self.table.get_mut(&launch)?;
        let Some(slot) = b.args.get_mut(index as usize) else {
            let n = b.args.len();
            return Err(WitError::ArgMismatch(format!(
                "argument {index} does not exist: the kernel takes {n} (indices 0..{n})"
            ))
            .into());
        };
        let old = std::mem::replace(slot, new);
        let checked = b.check(self.ctx);
        if let Err(e) = checked {
            let rejected = std::mem::replace(&mut b.args[index as usize], old);
            rejected.release(&mut self.ctx.usage);
            return Err(e);
        }
        old.release(&mut self.ctx.usage);
        b.changed(&mut self.ctx.usage);
        Ok(())
    }

    fn set_config(
        &mut self,
        launch: Resource<BoundLaunchRes>,
        config: LaunchConfig,
    ) -> CudaResult<()> {
        let _timer = self.ctx.time(HostCall::BoundLaunchSetConfig);
        let b = self.table.get_mut(&launch)?;
        let old = std::mem::replace(&mut b.config, to_gpu_config(&config));
        if let Err(e) = b.check(self.ctx) {
            b.config = old;
            return Err(e);
        }
        b.changed(&mut self.ctx.usage);
        Ok(())
    }

    fn set_stream(
        &mut self,
        launch: Resource<BoundLaunchRes>,
        stream: Resource<StreamRes>,
    ) -> wasmtime::Result<()> {
        let _timer = self.ctx.time(HostCall::BoundLaunchSetStream);
        let weak = Arc::downgrade(&self.table.get(&stream)?.stream);
        self.table.get_mut(&launch)?.stream = Some((stream.rep(), weak));
        Ok(())
    }

    fn enqueue(&mut self, launch: Resource<BoundLaunchRes>) -> CudaResult<()> {
        let _timer = self.ctx.time(HostCall::BoundLaunchEnqueue);
        let stream = self.stream_of(&launch)?;
        self.enqueue_bound(&stream, &launch)
    }

    fn drop(&mut self, launch: Resource<BoundLaunchRes>) -> wasmtime::Result<()> {
        let _timer = self.ctx.time(HostCall::BoundLaunchDrop);
        let b = self.table.delete(launch)?;
        b.release_shares(&mut self.ctx.usage);
        self.ctx.usage.remove_kernel();
        Ok(())
    }
}
