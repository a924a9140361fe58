// Which mbarrier operations on which shared words poison a context on NVIDIA (issue #9).
//
// Session 37's run of conformance's mbarrier_words (one kernel doing every operation on
// garbage words at once) ended in CUDA_ERROR_LAUNCH_FAILED and a dead context, so the sandbox
// keeps refusing mbarrier. This probe says which operation on which word does it, the rule
// ptxvm must model for softcuda to fail where NVIDIA fails: one thread sets a shared word up
// (a pattern, or a barrier made by mbarrier.init), runs one operation on it, and the case runs
// in a process of its own (a fork) so that a fault costs only that case. Each case reports the
// launch's result and whether the context then runs a plain kernel and a copy.
//
// Build and run on the GPU machine:
//   nvcc -O2 -o /tmp/mbarrier-probe scripts/probes/mbarrier-probe.cu -lcuda && /tmp/mbarrier-probe
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

struct Setup {
    const char* name;
    const char* ptx;
};

// What thread 0 leaves in the word `w` before the operation.
static const Setup SETUPS[] = {
    {"zero", "st.shared.u64 [w], 0;"},
    {"ones", "st.shared.u64 [w], -1;"},
    {"five", "st.shared.u64 [w], 5;"},
    {"bytes", "st.shared.u64 [w], 506381209866536711;"},  // 0x0707070707070707
    {"init1", "mbarrier.init.shared.b64 [w], 1;"},
    {"init2", "mbarrier.init.shared.b64 [w], 2;"},
    {"inval'd", "mbarrier.init.shared.b64 [w], 1; mbarrier.inval.shared.b64 [w];"},
};

// The one operation thread 0 runs on it (the state operand of the waits is 0).
static const Setup OPS[] = {
    {"none", ""},
    {"arrive", "mbarrier.arrive.shared.b64 %st, [w];"},
    {"arrive.3", "mbarrier.arrive.shared.b64 %st, [w], 3;"},
    {"noComplete.1", "mbarrier.arrive.noComplete.shared.b64 %st, [w], 1;"},
    {"arrive_drop", "mbarrier.arrive_drop.shared.b64 %st, [w];"},
    {"test_wait", "mbarrier.test_wait.shared.b64 %p1, [w], %st;"},
    {"try_wait.parity", "mbarrier.try_wait.parity.shared.b64 %p1, [w], 0;"},
    {"inval", "mbarrier.inval.shared.b64 [w];"},
    {"expect_tx", "mbarrier.expect_tx.shared.b64 [w], 16;"},
    {"arrive x2", "mbarrier.arrive.shared.b64 %st, [w]; mbarrier.arrive.shared.b64 %st, [w];"},
};

static const char* PLAIN =
    ".version 8.0\n.target sm_90\n.address_size 64\n"
    ".visible .entry plain(.param .u64 out)\n{\n .reg .b64 %rd<2>;\n .reg .b32 %r<2>;\n"
    " ld.param.u64 %rd1, [out];\n mov.u32 %r1, 7;\n st.global.u32 [%rd1], %r1;\n ret;\n}\n";

static char* kernel(const Setup& setup, const Setup& op) {
    static char buf[4096];
    snprintf(buf, sizeof buf,
             ".version 8.0\n.target sm_90\n.address_size 64\n"
             ".visible .entry probe(.param .u64 out)\n{\n"
             " .shared .align 8 .b64 w;\n .reg .pred %%p<2>;\n .reg .b32 %%r<2>;\n"
             " .reg .b64 %%rd<2>;\n .reg .b64 %%st;\n"
             " mov.u64 %%st, 0;\n mov.u32 %%r1, %%tid.x;\n setp.ne.u32 %%p0, %%r1, 0;\n"
             " @%%p0 bra DONE;\n %s\n %s\n ld.param.u64 %%rd1, [out];\n"
             " st.global.u64 [%%rd1], %%st;\nDONE:\n ret;\n}\n",
             setup.ptx, op.ptx);
    return buf;
}

#define TRY(call)                            \
    do {                                     \
        CUresult r_ = (call);                \
        if (r_ != CUDA_SUCCESS) return r_;   \
    } while (0)

// Runs `ptx`'s one kernel (1 block of 32) and returns the first failing step's code.
static CUresult launch(CUmodule* m, const char* ptx, const char* name, CUdeviceptr out) {
    CUfunction f;
    TRY(cuModuleLoadData(m, ptx));
    TRY(cuModuleGetFunction(&f, *m, name));
    void* args[] = {&out};
    TRY(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, 0, args, 0));
    return cuCtxSynchronize();
}

// The child: the case's launch, then a plain kernel and a copy; prints one line.
static int child(const Setup& setup, const Setup& op) {
    CUdevice dev;
    CUcontext ctx;
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) ||
        cuCtxSetCurrent(ctx)) {
        printf("setup failed\n");
        return 2;
    }
    CUdeviceptr out;
    if (cuMemAlloc(&out, 64)) return 2;
    CUmodule m1, m2;
    CUresult first = launch(&m1, kernel(setup, op), "probe", out);
    CUresult after = launch(&m2, PLAIN, "plain", out);
    unsigned value = 0;
    CUresult copy = cuMemcpyDtoH(&value, out, 4);
    const char *a, *b, *c;
    cuGetErrorName(first, &a);
    cuGetErrorName(after, &b);
    cuGetErrorName(copy, &c);
    bool usable = after == CUDA_SUCCESS && copy == CUDA_SUCCESS && value == 7;
    printf("| %-8s | %-16s | %-28s | %s |\n", setup.name, op.name, a,
           usable ? "usable" : b);
    return 0;
}

int main() {
    printf("| word | operation | the launch | the context after |\n|---|---|---|---|\n");
    fflush(stdout);
    for (const Setup& setup : SETUPS) {
        for (const Setup& op : OPS) {
            pid_t pid = fork();
            if (pid == 0) {
                alarm(15);  // a case that hangs the GPU ends as a signal, not the probe
                int rc = child(setup, op);
                fflush(stdout);
                _exit(rc);
            }
            int status = 0;
            waitpid(pid, &status, 0);
            if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
                printf("| %s | %s | child ended with status %d | |\n", setup.name, op.name, status);
            fflush(stdout);
        }
    }
    return 0;
}
