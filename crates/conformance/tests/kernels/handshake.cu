// Two launches of this kernel on two streams can both report `met` only if they run at the same
// time: each raises its own flag, then waits (a bounded number of volatile reads, so a driver
// that serialises them ends instead of hanging) for the other's.
extern "C" __global__ void handshake(volatile int *mine, volatile int *theirs, int *met,
                                     long long spins) {
    if (threadIdx.x == 0 && blockIdx.x == 0) {
        *mine = 1;
        asm volatile("membar.sys;" ::: "memory");
        long long i = 0;
        while (*theirs == 0 && i < spins) {
            i++;
        }
        *met = *theirs != 0;
    }
}
