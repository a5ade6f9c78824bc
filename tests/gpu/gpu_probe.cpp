// Exits 0 when a CUDA device is present, 77 (CTest's skip code for the gpu tests) when not.
#include <cstdio>

#include "mlaplan_kernels/kernels.hpp"

int main() {
  const int n = mlaplan::kernels::device_count();
  if (n == 0) {
    std::puts("no CUDA device: skipping the GPU tests");
    return 77;
  }
  std::printf("%d CUDA device(s)\n", n);
  return 0;
}
