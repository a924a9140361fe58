//! softcudart: a CUDA runtime of gpuhost's own, `libcudart.so.13`, implementing part of the
//! runtime API over the driver API, as NVIDIA's runtime does. A program built with
//! `nvcc -cudart shared` loads it in place of NVIDIA's (put its folder, with the library named
//! `libcudart.so.13`, on `LD_LIBRARY_PATH`), and it runs on whatever `libcuda.so.1` the process
//! finds: softcuda without a GPU, NVIDIA's driver on one. NVIDIA's own runtime cannot run on
//! softcuda: it insists on proof that its driver is NVIDIA's (docs/SOFTCUDA.md).
//!
//! Layout: [`driver`] opens libcuda and resolves the calls used; [`status`] maps driver results
//! to runtime errors and keeps each thread's last error; [`context`] binds each thread to its
//! device's primary context; [`registry`] holds the fatbins and kernels nvcc's code registers;
//! [`launch`] the `<<<>>>` configuration stack and kernel launches; [`properties`] the
//! `cudaDeviceProp` layout; the `api_*` modules are the exported calls by family (devices,
//! memory, pitched memory, host memory, stream-ordered pools, streams and events, launches,
//! function attributes, graphs and capture, and the per-thread default stream build's `_ptsz` /
//! `_ptds` forms of them), all listed once in [`exports!`] below.
//!
//! Only the listed calls exist: a program calling any other runtime function fails to load (or at
//! its first call, with lazy binding) naming the missing symbol, rather than meeting a stub.

mod api_device;
mod api_func;
mod api_graph;
mod api_host;
mod api_launch;
mod api_memory;
mod api_per_thread;
mod api_pitched;
mod api_pool;
mod api_stream;
mod context;
mod driver;
mod launch;
mod properties;
mod registry;
mod status;

/// Exports each runtime call under its C name, bound to the symbol version `libcudart.so.13`
/// that nvcc-built programs ask for (`cudaMalloc@libcudart.so.13`). rustc's version script puts
/// every `#[no_mangle]` export in the base version, so the exports are assembly entry points
/// instead: each jumps straight to its Rust function (a tail jump keeps every argument register
/// and stack slot as the caller set them) and is versioned by `.symver` in the same object.
macro_rules! exports {
    ($($module:ident :: $name:ident),* $(,)?) => {
        #[cfg(target_arch = "x86_64")]
        exports!(@asm "jmp", "@function"; $($module::$name),*);
        #[cfg(target_arch = "aarch64")]
        exports!(@asm "b", "%function"; $($module::$name),*);
    };
    (@asm $jump:literal, $kind:literal; $($module:ident :: $name:ident),*) => {
        std::arch::global_asm!(
            ".pushsection .text",
            $(
                concat!(".globl ", stringify!($name)),
                concat!(".type ", stringify!($name), ",", $kind),
                concat!(stringify!($name), ":"),
                concat!($jump, " {", stringify!($name), "}"),
                concat!(".size ", stringify!($name), ",.-", stringify!($name)),
                concat!(".symver ", stringify!($name), ",", stringify!($name),
                        "@@@libcudart.so.13"),
            )*
            ".popsection",
            $($name = sym $module::$name,)*
        );
    };
}

