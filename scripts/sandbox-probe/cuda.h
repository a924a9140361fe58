/* The few cuda.h declarations scripts/sandbox-probe/probe.c uses, for a dry run of the probe
 * against softcuda (scripts/sandbox-probe.sh soft) where no CUDA toolkit is installed. Names map
 * to the _v2 entry points as the real cuda.h maps them. */
#define cuMemAlloc cuMemAlloc_v2
#define cuMemcpyHtoD cuMemcpyHtoD_v2
#define cuMemcpyDtoH cuMemcpyDtoH_v2
#define cuMemsetD8 cuMemsetD8_v2
#define cuMemsetD32 cuMemsetD32_v2
#define cuMemHostGetDevicePointer cuMemHostGetDevicePointer_v2
#define cuEventDestroy cuEventDestroy_v2
#include <stddef.h>
typedef int CUresult; typedef int CUdevice; typedef struct CUctx_st *CUcontext; typedef struct CUmod_st *CUmodule; typedef struct CUfunc_st *CUfunction; typedef struct CUstream_st *CUstream; typedef unsigned long long CUdeviceptr;
typedef enum { CU_JIT_ERROR_LOG_BUFFER = 5, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6 } CUjit_option;
#define CUDA_SUCCESS 0
#define CUDA_ERROR_NOT_READY 600
#define CU_MEMHOSTALLOC_DEVICEMAP 2
CUresult cuGetErrorName(CUresult, const char**); CUresult cuModuleLoadDataEx(CUmodule*, const void*, unsigned, CUjit_option*, void**);
CUresult cuModuleGetFunction(CUfunction*, CUmodule, const char*); CUresult cuLaunchKernel(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream, void**, void**);
CUresult cuMemsetD8_v2(CUdeviceptr, unsigned char, size_t); CUresult cuCtxSynchronize(void); CUresult cuMemcpyDtoH(void*, CUdeviceptr, size_t); CUresult cuMemcpyHtoD(CUdeviceptr, const void*, size_t);
CUresult cuStreamQuery(CUstream); CUresult cuMemAlloc(CUdeviceptr*, size_t); CUresult cuMemHostAlloc(void**, size_t, unsigned); CUresult cuMemHostGetDevicePointer(CUdeviceptr*, void*, unsigned);
CUresult cuInit(unsigned); CUresult cuDeviceGet(CUdevice*, int); CUresult cuDevicePrimaryCtxRetain(CUcontext*, CUdevice); CUresult cuCtxSetCurrent(CUcontext); CUresult cuModuleUnload(CUmodule);
typedef struct CUevent_st *CUevent;
CUresult cuEventCreate(CUevent*, unsigned); CUresult cuEventRecord(CUevent, CUstream); CUresult cuEventSynchronize(CUevent); CUresult cuEventElapsedTime(float*, CUevent, CUevent); CUresult cuEventDestroy(CUevent); CUresult cuMemsetD32(CUdeviceptr, unsigned, size_t);
