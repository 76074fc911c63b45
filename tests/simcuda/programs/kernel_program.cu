// A plain CUDA program with a kernel, compiled by nvcc in the simcuda tests
// (nvcc_program_test.cmake): built with -cudart shared it must run on simcuda; built with the
// static runtime (nvcc's default) simcuda must say, in one line, to rebuild it.
#include <cstdio>
__global__ void fill(int* data, int value) { data[threadIdx.x] = value; }
int main() {
  int* data = nullptr;
  if (cudaMalloc(&data, 256 * sizeof(int)) != cudaSuccess) { std::printf("malloc failed\n"); return 1; }
  fill<<<1, 256>>>(data, 7);
  cudaError_t launched = cudaGetLastError();
  cudaError_t synced = cudaDeviceSynchronize();
  std::printf("launch: %s, sync: %s\n", cudaGetErrorName(launched), cudaGetErrorName(synced));
  cudaFree(data);
  return launched == cudaSuccess && synced == cudaSuccess ? 0 : 1;
}
