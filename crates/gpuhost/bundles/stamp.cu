// Test and bench kernels of the stamp bundles. TAG (set per bundle by gen.sh) makes the two
// versions' results distinguishable: out[i] = TAG + i.
extern "C" __global__ void stamp(unsigned *out, unsigned n) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = TAG + i;
}

// The trivial kernel the launch benchmarks time (one parameter, does nothing observable).
extern "C" __global__ void noop(unsigned n) {}

// Fault injection: writes through whatever pointer it is given.
extern "C" __global__ void poke(unsigned *p, unsigned v) { *p = v; }

// Mixed parameter sizes and alignment, for checking parameter layout both ways.
extern "C" __global__ void mixed(unsigned char a, double b, unsigned short c, unsigned *out) {
  if (threadIdx.x == 0) out[0] = (unsigned)a + (unsigned)b + (unsigned)c;
}
