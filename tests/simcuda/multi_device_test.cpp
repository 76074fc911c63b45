// Two simulated devices (SIMCUDA_DEVICES=2 in this test's ENV): separate current devices,
// memory, capacity accounting and streams; peer copies; invalid ordinals refused.
#include <dlfcn.h>

#include <vector>

#include "simcuda_test_support.h"

using simcuda_test::require_simcuda;

TEST_CASE("two devices with their own memory and streams") {
  require_simcuda();
  int count = 0;
  REQUIRE(cudaGetDeviceCount(&count) == cudaSuccess);
  REQUIRE(count == 2);
  CHECK(cudaSetDevice(2) == cudaErrorInvalidDevice);
  CHECK(cudaSetDevice(-1) == cudaErrorInvalidDevice);
  cudaGetLastError();

  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  void* on_zero = nullptr;
  REQUIRE(cudaMalloc(&on_zero, 1 << 20) == cudaSuccess);
  REQUIRE(cudaSetDevice(1) == cudaSuccess);
  int device = -1;
  REQUIRE(cudaGetDevice(&device) == cudaSuccess);
  CHECK(device == 1);
  const uint64_t used_zero = simcuda_used_bytes(0);
  void* on_one = nullptr;
  REQUIRE(cudaMalloc(&on_one, 1 << 20) == cudaSuccess);
  CHECK(simcuda_used_bytes(1) >= (1u << 20));
  CHECK(simcuda_used_bytes(0) == used_zero);

  cudaPointerAttributes attributes{};
  REQUIRE(cudaPointerGetAttributes(&attributes, on_one) == cudaSuccess);
  CHECK(attributes.device == 1);
  REQUIRE(cudaPointerGetAttributes(&attributes, on_zero) == cudaSuccess);
  CHECK(attributes.device == 0);

  int can_access = 0;
  REQUIRE(cudaDeviceCanAccessPeer(&can_access, 1, 0) == cudaSuccess);
  CHECK(can_access == 1);
  REQUIRE(cudaDeviceEnablePeerAccess(0, 0) == cudaSuccess);
  CHECK(cudaDeviceEnablePeerAccess(0, 0) == cudaErrorPeerAccessAlreadyEnabled);
  cudaGetLastError();

  std::vector<unsigned char> host(4096, 0x42), back(4096, 0);
  REQUIRE(cudaMemcpy(on_zero, host.data(), host.size(), cudaMemcpyHostToDevice) == cudaSuccess);
  cudaStream_t stream = nullptr;
  REQUIRE(cudaStreamCreate(&stream) == cudaSuccess);
  int stream_device = -1;
  REQUIRE(cudaStreamGetDevice(stream, &stream_device) == cudaSuccess);
  CHECK(stream_device == 1);
  REQUIRE(cudaMemcpyPeerAsync(on_one, 1, on_zero, 0, host.size(), stream) == cudaSuccess);
  REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
  REQUIRE(cudaMemcpy(back.data(), on_one, back.size(), cudaMemcpyDeviceToHost) == cudaSuccess);
  CHECK(back == host);

  // Each device has its own legacy stream.
  REQUIRE(simcuda_launch(nullptr, on_one, 64, 1) != 0);
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  CHECK(simcuda_pending(nullptr) == 0);
  REQUIRE(cudaSetDevice(1) == cudaSuccess);
  CHECK(simcuda_pending(nullptr) == 1);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  CHECK(simcuda_pending(nullptr) == 0);

  REQUIRE(cudaStreamDestroy(stream) == cudaSuccess);
  REQUIRE(cudaFree(on_one) == cudaSuccess);
  REQUIRE(cudaFree(on_zero) == cudaSuccess);  // any device's pointer can be freed
  CHECK(simcuda_race_count() == 0);
}

TEST_CASE("the second device's capacity and VMM handles are its own") {
  require_simcuda();
  REQUIRE(simcuda_set_capacity(1, 8u << 20) == 0);
  CHECK(simcuda_capacity(1) == (8u << 20));
  CHECK(simcuda_capacity(0) != (8u << 20));
  CHECK(simcuda_set_capacity(5, 1) == -1);
  CUmemAllocationProp properties{};
  properties.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  properties.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  properties.location.id = 1;
  CUmemGenericAllocationHandle handle = 0;
  REQUIRE(cuMemCreate(&handle, 4u << 20, &properties, 0) == CUDA_SUCCESS);
  CHECK(simcuda_used_bytes(1) == (4u << 20));
  CUmemGenericAllocationHandle too_much = 0;
  CHECK(cuMemCreate(&too_much, 6u << 20, &properties, 0) == CUDA_ERROR_OUT_OF_MEMORY);
  REQUIRE(cuMemRelease(handle) == CUDA_SUCCESS);
  CHECK(simcuda_used_bytes(1) == 0);
}

TEST_CASE("the NVML stand-in finds each device by its PCI bus id") {
  require_simcuda();
  void* nvml = dlopen("libnvidia-ml.so.1", RTLD_NOW);
  REQUIRE(nvml != nullptr);
  auto init = reinterpret_cast<int (*)()>(dlsym(nvml, "nvmlInit_v2"));
  auto by_bus_id = reinterpret_cast<int (*)(const char*, void**)>(dlsym(nvml, "nvmlDeviceGetHandleByPciBusId_v2"));
  auto count = reinterpret_cast<int (*)(unsigned*)>(dlsym(nvml, "nvmlDeviceGetCount_v2"));
  REQUIRE(init != nullptr);
  REQUIRE(by_bus_id != nullptr);
  REQUIRE(count != nullptr);
  REQUIRE(init() == 0);
  unsigned devices = 0;
  REQUIRE(count(&devices) == 0);
  CHECK(devices == 2);
  void* handles[2] = {};
  for (int device = 0; device < 2; ++device) {
    char bus_id[32] = {};
    REQUIRE(cudaDeviceGetPCIBusId(bus_id, sizeof bus_id, device) == cudaSuccess);
    REQUIRE(by_bus_id(bus_id, &handles[device]) == 0);
    CHECK(handles[device] != nullptr);
  }
  CHECK(handles[0] != handles[1]);
  void* none = nullptr;
  CHECK(by_bus_id("0000:07:00.0", &none) != 0);
  CHECK(simcuda_call_count("nvmlInit_v2") >= 1);
  dlclose(nvml);
}
