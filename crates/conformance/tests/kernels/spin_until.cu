// A kernel that spins on a device word until the host's stream write (cuStreamWriteValue32 on
// another stream) lands: how a host stops a kernel that would otherwise run forever. It first
// raises `started` so the test can order its write after the kernel is running, then reads
// `flag` (volatile: a fresh load each pass) until it equals `want`, at most `spins` passes, so a
// driver whose write never lands ends the test instead of hanging it. `seen` says which ended it.
extern "C" __global__ void spin_until(volatile unsigned *flag, unsigned want,
                                      volatile unsigned *started, unsigned *seen,
                                      long long spins) {
    if (threadIdx.x == 0 && blockIdx.x == 0) {
        *started = 1;
        asm volatile("membar.sys;" ::: "memory");
        long long i = 0;
        while (*flag != want && i < spins) {
            i++;
        }
        *seen = *flag == want;
    }
}
