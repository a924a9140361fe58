/* Sandbox probe for an NVIDIA GPU (driver API, C; built by scripts/sandbox-probe.sh).
 *
 * 1. JIT-loads every rewritten PTX module in DIR (made by ptxvm's sandbox_dump example) and
 *    prints the JIT log of any failure.
 * 2. Runs the rewritten red-team kernels (DIR/fixtures__redteam.ptx, from
 *    crates/ptxvm/tests/fixtures/redteam.ptx) against a real arena, a separate victim
 *    allocation and a host-mapped control block, and checks the sandbox contract: the launch
 *    succeeds, the victim is unchanged, no victim bytes reach the arena, the control block's
 *    fault word names the launch exactly when an access was fenced, and endless loops stop when
 *    the epoch changes (the stop latency is printed).
 * It times nothing: its control block is host-mapped memory the host polls while kernels run,
 * unlike anything gpuhost runs. The sandbox's cost is measured by sandbox_bench.
 * Usage: sandbox-probe DIR. Exit status: 0 when everything passed. */
#include <cuda.h>
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define ARENA (2u << 20)
#define VICTIM 4096u
#define TAG 0x7a9u
#define EPOCH 3u

static int failures = 0;

#define CK(x)                                                                  \
    do {                                                                       \
        CUresult r_ = (x);                                                     \
        if (r_ != CUDA_SUCCESS) {                                              \
            const char *n_ = "?";                                              \
            cuGetErrorName(r_, &n_);                                           \
            printf("FATAL %s:%d: %s -> %s\n", __FILE__, __LINE__, #x, n_);     \
            exit(2);                                                           \
        }                                                                      \
    } while (0)

static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) {
        fclose(f);
        free(buf);
        return NULL;
    }
    fclose(f);
    buf[n] = 0;
    *len = (size_t)n;
    return buf;
}

