// unload-stall.c: does a driver call on one thread stall every other thread's driver calls while
// a long kernel runs? Session 11's stress run caught a tokio worker inside cuModuleUnload while
// other threads waited in cuLaunchKernel and cuEventRecord. This probe measures it directly,
// for each call a module swap or a guest's end makes (unload, free, load), against a control.
//
// Build and run on the GPU host (nvcc's include path; libcuda from the driver):
//   gcc -O2 -o unload-stall scripts/probes/unload-stall.c -I/usr/local/cuda/include -lcuda -lpthread
//   ./unload-stall        (a long kernel runs while each call is made)
//   ./unload-stall jit    (no kernel runs; a large PTX module is compiled and loaded)
// Output: one row per case: the timed call's duration, and the worst duration of small driver
// calls (launch of a 1-thread kernel + event record + query, on another stream) issued meanwhile
// from a second thread, while a 400 ms spin kernel runs on a third stream.
#include <cuda.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CHECK(call)                                                                   \
    do {                                                                              \
        CUresult r_ = (call);                                                         \
        if (r_ != CUDA_SUCCESS) {                                                     \
            const char *s_ = NULL;                                                    \
            cuGetErrorName(r_, &s_);                                                  \
            fprintf(stderr, "%s:%d %s failed: %d %s\n", __FILE__, __LINE__, #call, r_, \
                    s_ ? s_ : "?");                                                   \
            exit(1);                                                                  \
        }                                                                             \
    } while (0)

static const char *PTX =
    ".version 8.0\n.target sm_90\n.address_size 64\n"
    ".visible .entry spin(.param .u64 ns) {\n"
    "  .reg .u64 %t<3>; .reg .pred %p;\n"
    "  ld.param.u64 %t2, [ns];\n  mov.u64 %t0, %globaltimer;\n  add.u64 %t2, %t2, %t0;\n"
    "LOOP:\n  mov.u64 %t1, %globaltimer;\n  setp.lt.u64 %p, %t1, %t2;\n  @%p bra LOOP;\n  ret;\n}\n"
    ".visible .entry nop() { ret; }\n";

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static CUcontext ctx;
static CUfunction nop_fn;
static atomic_int stop_probe;
static double worst_ms;