exports! {
    api_launch::__cudaRegisterFatBinary,
    api_launch::__cudaRegisterFatBinaryEnd,
    api_launch::__cudaUnregisterFatBinary,
    api_launch::__cudaRegisterFunction,
    api_launch::__cudaRegisterVar,
    api_launch::__cudaRegisterManagedVar,
    api_launch::__cudaInitModule,
    api_launch::__cudaPushCallConfiguration,
    api_launch::__cudaPopCallConfiguration,
    api_launch::__cudaGetKernel,
    api_launch::__cudaLaunchKernel,
    api_launch::cudaLaunchKernel,
    api_device::cudaDriverGetVersion,
    api_device::cudaRuntimeGetVersion,
    api_device::cudaGetDeviceCount,
    api_device::cudaSetDevice,
    api_device::cudaGetDevice,
    api_device::cudaDeviceGetAttribute,
    api_device::cudaGetDeviceProperties,
    api_device::cudaDeviceSynchronize,
    api_device::cudaDeviceReset,
    api_device::cudaMemGetInfo,
    api_device::cudaGetLastError,
    api_device::cudaPeekAtLastError,
    api_device::cudaGetErrorString,
    api_device::cudaGetErrorName,
    api_memory::cudaMalloc,
    api_memory::cudaFree,
    api_memory::cudaMallocManaged,
    api_memory::cudaMallocHost,
    api_memory::cudaHostAlloc,
    api_memory::cudaFreeHost,
    api_memory::cudaMemcpy,
    api_memory::cudaMemcpyAsync,
    api_memory::cudaMemset,
    api_memory::cudaMemsetAsync,
    api_memory::cudaMemcpyToSymbol,
    api_memory::cudaMemcpyToSymbolAsync,
    api_memory::cudaMemcpyFromSymbol,
    api_memory::cudaMemcpyFromSymbolAsync,
    api_memory::cudaGetSymbolAddress,
    api_memory::cudaGetSymbolSize,
    api_stream::cudaStreamCreate,
    api_stream::cudaStreamCreateWithFlags,
    api_stream::cudaStreamDestroy,
    api_stream::cudaStreamSynchronize,
    api_stream::cudaStreamQuery,
    api_stream::cudaStreamWaitEvent,
    api_stream::cudaEventCreate,
    api_stream::cudaEventCreateWithFlags,
    api_stream::cudaEventRecord,
    api_stream::cudaEventSynchronize,
    api_stream::cudaEventQuery,
    api_stream::cudaEventElapsedTime,
    api_stream::cudaEventDestroy,
    api_device::cudaInitDevice,
    api_device::cudaSetDeviceFlags,
    api_device::cudaGetDeviceFlags,
    api_device::cudaDeviceGetLimit,
    api_device::cudaDeviceSetLimit,
    api_device::cudaDeviceGetStreamPriorityRange,
    api_stream::cudaStreamCreateWithPriority,
    api_stream::cudaStreamGetFlags,
    api_stream::cudaStreamGetPriority,
    api_stream::cudaEventRecordWithFlags,
    api_stream::cudaLaunchHostFunc,
    api_graph::cudaStreamBeginCapture,
    api_graph::cudaStreamEndCapture,
    api_graph::cudaStreamIsCapturing,
    api_graph::cudaGraphCreate,
    api_graph::cudaGraphAddKernelNode,
    api_graph::cudaGraphExecKernelNodeSetParams,
    api_graph::cudaGraphInstantiate,
    api_graph::cudaGraphInstantiateWithFlags,
    api_graph::cudaGraphLaunch,
    api_graph::cudaGraphExecDestroy,
    api_graph::cudaGraphDestroy,
    api_pool::cudaMallocAsync,
    api_pool::cudaFreeAsync,
    api_pool::cudaDeviceGetDefaultMemPool,
    api_pool::cudaMemPoolSetAttribute,
    api_pool::cudaMemPoolGetAttribute,
    api_pool::cudaMemPoolTrimTo,
    api_func::cudaFuncGetAttributes,
    api_func::cudaFuncSetAttribute,
    api_func::cudaOccupancyMaxActiveBlocksPerMultiprocessor,
    api_func::cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags,
    api_func::cudaOccupancyAvailableDynamicSMemPerBlock,
    api_pitched::cudaMallocPitch,
    api_pitched::cudaMemcpy2D,
    api_pitched::cudaMemcpy2DAsync,
    api_pitched::cudaMemset2D,
    api_pitched::cudaMemset2DAsync,
    api_host::cudaHostRegister,
    api_host::cudaHostUnregister,
    api_host::cudaHostGetDevicePointer,
    api_host::cudaPointerGetAttributes,
    api_host::cudaMemcpyPeer,
    api_host::cudaMemcpyPeerAsync,
    api_host::cudaDeviceCanAccessPeer,
    api_stream::cudaStreamAddCallback,
    api_func::cudaFuncSetCacheConfig,
    api_device::cudaDeviceSetCacheConfig,
    api_device::cudaDeviceGetCacheConfig,
    api_device::cudaProfilerStart,
    api_device::cudaProfilerStop,
    api_graph::cudaGraphUpload,
    api_graph::cudaThreadExchangeStreamCaptureMode,
    api_launch::cudaLaunchKernelExC,
    api_graph::cudaStreamGetCaptureInfo,
    api_per_thread::cudaMemcpyAsync_ptsz,
    api_per_thread::cudaMemcpyToSymbolAsync_ptsz,
    api_per_thread::cudaMemcpyFromSymbolAsync_ptsz,
    api_per_thread::cudaMemsetAsync_ptsz,
    api_per_thread::cudaMemcpy2DAsync_ptsz,
    api_per_thread::cudaMemset2DAsync_ptsz,
    api_per_thread::cudaStreamSynchronize_ptsz,
    api_per_thread::cudaStreamQuery_ptsz,
    api_per_thread::cudaStreamGetFlags_ptsz,
    api_per_thread::cudaStreamGetPriority_ptsz,
    api_per_thread::cudaStreamWaitEvent_ptsz,
    api_per_thread::cudaEventRecord_ptsz,
    api_per_thread::cudaEventRecordWithFlags_ptsz,
    api_per_thread::cudaStreamAddCallback_ptsz,
    api_per_thread::cudaLaunchHostFunc_ptsz,
    api_per_thread::cudaStreamBeginCapture_ptsz,
    api_per_thread::cudaStreamEndCapture_ptsz,
    api_per_thread::cudaStreamIsCapturing_ptsz,
    api_per_thread::cudaStreamGetCaptureInfo_ptsz,
    api_per_thread::cudaGraphLaunch_ptsz,
    api_per_thread::cudaGraphUpload_ptsz,
    api_per_thread::cudaMallocAsync_ptsz,
    api_per_thread::cudaFreeAsync_ptsz,
    api_per_thread::cudaLaunchKernel_ptsz,
    api_per_thread::__cudaLaunchKernel_ptsz,
    api_per_thread::cudaLaunchKernelExC_ptsz,
    api_per_thread::cudaMemcpy_ptds,
    api_per_thread::cudaMemcpyToSymbol_ptds,
    api_per_thread::cudaMemcpyFromSymbol_ptds,
    api_per_thread::cudaMemset_ptds,
    api_per_thread::cudaMemcpy2D_ptds,
    api_per_thread::cudaMemset2D_ptds,
}