static int jit(const char *path, CUmodule *out) {
    size_t len = 0;
    char *text = slurp(path, &len);
    if (!text) {
        printf("FAIL read %s\n", path);
        failures++;
        return 0;
    }
    static char log[1 << 16];
    log[0] = 0;
    CUjit_option opts[2] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void *vals[2] = {log, (void *)(uintptr_t)sizeof log};
    CUresult r = cuModuleLoadDataEx(out, text, 2, opts, vals);
    free(text);
    if (r != CUDA_SUCCESS) {
        const char *n = "?";
        cuGetErrorName(r, &n);
        printf("FAIL jit %s: %s\n%s\n", path, n, log);
        failures++;
        return 0;
    }
    return 1;
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* The guest's memory. */
/* ptxvm::sandbox::CTL_FAULT_TAG: the fault word lies 2 MiB past the epoch. */
#define CTL_FAULT (2u << 20)
static CUdeviceptr arena, victim, ctl_d, globals_d;
static volatile uint32_t *ctl;
static unsigned char pattern[VICTIM];
static unsigned char *scratch;
static CUmodule redteam;

typedef struct {
    uint64_t v;
    int bytes; /* 4 or 8 */
} Arg;

static CUresult launch(const char *kernel, unsigned grid, unsigned block, const Arg *args, int n,
                       uint32_t epoch) {
    CUfunction f;
    CK(cuModuleGetFunction(&f, redteam, kernel));
    uint64_t v64[16];
    uint32_t v32[16];
    void *ptrs[16];
    int k = 0;
    for (int i = 0; i < n; i++, k++) {
        if (args[i].bytes == 4) {
            v32[k] = (uint32_t)args[i].v;
            ptrs[k] = &v32[k];
        } else {
            v64[k] = args[i].v;
            ptrs[k] = &v64[k];
        }
    }
    uint64_t hidden[5] = {arena, ARENA, globals_d, ctl_d, ((uint64_t)TAG << 32) | epoch};
    for (int i = 0; i < 5; i++, k++) {
        v64[k] = hidden[i];
        ptrs[k] = &v64[k];
    }
    return cuLaunchKernel(f, grid, 1, 1, block, 1, 1, 0, 0, ptrs, NULL);
}

static void reset(void) {
    __atomic_store_n(&ctl[0], EPOCH, __ATOMIC_SEQ_CST);
    __atomic_store_n(&ctl[CTL_FAULT / 4], 0u, __ATOMIC_SEQ_CST);
    CK(cuMemsetD8(arena, 0, ARENA));
}

/* Checks the outcome of the last launch; `fenced`: whether the fault word must be set. */
static void check(const char *name, CUresult launched, int fenced) {
    CUresult r = launched == CUDA_SUCCESS ? cuCtxSynchronize() : launched;
    if (r != CUDA_SUCCESS) {
        const char *n = "?";
        cuGetErrorName(r, &n);
        printf("FAIL %-28s the launch failed: %s (the context is now unusable)\n", name, n);
        exit(1);
    }
    int ok = 1;
    unsigned char v[VICTIM];
    CK(cuMemcpyDtoH(v, victim, VICTIM));
    if (memcmp(v, pattern, VICTIM) != 0) {
        printf("FAIL %-28s the victim allocation changed\n", name);
        ok = 0;
    }
    CK(cuMemcpyDtoH(scratch, arena, ARENA));
    for (size_t i = 0; i + 8 <= ARENA; i++) {
        if (memcmp(scratch + i, "VICTIM-S", 8) == 0) {
            printf("FAIL %-28s victim data reached the arena at +%zu\n", name, i);
            ok = 0;
            break;
        }
    }
    uint32_t word = __atomic_load_n(&ctl[CTL_FAULT / 4], __ATOMIC_SEQ_CST);
    if (word != (fenced ? TAG : 0u)) {
        printf("FAIL %-28s fault word %#x, expected %#x\n", name, word, fenced ? TAG : 0u);
        ok = 0;
    }
    if (ok) printf("PASS %s\n", name);
    else failures++;
}

static uint32_t arena_u32(size_t off) {
    uint32_t v;
    CK(cuMemcpyDtoH(&v, arena + off, 4));
    return v;
}

static void expect_u32(const char *name, size_t off, uint32_t want) {
    uint32_t got = arena_u32(off);
    if (got != want) {
        printf("FAIL %-28s arena+%zu = %u, expected %u\n", name, off, got, want);
        failures++;
    }
}

#define A64(x) {(uint64_t)(x), 8}
#define A32(x) {(uint64_t)(x), 4}
#define RUN(name, grid, block, fenced, ...)                                             \
    do {                                                                                \
        Arg a_[] = {__VA_ARGS__};                                                       \
        check(name, launch(name, grid, block, a_, (int)(sizeof a_ / sizeof a_[0]), EPOCH), \
              fenced);                                                                  \
    } while (0)

/* Launches an endless kernel, bumps the epoch after 100 ms and measures how fast it stops. */
static void abort_test(const char *name, int fenced) {
    reset();
    Arg a[] = {A64(arena)};
    CUresult r = launch(name, 2, 64, a, 1, EPOCH);
    if (r != CUDA_SUCCESS) {
        check(name, r, fenced);
        return;
    }
    usleep(100 * 1000);
    if (cuStreamQuery(0) != CUDA_ERROR_NOT_READY) {
        printf("FAIL %-28s finished before the abort\n", name);
        failures++;
    }
    __atomic_store_n(&ctl[0], EPOCH + 1, __ATOMIC_SEQ_CST);
    double t0 = now();
    while (cuStreamQuery(0) == CUDA_ERROR_NOT_READY) {
        if (now() - t0 > 10.0) {
            printf("FAIL %-28s still running 10 s after the abort; exiting\n", name);
            fflush(stdout);
            _exit(1);
        }
    }
    printf("INFO %-28s stopped %.3f ms after the epoch changed\n", name, (now() - t0) * 1e3);
    char label[64];
    snprintf(label, sizeof label, "%s (abort)", name);
    check(label, CUDA_SUCCESS, fenced);
    if (arena_u32(0) == 0) {
        printf("FAIL %-28s never ran\n", name);
        failures++;
    }
}

static void redteam_suite(const char *dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/fixtures__redteam.ptx", dir);
    if (!jit(path, &redteam)) return;
    CK(cuMemAlloc(&arena, ARENA));
    CK(cuMemAlloc(&victim, VICTIM));
    for (unsigned i = 0; i < VICTIM; i++) pattern[i] = (unsigned char)"VICTIM-SECRET-42"[i % 16];
    CK(cuMemcpyHtoD(victim, pattern, VICTIM));
    void *host = NULL;
    CK(cuMemHostAlloc(&host, CTL_FAULT + 64, CU_MEMHOSTALLOC_DEVICEMAP));
    ctl = (volatile uint32_t *)host;
    CK(cuMemHostGetDevicePointer(&ctl_d, host, 0));
    scratch = malloc(ARENA);
    /* The globals block sits 1 MiB into the arena, initialised from sandbox_dump's image. */
    globals_d = arena + (1u << 20);
    snprintf(path, sizeof path, "%s/fixtures__redteam.globals", dir);
    size_t glen = 0;
    char *gimg = slurp(path, &glen);
    if (!gimg) {
        printf("FAIL read %s\n", path);
        failures++;
        return;
    }

    reset();
    RUN("offset_rw", 1, 64, 1, A64(arena), A64(victim - arena), A64(arena + 4096));
    reset();
    RUN("offset_rw", 1, 64, 1, A64(arena), A64((arena - 65536) - arena), A64(arena + 4096));
    reset();
    RUN("scan", 1, 1, 1, A64(victim - 8192), A64(128), A64(arena + 4096));
    uint64_t raws[4] = {victim + 64, 0, 0xdead00000000ull, ctl_d};
    for (int i = 0; i < 4; i++) {
        reset();
        RUN("raw", 1, 1, 1, A64(raws[i]), A64(arena + 4096));
        if (__atomic_load_n(&ctl[0], __ATOMIC_SEQ_CST) != EPOCH) {
            printf("FAIL raw wrote the control block\n");
            failures++;
        }
    }
    reset();
    RUN("generic", 1, 1, 1, A64(victim), A64(arena + 4096));
    expect_u32("generic (in-window)", 4096 + 12, 7);
    reset();
    RUN("atoms", 1, 32, 1, A64(victim), A64(arena + 4096));
    reset();
    RUN("nc", 1, 1, 1, A64(victim), A64(arena + 4096));
    reset();
    RUN("shared_oob", 1, 64, 1, A64(arena + 4096), A32(4096));
    reset();
    RUN("local_oob", 1, 32, 1, A64(arena + 4096), A64(1u << 20));
    expect_u32("local_oob (in-range)", 4096 + 4, 9);
    reset();
    uint32_t word = 0x12345678u;
    CK(cuMemcpyHtoD(arena + 4096 + 4, &word, 4));
    RUN("misaligned", 1, 1, 0, A64(arena + 4096));
    expect_u32("misaligned (aligned down)", 4096 + 8, 0x12345678u);
    reset();
    RUN("long", 1, 1, 0, A64(arena + 4096), A32(200000));
    uint32_t sum = 0;
    for (uint32_t i = 0; i < 200000; i++) sum += i;
    expect_u32("long (result)", 4096, sum);
    reset();
    CK(cuMemcpyHtoD(globals_d, gimg, glen));
    RUN("globals_rw", 1, 4, 1, A64(arena + 4096));
    expect_u32("globals_rw (counter)", 1u << 20, 4);
    for (uint32_t t = 0; t < 4; t++) expect_u32("globals_rw (table)", 4096 + 4 * t, 50 + 10 * t);

    reset();
    RUN("runs", 1, 1, 0, A64(arena + 8192), A64(arena + 4096), A32(0));
    reset();
    RUN("runs", 1, 1, 1, A64(victim - 8), A64(arena + 4096), A32(0));
    reset();
    RUN("runs", 1, 1, 1, A64(arena + 8192), A64(arena + 4096), A32(8));

    reset();
    RUN("generic_mix", 1, 64, 0, A64(arena + 4096));
    for (uint32_t t = 0; t < 64; t++) expect_u32("generic_mix (value)", 4096 + 4 * t, 7 * t);
    expect_u32("generic_mix (ballot)", 4096 + 256, 0xffffffffu);
    expect_u32("generic_mix (ballot)", 4096 + 256 + 4 * 63, 0xffffffffu);

    reset();
    {
        unsigned char bytes[32];
        for (int k = 0; k < 32; k++) bytes[k] = (unsigned char)k;
        CK(cuMemcpyHtoD(arena + 8192, bytes, 32));
        RUN("cp_async", 1, 1, 0, A64(arena + 8192), A64(arena + 4096), A32(0));
        unsigned char back[32];
        CK(cuMemcpyDtoH(back, arena + 4096, 32));
        if (memcmp(back, bytes, 32) != 0) {
            printf("FAIL cp_async (copied bytes differ)\n");
            failures++;
        }
    }
    reset();
    RUN("cp_async", 1, 1, 1, A64(victim), A64(arena + 4096), A32(0));
    reset();
    RUN("cp_async", 1, 1, 1, A64(arena + 8192), A64(arena + 4096), A32(64));

    reset();
    {
        uint64_t next = arena + 12288, value = 0x123456789abcdef0ull, got = 0;
        CK(cuMemcpyHtoD(arena + 8192, &next, 8));
        CK(cuMemcpyHtoD(arena + 12288 + 8, &value, 8));
        RUN("chase", 1, 1, 0, A64(arena + 8192), A64(arena + 4096));
        CK(cuMemcpyDtoH(&got, arena + 4096, 8));
        if (got != value) {
            printf("FAIL chase (pointer chasing read %#llx)\n", (unsigned long long)got);
            failures++;
        }
    }

    /* A launch queued under a stale epoch exits at entry. */
    reset();
    __atomic_store_n(&ctl[0], EPOCH + 1, __ATOMIC_SEQ_CST);
    {
        Arg a[] = {A64(arena)};
        CUresult r = launch("endless", 2, 64, a, 1, EPOCH);
        /* The epoch stays stale until the kernel is done (check synchronizes). */
        check("endless (stale epoch)", r, 0);
        __atomic_store_n(&ctl[0], EPOCH, __ATOMIC_SEQ_CST);
        expect_u32("endless (stale epoch)", 0, 0);
    }
    abort_test("endless", 0);
    abort_test("deep_spin", 1);
    free(gimg);
}

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : ".gpu/sandbox";
    CK(cuInit(0));
    CUdevice dev;
    CK(cuDeviceGet(&dev, 0));
    CUcontext ctx;
    CK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CK(cuCtxSetCurrent(ctx));
    DIR *d = opendir(dir);
    if (!d) {
        printf("FATAL cannot open %s\n", dir);
        return 2;
    }
    struct dirent *e;
    int loaded = 0;
    while ((e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name);
        if (n < 4 || strcmp(e->d_name + n - 4, ".ptx") != 0) continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        CUmodule m;
        if (jit(path, &m)) {
            loaded++;
            CK(cuModuleUnload(m));
        }
    }
    closedir(d);
    printf("JIT: %d rewritten modules loaded, %d failed\n", loaded, failures);
    redteam_suite(dir);
    printf("%s: %d failure(s)\n", failures ? "FAILED" : "ALL PASSED", failures);
    return failures ? 1 : 0;
}
