// mbarrier_pipeline: y[i] = a * x[i] + x[m], m the mirror of i in its 512-element tile (the
// tile's last element for its first, and so on; 0 where the mirror lies past n), with x
// streamed through shared memory by a warp-specialised pipeline of the kind CUTLASS's sm_90
// mainloops build (there with TMA copies, here with sm_80's cp.async, as cuda::pipeline does):
// warp 0 produces, the block's other warps consume, over a ring of 4 stages, each with a `full`
// and an `empty` mbarrier. Blocks take tiles grid-stride.
//
// - The producer warp fills a stage with 16-byte cp.async.cg copies (zero-filling past n) and
//   signals it by cp.async.mbarrier.arrive.noinc on its `full` barrier; before refilling a stage
//   it waits on the stage's `empty` barrier for the consumers to be done with it.
// - Each consumer waits on `full`, computes its elements of the tile (the mirror makes every
//   output depend on words another lane copied, at the tile's other end), and arrives on
//   `empty`.
// Waits go by the state an arrival returns (test_wait.parity needs PTX 7.1; clang 14 writes
// 7.0), so each side also arrives on the barrier it waits on, just before waiting, and every
// barrier expects the whole block: 32 producer lanes and blockDim.x - 32 consumers.
//
// The roles split the block by whole warps, so every spin-wait is warp-uniform: no lane waits
// on progress another lane of its own warp has to make. Correctness then does not rest on
// independent thread scheduling (sm_70+), and ptxvm, whose SIMT stack runs one side of a
// divergent branch to its end before the other, does not hang on it.
//
// blockDim.x must be a multiple of 32, at least 64; other blocks do nothing.
#include "compat.h"

#define PIPE_STAGES 4
#define PIPE_TILE 512  // floats: 2 KiB a stage, 128 copies of 16 bytes

extern "C" __global__ void mbarrier_pipeline(const float *__restrict__ x, float *__restrict__ y, float a,
                                             int n) {
    __shared__ __align__(16) float stage[PIPE_STAGES][PIPE_TILE];
    __shared__ __align__(8) unsigned long long full[PIPE_STAGES], empty[PIPE_STAGES];
    if (blockDim.x % 32 != 0 || blockDim.x < 64) return;
    if (threadIdx.x == 0) {
        for (int s = 0; s < PIPE_STAGES; ++s) {
            mbar_init(smem_u32(&full[s]), blockDim.x);
            mbar_init(smem_u32(&empty[s]), blockDim.x);
        }
    }
    __syncthreads();
    int tiles = (n + PIPE_TILE - 1) / PIPE_TILE;
    if (threadIdx.x < 32) {
        int lane = threadIdx.x;
        for (int t = blockIdx.x, j = 0; t < tiles; t += gridDim.x, ++j) {
            int s = j % PIPE_STAGES;
            // The ring's first lap finds every stage empty; later laps wait for the consumers
            // of the tile PIPE_STAGES back.
            if (j >= PIPE_STAGES) mbar_wait(smem_u32(&empty[s]), mbar_arrive(smem_u32(&empty[s])));
            unsigned dst = smem_u32(&stage[s][0]);
            for (int k = lane; k < PIPE_TILE / 4; k += 32) {
                long i = (long)t * PIPE_TILE + 4 * k;
                long left = (long)n - i;
                unsigned bytes = left >= 4 ? 16u : left > 0 ? (unsigned)left * 4u : 0u;
                // A copy that reads nothing still names a valid address, as CUTLASS's
                // predicated-off copies do.
                cp_async_cg16_zfill(dst + 16 * k, bytes != 0 ? x + i : x, bytes);
            }
            cp_async_mbar_arrive_noinc(smem_u32(&full[s]));
        }
    } else {
        int c = threadIdx.x - 32, consumers = blockDim.x - 32;
        for (int t = blockIdx.x, j = 0; t < tiles; t += gridDim.x, ++j) {
            int s = j % PIPE_STAGES;
            mbar_wait(smem_u32(&full[s]), mbar_arrive(smem_u32(&full[s])));
            const float *tile = stage[s];
            for (int e = c; e < PIPE_TILE; e += consumers) {
                long i = (long)t * PIPE_TILE + e;
                if (i < n) y[i] = a * tile[e] + tile[PIPE_TILE - 1 - e];
            }
            mbar_arrive(smem_u32(&empty[s]));
        }
    }
    // The producer's last copies, and the arrivals they trigger, are still in flight when its
    // loop ends; it stays until the consumers have them rather than exit first (the ISA does
    // not say that a copy's arrival outlives its thread).
    __syncthreads();
}
