// noop: an empty kernel with one pointer and one scalar parameter, for launch-cost benchmarks
// and the misbehaving test guests.
extern "C" __global__ void noop(float *p, unsigned n) {
    if (n == 0xffffffffu) p[0] = 0.0f;
}
