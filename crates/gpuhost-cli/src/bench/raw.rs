//! The raw driver side of the benchmarks: the same PTX and kernel through cudarc's `sys` layer,
//! in the host's context, with no gpuhost code on the measured path.

use std::ffi::{CString, c_void};
use std::ptr;

use anyhow::{Result, bail};
use gpuhost::sys::{
    self, CUDA_KERNEL_NODE_PARAMS, CUfunction, CUgraph, CUgraphExec, CUgraphNode, CUmodule,
    CUresult, CUstream,
};

pub(super) fn ok(call: &str, r: CUresult) -> Result<()> {
    if r != CUresult::CUDA_SUCCESS {
        bail!("{call} failed: {r:?}");
    }
    Ok(())
}

/// A raw module, function and stream for the `noop(u32)` kernel, and an event (no timing, as
/// gpuhost's completion events) for the event-based completion floor.
pub struct Raw {
    module: CUmodule,
    func: CUfunction,
    stream: CUstream,
    event: sys::CUevent,
}

impl Raw {
    /// Load `ptx` in the host's context (the caller has entered the host on this thread).
    pub fn new(ptx: &str, kernel: &str) -> Result<Self> {
        let text = CString::new(ptx)?;
        let name = CString::new(kernel)?;
        let mut module: CUmodule = ptr::null_mut();
        // SAFETY: the host's context is current on this thread; text is NUL-terminated PTX.
        ok("cuModuleLoadData", unsafe {
            sys::cuModuleLoadData(&mut module, text.as_ptr().cast())
        })?;
        let mut func: CUfunction = ptr::null_mut();
        // SAFETY: module was just loaded; name is NUL-terminated.
        ok("cuModuleGetFunction", unsafe {
            sys::cuModuleGetFunction(&mut func, module, name.as_ptr())
        })?;
        let mut stream: CUstream = ptr::null_mut();
        // SAFETY: valid out pointer; context current.
        ok("cuStreamCreate", unsafe {
            sys::cuStreamCreate(
                &mut stream,
                sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32,
            )
        })?;
        let mut event: sys::CUevent = ptr::null_mut();
        // SAFETY: valid out pointer; context current.
        ok("cuEventCreate", unsafe {
            sys::cuEventCreate(
                &mut event,
                sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32,
            )
        })?;
        Ok(Self {
            module,
            func,
            stream,
            event,
        })
    }

    /// cuEventRecord on the stream, then cuEventQuery in a tight loop until it is done: how
    /// soon any event-based completion (gpuhost's) can see a launch end, with no hand-off.
    pub fn record_and_query(&self) -> Result<()> {
        // SAFETY: event and stream created in new(), context current.
        ok("cuEventRecord", unsafe {
            sys::cuEventRecord(self.event, self.stream)
        })?;
        loop {
            // SAFETY: the event was recorded above.
            match unsafe { sys::cuEventQuery(self.event) } {
                CUresult::CUDA_ERROR_NOT_READY => std::hint::spin_loop(),
                r => return ok("cuEventQuery", r),
            }
        }
    }

    /// cuLaunchKernel of noop(n) on one block of 32 threads.
    #[inline]
    pub fn launch(&self, n: u32) -> Result<()> {
        let mut n = n;
        self.launch_params(&mut [(&mut n as *mut u32).cast::<c_void>()])
    }

    /// cuLaunchKernel of the kernel with `params` (one pointer per parameter, valid for the
    /// call) on one block of 32 threads.
    #[inline]
    pub fn launch_params(&self, params: &mut [*mut c_void]) -> Result<()> {
        // SAFETY: the caller passes one pointer per kernel parameter, each to a value of the
        // parameter's size, alive for the call (the driver copies them).
        ok("cuLaunchKernel", unsafe {
            sys::cuLaunchKernel(
                self.func,
                1,
                1,
                1,
                32,
                1,
                1,
                0,
                self.stream,
                params.as_mut_ptr(),
                ptr::null_mut(),
            )
        })
    }