// The bystander: small driver calls in a loop, each timed; keeps the worst.
static void *bystander(void *arg) {
    (void)arg;
    CHECK(cuCtxSetCurrent(ctx));
    CUstream s;
    CUevent ev;
    CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CHECK(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
    worst_ms = 0;
    while (!atomic_load(&stop_probe)) {
        double t0 = now_ms();
        CHECK(cuLaunchKernel(nop_fn, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL));
        CHECK(cuEventRecord(ev, s));
        CUresult q = cuEventQuery(ev);
        if (q != CUDA_SUCCESS && q != CUDA_ERROR_NOT_READY) CHECK(q);
        double dt = now_ms() - t0;
        if (dt > worst_ms) worst_ms = dt;
        usleep(200);
    }
    CHECK(cuStreamSynchronize(s));
    CHECK(cuEventDestroy(ev));
    CHECK(cuStreamDestroy(s));
    return NULL;
}

// One case: `setup` runs before the spin starts, `act` is the timed call made while it runs,
// `cleanup` runs after the spin ends. State lives in these globals.
static CUmodule g_mod;
static CUlibrary g_lib;
static CUkernel g_kern;
static CUdeviceptr g_ptr;
static CUstream g_other;
static CUmemGenericAllocationHandle g_handle;
static CUdeviceptr g_va;
static size_t g_gran;
static void *g_host;
static CUstream g_new_stream;
static CUevent g_new_event;
static CUgraph g_graph;
static CUgraphExec g_exec;

static void nothing(void) {}
static void act_sleep(void) { usleep(1000); }
static void load_module(void) { CHECK(cuModuleLoadDataEx(&g_mod, PTX, 0, NULL, NULL)); }
static void unload_module(void) { CHECK(cuModuleUnload(g_mod)); }
static void load_library(void) { CHECK(cuLibraryLoadData(&g_lib, PTX, NULL, NULL, 0, NULL, NULL, 0)); }
static void unload_library(void) { CHECK(cuLibraryUnload(g_lib)); }
static void first_library_launch(void) {
    CHECK(cuLibraryGetKernel(&g_kern, g_lib, "nop"));
    CHECK(cuLaunchKernel((CUfunction)g_kern, 1, 1, 1, 1, 1, 1, 0, g_other, NULL, NULL));
}
static void mem_alloc(void) { CHECK(cuMemAlloc(&g_ptr, 1 << 20)); }
static void mem_free(void) { CHECK(cuMemFree(g_ptr)); }
static void mem_alloc_async(void) { CHECK(cuMemAllocAsync(&g_ptr, 1 << 20, g_other)); }
static void mem_free_async(void) {
    CHECK(cuMemFreeAsync(g_ptr, g_other));
    CHECK(cuStreamSynchronize(g_other));
}
static CUmemAllocationProp vmm_prop(void) {
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    return prop;
}
static void vmm_reserve(void) {
    CUmemAllocationProp prop = vmm_prop();
    CHECK(cuMemGetAllocationGranularity(&g_gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    CHECK(cuMemAddressReserve(&g_va, g_gran, 0, 0, 0));
}
static void vmm_map(void) {
    CUmemAllocationProp prop = vmm_prop();
    CHECK(cuMemCreate(&g_handle, g_gran, &prop, 0));
    CHECK(cuMemMap(g_va, g_gran, 0, g_handle, 0));
    CUmemAccessDesc acc;
    memset(&acc, 0, sizeof acc);
    acc.location = prop.location;
    acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CHECK(cuMemSetAccess(g_va, g_gran, &acc, 1));
}
static void vmm_unmap(void) {
    CHECK(cuMemUnmap(g_va, g_gran));
    CHECK(cuMemRelease(g_handle));
}
static void vmm_map_setup(void) { vmm_reserve(); vmm_map(); }
static void vmm_free(void) { CHECK(cuMemAddressFree(g_va, g_gran)); }
static void vmm_unmap_free(void) { vmm_unmap(); vmm_free(); }
static void host_alloc(void) { g_host = malloc(4 << 20); memset(g_host, 1, 4 << 20); }
static void host_register(void) { CHECK(cuMemHostRegister(g_host, 4 << 20, 0)); }
static void host_unregister(void) { CHECK(cuMemHostUnregister(g_host)); }
static void host_register_setup(void) { host_alloc(); host_register(); }
static void host_free(void) { free(g_host); }
static void host_unregister_free(void) { host_unregister(); host_free(); }
static void stream_create(void) { CHECK(cuStreamCreate(&g_new_stream, CU_STREAM_NON_BLOCKING)); }
static void stream_destroy(void) { CHECK(cuStreamDestroy(g_new_stream)); }
static void event_create(void) { CHECK(cuEventCreate(&g_new_event, CU_EVENT_DISABLE_TIMING)); }
static void event_destroy(void) { CHECK(cuEventDestroy(g_new_event)); }
static void graph_build(void) {
    CUDA_KERNEL_NODE_PARAMS kp;
    memset(&kp, 0, sizeof kp);
    kp.func = nop_fn;
    kp.gridDimX = kp.gridDimY = kp.gridDimZ = 1;
    kp.blockDimX = kp.blockDimY = kp.blockDimZ = 1;
    CUgraphNode node;
    CHECK(cuGraphCreate(&g_graph, 0));
    CHECK(cuGraphAddKernelNode(&node, g_graph, NULL, 0, &kp));
    CHECK(cuGraphInstantiate(&g_exec, g_graph, 0));
}
static void graph_destroy(void) {
    CHECK(cuGraphExecDestroy(g_exec));
    CHECK(cuGraphDestroy(g_graph));
}

// The JIT alone (PTX to cubin in host memory, nothing loaded), and a load of that cubin: which
// half of cuModuleLoadDataEx's stall is the compile and which the load.
static void *g_cubin;
static size_t g_cubin_size;
static void link_ptx(void) {
    CUlinkState link;
    void *out;
    CHECK(cuLinkCreate(0, NULL, NULL, &link));
    CHECK(cuLinkAddData(link, CU_JIT_INPUT_PTX, (void *)PTX, strlen(PTX) + 1, "probe.ptx", 0, NULL,
                        NULL));
    CHECK(cuLinkComplete(link, &out, &g_cubin_size));
    g_cubin = malloc(g_cubin_size);
    memcpy(g_cubin, out, g_cubin_size);
    CHECK(cuLinkDestroy(link));
}
static void drop_cubin(void) { free(g_cubin); }
static void load_cubin(void) { CHECK(cuModuleLoadData(&g_mod, g_cubin)); }
static void unload_module_drop_cubin(void) { unload_module(); drop_cubin(); }
static CUfunction g_fn;
static void get_function(void) { CHECK(cuModuleGetFunction(&g_fn, g_mod, "nop")); }
static void first_launch(void) {
    CHECK(cuLaunchKernel(g_fn, 1, 1, 1, 1, 1, 1, 0, g_other, NULL, NULL));
}
static void load_and_get(void) { load_module(); get_function(); }
// A module loaded in a second context while the primary context's kernel runs.
static CUcontext g_ctx2;
static void load_in_second_context(void) {
    CHECK(cuCtxCreate(&g_ctx2, NULL, 0, 0));
    CHECK(cuModuleLoadDataEx(&g_mod, PTX, 0, NULL, NULL));
    CHECK(cuModuleUnload(g_mod));
    CHECK(cuCtxDestroy(g_ctx2));
    CHECK(cuCtxSetCurrent(ctx));
}

struct Case {
    const char *name;
    void (*setup)(void);
    void (*act)(void);
    void (*cleanup)(void);
};
static const struct Case CASES[] = {
    {"control (sleep 1 ms)", nothing, act_sleep, nothing},
    {"cuModuleLoadDataEx", nothing, load_module, unload_module},
    {"cuModuleUnload", load_module, unload_module, nothing},
    {"cuLinkComplete (PTX to cubin, no load)", nothing, link_ptx, drop_cubin},
    {"cuModuleLoadData (cubin)", link_ptx, load_cubin, unload_module_drop_cubin},
    {"cuModuleGetFunction (loaded before)", load_module, get_function, unload_module},
    {"first launch (loaded before)", load_and_get, first_launch, unload_module},
    {"ctx create + load in 2nd ctx", nothing, load_in_second_context, nothing},
    {"cuLibraryLoadData", nothing, load_library, unload_library},
    {"cuLibraryGetKernel + first launch", load_library, first_library_launch, unload_library},
    {"cuLibraryUnload", load_library, unload_library, nothing},
    {"cuMemAlloc 1 MiB", nothing, mem_alloc, mem_free},
    {"cuMemFree 1 MiB", mem_alloc, mem_free, nothing},
    {"cuMemAllocAsync", nothing, mem_alloc_async, mem_free_async},
    {"cuMemFreeAsync + sync its stream", mem_alloc_async, mem_free_async, nothing},
    {"cuMemAddressReserve", nothing, vmm_reserve, vmm_free},
    {"cuMemCreate + Map + SetAccess", vmm_reserve, vmm_map, vmm_unmap_free},
    {"cuMemUnmap + Release", vmm_map_setup, vmm_unmap, vmm_free},
    {"cuMemHostRegister 4 MiB", host_alloc, host_register, host_unregister_free},
    {"cuMemHostUnregister 4 MiB", host_register_setup, host_unregister, host_free},
    {"cuStreamCreate", nothing, stream_create, stream_destroy},
    {"cuStreamDestroy", stream_create, stream_destroy, nothing},
    {"cuEventCreate", nothing, event_create, event_destroy},
    {"cuGraphInstantiate", nothing, graph_build, graph_destroy},
    {"cuGraphExecDestroy", graph_build, graph_destroy, nothing},
};
#define NCASES (sizeof CASES / sizeof CASES[0])

// `jit` mode: no kernel runs; a large PTX module (16 kernels of 2,000 dependent FMAs) is loaded
// three ways while the bystander runs, to see whether the JIT inside cuModuleLoadDataEx holds
// other threads' calls, and whether compiling first (cuLink) and loading the cubin avoids it.
static char *big_ptx(void) {
    size_t cap = 64u << 20, n = 0;
    char *p = malloc(cap);
    n += snprintf(p + n, cap - n, ".version 8.0\n.target sm_90\n.address_size 64\n");
    for (int k = 0; k < 16; k++) {
        n += snprintf(p + n, cap - n,
                      ".visible .entry k%d(.param .u64 out, .param .f32 x) {\n"
                      "  .reg .f32 %%f<3>; .reg .u64 %%a;\n"
                      "  ld.param.f32 %%f0, [x];\n  mov.f32 %%f1, %%f0;\n",
                      k);
        for (int i = 0; i < 2000; i++)
            n += snprintf(p + n, cap - n, "  fma.rn.f32 %%f1, %%f1, %%f0, 0f3F80%04X;\n", i & 0xffff);
        n += snprintf(p + n, cap - n,
                      "  ld.param.u64 %%a, [out];\n  st.global.f32 [%%a], %%f1;\n  ret;\n}\n");
    }
    return p;
}

static void jit_mode(void) {
    char *ptx = big_ptx();
    printf("big PTX: %zu bytes\n%-36s %12s %16s\n", strlen(ptx), "case (no kernel running)",
           "call ms", "bystander worst");
    for (int rep = 0; rep < 3; rep++) {
        for (int c = 0; c < 3; c++) {
            atomic_store(&stop_probe, 0);
            pthread_t t;
            pthread_create(&t, NULL, bystander, NULL);
            usleep(20 * 1000);
            CUmodule m = NULL;
            CUlinkState link;
            void *out;
            size_t size;
            double t0 = now_ms();
            if (c == 0) CHECK(cuModuleLoadDataEx(&m, ptx, 0, NULL, NULL));
            if (c >= 1) {
                CHECK(cuLinkCreate(0, NULL, NULL, &link));
                CHECK(cuLinkAddData(link, CU_JIT_INPUT_PTX, ptx, strlen(ptx) + 1, "big.ptx", 0,
                                    NULL, NULL));
                CHECK(cuLinkComplete(link, &out, &size));
            }
            double jit = now_ms() - t0;
            double t1 = now_ms();
            if (c == 2) CHECK(cuModuleLoadData(&m, out));
            double load = now_ms() - t1;
            usleep(20 * 1000);
            atomic_store(&stop_probe, 1);
            pthread_join(t, NULL);
            if (c >= 1) CHECK(cuLinkDestroy(link));
            if (m) CHECK(cuModuleUnload(m));
            const char *name[] = {"cuModuleLoadDataEx (PTX)", "cuLinkComplete only",
                                  "cuLinkComplete, then load cubin"};
            printf("%-36s %12.3f %16.3f   (load of cubin %.3f ms)\n", name[c], jit + load, worst_ms,
                   load);
        }
    }
    free(ptx);
}

int main(int argc, char **argv) {
    CUdevice dev;
    CHECK(cuInit(0));
    CHECK(cuDeviceGet(&dev, 0));
    CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CHECK(cuCtxSetCurrent(ctx));
    CUmodule main_mod;
    CUfunction spin_fn;
    CHECK(cuModuleLoadData(&main_mod, PTX));
    CHECK(cuModuleGetFunction(&spin_fn, main_mod, "spin"));
    CHECK(cuModuleGetFunction(&nop_fn, main_mod, "nop"));
    CUstream spin_stream, other;
    CHECK(cuStreamCreate(&spin_stream, CU_STREAM_NON_BLOCKING));
    CHECK(cuStreamCreate(&other, CU_STREAM_NON_BLOCKING));
    if (argc > 1 && strcmp(argv[1], "jit") == 0) {
        jit_mode();
        return 0;
    }
    printf("%-36s %12s %16s %14s\n", "case", "call ms", "bystander worst", "spin left ms");
    g_other = other;
    for (int rep = 0; rep < 2; rep++) {
        for (size_t c = 0; c < NCASES; c++) {
            CASES[c].setup();
            CHECK(cuCtxSynchronize());
            unsigned long long ns = 400ull * 1000 * 1000;
            void *args[] = {&ns};
            atomic_store(&stop_probe, 0);
            pthread_t t;
            double spin_start = now_ms();
            CHECK(cuLaunchKernel(spin_fn, 1, 1, 1, 1, 1, 1, 0, spin_stream, args, NULL));
            pthread_create(&t, NULL, bystander, NULL);
            usleep(50 * 1000);
            double t0 = now_ms();
            CASES[c].act();
            double call = now_ms() - t0;
            double spin_left = 400.0 - (now_ms() - spin_start);
            usleep(20 * 1000);
            atomic_store(&stop_probe, 1);
            pthread_join(t, NULL);
            CHECK(cuCtxSynchronize());
            CASES[c].cleanup();
            printf("%-36s %12.3f %16.3f %14.1f\n", CASES[c].name, call, worst_ms, spin_left);
        }
    }
    CHECK(cuModuleUnload(main_mod));
    CHECK(cuStreamDestroy(spin_stream));
    CHECK(cuStreamDestroy(other));
    CHECK(cuDevicePrimaryCtxRelease(dev));
    return 0;
}
