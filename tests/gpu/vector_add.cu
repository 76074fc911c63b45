// An unmodified CUDA program for the acceptance suite's LD_PRELOAD check: it knows nothing of
// fragless. It allocates with cudaMalloc, copies inputs in, adds them with a <<<>>> kernel,
// copies the result and an input back, frees, and prints what it saw. Exit status 0 means
// every CUDA call succeeded; "inputs intact" and "sum correct" are the data checks (on simcuda
// only the first can hold: its kernels do nothing).
#include <cuda_runtime.h>

#include <cstdio>
#include <vector>

__global__ void add(const float* a, const float* b, float* sum, int count) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < count) sum[i] = a[i] + b[i];
}

#define CHECK(call)                                                           \
  do {                                                                        \
    const cudaError_t status = (call);                                        \
    if (status != cudaSuccess) {                                              \
      std::printf("%s failed: %s\n", #call, cudaGetErrorString(status));      \
      return 1;                                                               \
    }                                                                         \
  } while (0)

int main() {
  const int count = 1 << 20;
  const size_t bytes = count * sizeof(float);
  std::vector<float> a(count), b(count), sum(count, -1.0f), back(count, 0.0f);
  for (int i = 0; i < count; ++i) {
    a[i] = static_cast<float>(i);
    b[i] = static_cast<float>(2 * i);
  }
  int rounds_intact = 0, rounds_correct = 0;
  const int rounds = 8;
  for (int round = 0; round < rounds; ++round) {  // repeated: freed memory gets reused
    float *device_a = nullptr, *device_b = nullptr, *device_sum = nullptr;
    CHECK(cudaMalloc(&device_a, bytes));
    CHECK(cudaMalloc(&device_b, bytes));
    CHECK(cudaMalloc(&device_sum, bytes));
    CHECK(cudaMemcpy(device_a, a.data(), bytes, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(device_b, b.data(), bytes, cudaMemcpyHostToDevice));
    add<<<(count + 255) / 256, 256>>>(device_a, device_b, device_sum, count);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaMemcpy(sum.data(), device_sum, bytes, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(back.data(), device_b, bytes, cudaMemcpyDeviceToHost));
    bool intact = true, correct = true;
    for (int i = 0; i < count; ++i) {
      intact = intact && back[i] == b[i];
      correct = correct && sum[i] == a[i] + b[i];
    }
    rounds_intact += intact ? 1 : 0;
    rounds_correct += correct ? 1 : 0;
    CHECK(cudaFree(device_sum));
    CHECK(cudaFree(device_b));
    CHECK(cudaFree(device_a));
  }
  std::printf("inputs intact: %d of %d\nsum correct: %d of %d\n", rounds_intact, rounds, rounds_correct, rounds);
  return 0;
}