    /// An executable graph of `n` launches of the kernel with `params` (as
    /// [`Raw::launch_params`]), each depending on the one before, as on one stream.
    pub fn graph(&self, n: usize, params: &mut [*mut c_void]) -> Result<RawGraph> {
        let mut g = RawGraph {
            graph: ptr::null_mut(),
            exec: ptr::null_mut(),
        };
        // SAFETY: valid out pointer; context current.
        ok("cuGraphCreate", unsafe {
            sys::cuGraphCreate(&mut g.graph, 0)
        })?;
        let node = CUDA_KERNEL_NODE_PARAMS {
            func: self.func,
            gridDimX: 1,
            gridDimY: 1,
            gridDimZ: 1,
            blockDimX: 32,
            blockDimY: 1,
            blockDimZ: 1,
            sharedMemBytes: 0,
            kernelParams: params.as_mut_ptr(),
            extra: ptr::null_mut(),
            kern: ptr::null_mut(),
            ctx: ptr::null_mut(),
        };
        let mut prev: Option<CUgraphNode> = None;
        for _ in 0..n {
            let mut added: CUgraphNode = ptr::null_mut();
            let deps = prev
                .as_ref()
                .map_or(ptr::null(), |d| d as *const CUgraphNode);
            // SAFETY: graph live; deps is null (count 0) or one node of it; node's params point
            // at one value per kernel parameter, alive for the call (the driver copies them).
            ok("cuGraphAddKernelNode", unsafe {
                sys::cuGraphAddKernelNode_v2(
                    &mut added,
                    g.graph,
                    deps,
                    usize::from(prev.is_some()),
                    &node,
                )
            })?;
            prev = Some(added);
        }
        // SAFETY: graph complete; valid out pointer.
        ok("cuGraphInstantiateWithFlags", unsafe {
            sys::cuGraphInstantiateWithFlags(&mut g.exec, g.graph, 0)
        })?;
        Ok(g)
    }

    /// cuGraphLaunch of `g` on this stream.
    #[inline]
    pub fn launch_graph(&self, g: &RawGraph) -> Result<()> {
        // SAFETY: exec instantiated in this context; stream created in new().
        ok("cuGraphLaunch", unsafe {
            sys::cuGraphLaunch(g.exec, self.stream)
        })
    }

    pub fn sync(&self) -> Result<()> {
        // SAFETY: stream created in new(), context current.
        ok("cuStreamSynchronize", unsafe {
            sys::cuStreamSynchronize(self.stream)
        })
    }
}

impl Drop for Raw {
    fn drop(&mut self) {
        // SAFETY: handles created in new(); nothing uses them any more. Failures only leak.
        unsafe {
            let _ = sys::cuStreamSynchronize(self.stream);
            let _ = sys::cuEventDestroy_v2(self.event);
            let _ = sys::cuStreamDestroy_v2(self.stream);
            let _ = sys::cuModuleUnload(self.module);
        }
    }
}

/// A raw executable graph (see [`Raw::graph`]).
pub struct RawGraph {
    graph: CUgraph,
    exec: CUgraphExec,
}

impl Drop for RawGraph {
    fn drop(&mut self) {
        // SAFETY: handles made by Raw::graph (null when it failed before them), destroyed once;
        // a replay still in flight is freed by the driver after it. Failures only leak.
        unsafe {
            if !self.exec.is_null() {
                let _ = sys::cuGraphExecDestroy(self.exec);
            }
            if !self.graph.is_null() {
                let _ = sys::cuGraphDestroy(self.graph);
            }
        }
    }
}

/// cuCtxGetCurrent alone: the floor of any bind-on-entry.
#[inline]
pub fn ctx_get_current() -> Result<()> {
    let mut c = ptr::null_mut();
    // SAFETY: valid out pointer.
    ok("cuCtxGetCurrent", unsafe { sys::cuCtxGetCurrent(&mut c) })
}

/// cuCtxGetId(NULL) alone: what `Host::enter` asks the driver on its usual path (the id of the
/// context current on the thread), so its cost beyond the driver's shows.
#[inline]
pub fn ctx_get_id() -> Result<()> {
    let mut id = 0u64;
    // SAFETY: null asks for the current context; `id` is a valid out pointer.
    ok("cuCtxGetId", unsafe {
        sys::cuCtxGetId(ptr::null_mut(), &mut id)
    })
}
