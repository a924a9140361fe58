// Copy speed of 64 MiB from 4 KiB-paged vs huge-page-advised (MADV_HUGEPAGE) source memory, 1 and
// 12 threads: whether the guest write's staging (#12) could gain from advising guest memory.
// Build here: g++ -O2 -static -pthread -o .gpu/thp scripts/probes/thp-copy.cpp; run .gpu/thp there.
#include <sys/mman.h>
#include <cstring>
#include <cstdio>
#include <chrono>
#include <thread>
#include <vector>
#include <algorithm>
static double run(char* src, char* dst, size_t n, int threads) {
  auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> ts;
  size_t per = n / threads;
  for (int i = 0; i < threads; i++) ts.emplace_back([=] { memcpy(dst + i * per, src + i * per, per); });
  for (auto& t : ts) t.join();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}
int main() {
  size_t n = 64ull << 20, al = 2ull << 20;
  for (int huge = 0; huge < 2; huge++) {
    char* raw = (char*)mmap(nullptr, n + al, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    char* src = (char*)(((uintptr_t)raw + al - 1) & ~(al - 1));
    if (huge) madvise(src, n, MADV_HUGEPAGE); else madvise(src, n, MADV_NOHUGEPAGE);
    memset(src, 1, n);
    char* dst = (char*)mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    memset(dst, 0, n);
    for (int threads : {1, 12}) {
      std::vector<double> v;
      for (int r = 0; r < 15; r++) v.push_back(run(src, dst, n, threads));
      std::sort(v.begin(), v.end());
      printf("src %s, %2d threads: 64 MiB copy median %.2f ms (%.1f GB/s)\n", huge ? "MADV_HUGEPAGE  " : "MADV_NOHUGEPAGE", threads, v[7], n / v[7] / 1e6);
    }
  }
}
