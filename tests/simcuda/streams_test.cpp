// Streams, events and the race oracle on simcuda: pending simulated kernels, queries that
// answer not-ready, cudaStreamWaitEvent dependencies, the legacy default stream, modelled
// time, and races caught (planted) or not reported (ordered, same stream, reads only).
#include <cstdint>
#include <cstring>
#include <vector>

#include "simcuda_test_support.h"

using simcuda_test::race_report;
using simcuda_test::require_simcuda;

namespace {

struct Fixture {
  void* buffer = nullptr;
  cudaStream_t first = nullptr;
  cudaStream_t second = nullptr;
  Fixture() {
    require_simcuda();
    simcuda_complete_all();
    simcuda_race_reset();
    REQUIRE(cudaMalloc(&buffer, 1 << 20) == cudaSuccess);
    REQUIRE(cudaStreamCreateWithFlags(&first, cudaStreamNonBlocking) == cudaSuccess);
    REQUIRE(cudaStreamCreateWithFlags(&second, cudaStreamNonBlocking) == cudaSuccess);
  }
  ~Fixture() {
    simcuda_complete_all();
    cudaStreamDestroy(first);
    cudaStreamDestroy(second);
    cudaFree(buffer);
    simcuda_race_reset();
  }
  char* at(size_t offset) const { return static_cast<char*>(buffer) + offset; }
};

}  // namespace

TEST_CASE_METHOD(Fixture, "kernels stay pending until advanced or synchronized") {
  cudaEvent_t event = nullptr;
  REQUIRE(cudaEventCreate(&event) == cudaSuccess);
  CHECK(cudaEventQuery(event) == cudaSuccess);  // never recorded
  REQUIRE(simcuda_launch(first, at(0), 256, 1) != 0);
  REQUIRE(simcuda_launch(first, at(256), 256, 1) != 0);
  REQUIRE(cudaEventRecord(event, first) == cudaSuccess);
  CHECK(simcuda_pending(first) == 2);
  CHECK(cudaStreamQuery(first) == cudaErrorNotReady);
  CHECK(cudaEventQuery(event) == cudaErrorNotReady);
  CHECK(cudaGetLastError() == cudaSuccess);  // not-ready is not an error
  CHECK(simcuda_advance(first, 1) == 1);
  CHECK(cudaEventQuery(event) == cudaErrorNotReady);
  CHECK(simcuda_advance(first, 5) == 1);
  CHECK(cudaEventQuery(event) == cudaSuccess);
  CHECK(cudaStreamQuery(first) == cudaSuccess);

  REQUIRE(simcuda_launch(first, at(0), 16, 0) != 0);
  REQUIRE(cudaEventRecord(event, first) == cudaSuccess);
  REQUIRE(cudaEventSynchronize(event) == cudaSuccess);
  CHECK(simcuda_pending(first) == 0);
  REQUIRE(simcuda_launch(second, at(0), 16, 0) != 0);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  CHECK(simcuda_pending(reinterpret_cast<simcuda_stream>(-1)) == 0);
  REQUIRE(cudaEventDestroy(event) == cudaSuccess);
  CHECK(cudaEventDestroy(event) == cudaErrorInvalidResourceHandle);
  cudaGetLastError();
  CHECK(simcuda_race_count() == 0);
}

TEST_CASE_METHOD(Fixture, "the race oracle catches a planted race and names both kernels") {
  REQUIRE(simcuda_launch(first, at(0), 4096, 1) != 0);   // writes [0, 4096), pending
  REQUIRE(simcuda_launch(second, at(1024), 16, 0) != 0);  // reads inside it, not ordered
  CHECK(simcuda_race_count() == 1);
  std::string report = race_report();
  CHECK(report.find("race:") != std::string::npos);
  CHECK(report.find("writes") != std::string::npos);
  CHECK(report.find("reads") != std::string::npos);
  // The report is truncated to the buffer, and its full length is returned.
  char small[8];
  CHECK(simcuda_race_report(small, sizeof small) == report.size());
  CHECK(std::strlen(small) == sizeof small - 1);
  // Write after write races too; a later kernel on the same stream does not.
  REQUIRE(simcuda_launch(second, at(4000), 200, 1) != 0);
  CHECK(simcuda_race_count() == 2);
  // A new write on first overlaps both of second's pending kernels: two more races.
  REQUIRE(simcuda_launch(first, at(0), 4096, 1) != 0);
  CHECK(simcuda_race_count() == 4);
  simcuda_race_reset();
  CHECK(simcuda_race_count() == 0);
  CHECK(race_report().empty());
}

TEST_CASE_METHOD(Fixture, "ordered work does not race: events, same stream, reads, disjoint ranges") {
  // Same stream: ordered.
  REQUIRE(simcuda_launch(first, at(0), 4096, 1) != 0);
  REQUIRE(simcuda_launch(first, at(0), 4096, 1) != 0);
  // Reads never race with reads.
  REQUIRE(simcuda_launch(second, at(8192), 64, 0) != 0);
  REQUIRE(simcuda_launch(first, at(8192), 64, 0) != 0);
  // Disjoint ranges.
  REQUIRE(simcuda_launch(second, at(4096), 4096, 1) != 0);
  CHECK(simcuda_race_count() == 0);

  // An event dependency orders second after first.
  cudaEvent_t done = nullptr;
  REQUIRE(cudaEventCreateWithFlags(&done, cudaEventDisableTiming) == cudaSuccess);
  REQUIRE(cudaEventRecord(done, first) == cudaSuccess);
  REQUIRE(cudaStreamWaitEvent(second, done, 0) == cudaSuccess);
  REQUIRE(simcuda_launch(second, at(0), 4096, 1) != 0);
  CHECK(simcuda_race_count() == 0);
  // Completing the waiting kernel (second's third) completes what it depends on first.
  CHECK(simcuda_advance(second, 3) == 3);
  CHECK(simcuda_pending(first) == 0);
  CHECK(simcuda_pending(second) == 0);
  // Transitive: third waits on second, which waited on first.
  cudaStream_t third = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&third, cudaStreamNonBlocking) == cudaSuccess);
  REQUIRE(simcuda_launch(first, at(0), 64, 1) != 0);
  REQUIRE(cudaEventRecord(done, first) == cudaSuccess);
  REQUIRE(cudaStreamWaitEvent(second, done, 0) == cudaSuccess);
  REQUIRE(cudaEventRecord(done, second) == cudaSuccess);
  REQUIRE(cudaStreamWaitEvent(third, done, 0) == cudaSuccess);
  REQUIRE(simcuda_launch(third, at(0), 64, 1) != 0);
  CHECK(simcuda_race_count() == 0);
  REQUIRE(cudaStreamSynchronize(third) == cudaSuccess);
  CHECK(simcuda_pending(first) == 0);
  REQUIRE(cudaStreamDestroy(third) == cudaSuccess);
  REQUIRE(cudaEventDestroy(done) == cudaSuccess);
}

TEST_CASE_METHOD(Fixture, "async copies and memsets are accesses on their stream") {
  std::vector<char> host(64, 1);
  REQUIRE(cudaMemsetAsync(at(0), 0, 64, first) == cudaSuccess);
  REQUIRE(cudaMemcpyAsync(host.data(), at(32), 64, cudaMemcpyDeviceToHost, second) == cudaSuccess);
  CHECK(simcuda_race_count() == 1);
  simcuda_race_reset();
  REQUIRE(cudaStreamSynchronize(first) == cudaSuccess);
  REQUIRE(cudaMemcpyAsync(at(0), host.data(), 64, cudaMemcpyHostToDevice, first) == cudaSuccess);
  CHECK(simcuda_race_count() == 1);  // second's read of [32, 96) is still pending
}

TEST_CASE_METHOD(Fixture, "touching or freeing memory that is not allocated is reported") {
  void* scratch = nullptr;
  REQUIRE(cudaMalloc(&scratch, 4096) == cudaSuccess);
  REQUIRE(cudaFree(scratch) == cudaSuccess);
  REQUIRE(simcuda_launch(first, scratch, 16, 0) != 0);  // use after free
  CHECK(simcuda_race_count() == 1);
  CHECK(race_report().find("not allocated") != std::string::npos);
  simcuda_race_reset();
  REQUIRE(simcuda_launch(first, at((1 << 20) - 8), 16, 0) != 0);  // past the end
  CHECK(simcuda_race_count() == 1);
  simcuda_race_reset();

  // A stream-ordered free whose memory another stream still uses.
  void* shared = nullptr;
  REQUIRE(cudaMallocAsync(&shared, 4096, first) == cudaSuccess);
  REQUIRE(simcuda_launch(second, shared, 4096, 0) != 0);
  REQUIRE(cudaFreeAsync(shared, first) == cudaSuccess);
  REQUIRE(cudaStreamSynchronize(first) == cudaSuccess);  // the free happens: second still reads
  CHECK(simcuda_race_count() == 1);
  CHECK(race_report().find("free") != std::string::npos);
}

TEST_CASE_METHOD(Fixture, "a late fill lands when its kernel completes") {
  std::vector<unsigned char> host(256, 0);
  REQUIRE(cudaMemset(at(0), 0x01, 256) == cudaSuccess);
  REQUIRE(simcuda_launch_fill(first, at(0), 256, 0xEE) != 0);
  REQUIRE(cudaMemcpy(host.data(), at(0), 256, cudaMemcpyDeviceToHost) == cudaSuccess);
  CHECK(host[0] == 0x01);
  REQUIRE(cudaStreamSynchronize(first) == cudaSuccess);
  REQUIRE(cudaMemcpy(host.data(), at(0), 256, cudaMemcpyDeviceToHost) == cudaSuccess);
  CHECK(host[0] == 0xEE);
  CHECK(host[255] == 0xEE);
}

TEST_CASE_METHOD(Fixture, "the legacy default stream synchronizes with blocking streams only") {
  cudaStream_t blocking = nullptr;
  REQUIRE(cudaStreamCreate(&blocking) == cudaSuccess);
  unsigned int flags = 99;
  REQUIRE(cudaStreamGetFlags(blocking, &flags) == cudaSuccess);
  CHECK(flags == cudaStreamDefault);
  REQUIRE(simcuda_launch(blocking, at(0), 64, 1) != 0);
  REQUIRE(simcuda_launch(nullptr, at(0), 64, 1) != 0);  // waits for the blocking stream
  CHECK(simcuda_race_count() == 0);
  REQUIRE(simcuda_launch(blocking, at(0), 64, 1) != 0);  // waits for the legacy stream
  CHECK(simcuda_race_count() == 0);
  REQUIRE(simcuda_launch(first, at(0), 64, 1) != 0);  // non-blocking: races with all three
  CHECK(simcuda_race_count() == 3);
  simcuda_complete_all();
  simcuda_race_reset();
  // The per-thread default stream is a blocking stream of its own.
  REQUIRE(simcuda_launch(cudaStreamPerThread, at(0), 64, 1) != 0);
  REQUIRE(simcuda_launch(cudaStreamLegacy, at(0), 64, 0) != 0);
  CHECK(simcuda_race_count() == 0);
  REQUIRE(cudaStreamSynchronize(cudaStreamLegacy) == cudaSuccess);
  CHECK(simcuda_pending(cudaStreamPerThread) == 0);
  REQUIRE(cudaStreamDestroy(blocking) == cudaSuccess);
  CHECK(cudaStreamDestroy(nullptr) == cudaErrorInvalidResourceHandle);
  cudaGetLastError();
}

TEST_CASE_METHOD(Fixture, "elapsed time is modelled from the work between two events") {
  cudaEvent_t start = nullptr, stop = nullptr;
  REQUIRE(cudaEventCreate(&start) == cudaSuccess);
  REQUIRE(cudaEventCreate(&stop) == cudaSuccess);
  REQUIRE(cudaEventRecord(start, first) == cudaSuccess);
  for (int i = 0; i < 10; ++i) REQUIRE(simcuda_launch(first, at(0), 1 << 20, 1) != 0);
  REQUIRE(cudaEventRecord(stop, first) == cudaSuccess);
  float milliseconds = -1;
  CHECK(cudaEventElapsedTime(&milliseconds, start, stop) == cudaErrorNotReady);
  REQUIRE(cudaEventSynchronize(stop) == cudaSuccess);
  REQUIRE(cudaEventElapsedTime(&milliseconds, start, stop) == cudaSuccess);
  CHECK(milliseconds > 0.0f);
  float reverse = 0;
  REQUIRE(cudaEventElapsedTime(&reverse, stop, start) == cudaSuccess);
  CHECK(reverse == Approx(-milliseconds));
  cudaEvent_t untimed = nullptr;
  REQUIRE(cudaEventCreateWithFlags(&untimed, cudaEventDisableTiming) == cudaSuccess);
  REQUIRE(cudaEventRecord(untimed, first) == cudaSuccess);
  CHECK(cudaEventElapsedTime(&milliseconds, start, untimed) == cudaErrorInvalidResourceHandle);
  cudaGetLastError();
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaEventDestroy(untimed);
}

TEST_CASE_METHOD(Fixture, "auto-complete mode, real launches and stream attributes") {
  simcuda_set_auto_complete(1);
  REQUIRE(simcuda_launch(first, at(0), 64, 1) != 0);
  CHECK(simcuda_pending(first) == 0);
  REQUIRE(simcuda_launch(second, at(0), 64, 1) != 0);
  CHECK(simcuda_race_count() == 0);
  simcuda_set_auto_complete(0);
  REQUIRE(simcuda_launch(first, at(0), 64, 1) != 0);
  CHECK(simcuda_pending(first) == 1);
  CHECK(simcuda_launch(reinterpret_cast<cudaStream_t>(0x999), at(0), 64, 1) == 0);  // bad stream
  CHECK(simcuda_launch(second, nullptr, 0, 1) != 0);  // touches nothing: no race
  CHECK(simcuda_race_count() == 0);
  CHECK(simcuda_launch(second, at(0), SIZE_MAX, 0) != 0);  // absurd: reported, no crash
  CHECK(simcuda_race_count() >= 1);
  simcuda_complete_all();
  simcuda_race_reset();

  // A real kernel launch is accepted and completes at once.
  static int fake_kernel_symbol = 0;
  void* no_arguments[1] = {nullptr};
  CHECK(cudaLaunchKernel(&fake_kernel_symbol, dim3(1), dim3(32), no_arguments, 0, second) == cudaSuccess);
  CHECK(cudaStreamQuery(second) == cudaSuccess);

  int least = 0, greatest = 0;
  REQUIRE(cudaDeviceGetStreamPriorityRange(&least, &greatest) == cudaSuccess);
  CHECK(least == 0);
  CHECK(greatest < 0);
  cudaStream_t urgent = nullptr;
  REQUIRE(cudaStreamCreateWithPriority(&urgent, cudaStreamNonBlocking, greatest) == cudaSuccess);
  int priority = 0;
  REQUIRE(cudaStreamGetPriority(urgent, &priority) == cudaSuccess);
  CHECK(priority == greatest);
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusActive;
  REQUIRE(cudaStreamIsCapturing(urgent, &capture) == cudaSuccess);
  CHECK(capture == cudaStreamCaptureStatusNone);
  capture = cudaStreamCaptureStatusActive;
  REQUIRE(cudaStreamGetCaptureInfo(urgent, &capture) == cudaSuccess);
  CHECK(capture == cudaStreamCaptureStatusNone);
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  REQUIRE(cudaThreadExchangeStreamCaptureMode(&mode) == cudaSuccess);
  CHECK(mode == cudaStreamCaptureModeGlobal);
  REQUIRE(cudaThreadExchangeStreamCaptureMode(&mode) == cudaSuccess);
  REQUIRE(cudaStreamDestroy(urgent) == cudaSuccess);
}

// Declared by the CUDA compiler's generated host code (crt/host_runtime.h), not by the
// runtime API header.
extern "C" {
void** __cudaRegisterFatBinary(void* fat_cubin);
void __cudaRegisterFatBinaryEnd(void** handle);
void __cudaRegisterFunction(void** handle, const char* host_function, char* device_function, const char* name,
                            int thread_limit, uint3* tid, uint3* bid, dim3* block, dim3* grid, int* warp_size);
void __cudaUnregisterFatBinary(void** handle);
unsigned __cudaPushCallConfiguration(dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t stream);
cudaError_t __cudaPopCallConfiguration(dim3* grid, dim3* block, size_t* shared_bytes, void* stream);
}

TEST_CASE_METHOD(Fixture, "kernel registration and <<<>>> configuration are accepted") {
  static char fake_fat_binary[64] = {};
  void** module = __cudaRegisterFatBinary(fake_fat_binary);
  REQUIRE(module != nullptr);
  void** other = __cudaRegisterFatBinary(fake_fat_binary);
  CHECK(other != module);
  static int host_stub = 0;
  char device_name[] = "kernel";
  __cudaRegisterFunction(module, reinterpret_cast<const char*>(&host_stub), device_name, "kernel", -1, nullptr,
                         nullptr, nullptr, nullptr, nullptr);
  __cudaRegisterFatBinaryEnd(module);
  CHECK(__cudaPushCallConfiguration(dim3(4, 2), dim3(128), 256, first) == 0);
  dim3 grid, block;
  size_t shared_bytes = 0;
  cudaStream_t stream = nullptr;
  REQUIRE(__cudaPopCallConfiguration(&grid, &block, &shared_bytes, &stream) == cudaSuccess);
  CHECK(grid.x == 4);
  CHECK(grid.y == 2);
  CHECK(block.x == 128);
  CHECK(shared_bytes == 256);
  CHECK(stream == first);
  __cudaUnregisterFatBinary(module);
  __cudaUnregisterFatBinary(other);
}

TEST_CASE_METHOD(Fixture, "a stream that is never synchronized stays bounded") {
  for (int i = 0; i < 5000; ++i) REQUIRE(simcuda_launch(first, at(0), 64, 1) != 0);
  CHECK(simcuda_pending(first) <= 4096);
  CHECK(simcuda_pending(first) > 0);
  CHECK(simcuda_race_count() == 0);
}

extern "C" {
cudaError_t cudaMemsetAsync_ptsz(void* destination, int value, size_t bytes, cudaStream_t stream);
cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t stream);
cudaError_t cudaMemcpy_ptds(void* destination, const void* source, size_t bytes, cudaMemcpyKind kind);
}

TEST_CASE_METHOD(Fixture, "per-thread-default-stream variants use the thread's stream for stream 0") {
  simcuda_reset_counters();
  REQUIRE(simcuda_launch(cudaStreamPerThread, at(0), 64, 1) != 0);
  REQUIRE(cudaMemsetAsync_ptsz(at(0), 0x2A, 64, nullptr) == cudaSuccess);
  CHECK(simcuda_pending(cudaStreamPerThread) == 2);  // both on the per-thread stream
  CHECK(simcuda_race_count() == 0);
  REQUIRE(cudaStreamSynchronize_ptsz(nullptr) == cudaSuccess);
  CHECK(simcuda_pending(cudaStreamPerThread) == 0);
  unsigned char host[64] = {};
  REQUIRE(cudaMemcpy_ptds(host, at(0), sizeof host, cudaMemcpyDeviceToHost) == cudaSuccess);
  CHECK(host[63] == 0x2A);
  CHECK(simcuda_call_count("cudaMemsetAsync_ptsz") == 1);
  CHECK(simcuda_call_count("cudaMemsetAsync") == 0);
}

namespace {

struct CallbackLog {
  std::vector<int> order;
  int pending_seen_inside = -1;
};

void record_host_function(void* user_data) {
  auto* log = static_cast<CallbackLog*>(user_data);
  log->order.push_back(static_cast<int>(log->order.size()));
  // Callbacks run outside simcuda's lock: calling CUDA from one works.
  int device = -1;
  if (cudaGetDevice(&device) != cudaSuccess) log->order.push_back(-100);
  log->pending_seen_inside = static_cast<int>(simcuda_pending(reinterpret_cast<simcuda_stream>(-1)));
}

void record_stream_callback(cudaStream_t, cudaError_t status, void* user_data) {
  auto* log = static_cast<CallbackLog*>(user_data);
  log->order.push_back(status == cudaSuccess ? 1000 : -1000);
}

}  // namespace

TEST_CASE_METHOD(Fixture, "host functions and stream callbacks run when the stream reaches them") {
  CallbackLog log;
  REQUIRE(simcuda_launch(first, at(0), 64, 1) != 0);
  REQUIRE(cudaLaunchHostFunc(first, record_host_function, &log) == cudaSuccess);
  REQUIRE(cudaStreamAddCallback(first, record_stream_callback, &log, 0) == cudaSuccess);
  REQUIRE(simcuda_launch(first, at(0), 64, 1) != 0);
  CHECK(log.order.empty());  // nothing ran yet
  CHECK(simcuda_advance(first, 1) == 1);
  CHECK(log.order.empty());
  CHECK(simcuda_advance(first, 1) == 1);
  REQUIRE(log.order.size() == 1);
  CHECK(log.pending_seen_inside == 2);
  REQUIRE(cudaStreamSynchronize(first) == cudaSuccess);
  REQUIRE(log.order.size() == 2);
  CHECK(log.order[1] == 1000);
  CHECK(cudaLaunchHostFunc(first, nullptr, nullptr) == cudaErrorInvalidValue);
  cudaGetLastError();
}

// Note [Destroyed streams]: cudaStreamDestroy returns at once; the work stays pending.
TEST_CASE_METHOD(Fixture, "a destroyed stream's pending work stays pending and is still checked") {
  simcuda_set_auto_complete(0);
  cudaStream_t dying = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&dying, cudaStreamNonBlocking) == cudaSuccess);
  REQUIRE(simcuda_launch(dying, at(0), 4096, 1) != 0);
  cudaEvent_t before_destroy = nullptr;
  REQUIRE(cudaEventCreate(&before_destroy) == cudaSuccess);
  REQUIRE(cudaEventRecord(before_destroy, dying) == cudaSuccess);
  REQUIRE(cudaStreamDestroy(dying) == cudaSuccess);
  CHECK(simcuda_pending(reinterpret_cast<void*>(-1)) == 1);
  CHECK(cudaStreamQuery(dying) == cudaErrorInvalidResourceHandle);
  cudaGetLastError();
  CHECK(cudaEventQuery(before_destroy) == cudaErrorNotReady);
  cudaGetLastError();
  // Unordered work on another stream races with it...
  REQUIRE(simcuda_launch(second, at(0), 4096, 1) != 0);
  CHECK(simcuda_race_count() == 1);
  simcuda_race_reset();
  // ...work ordered after an event recorded before the destroy does not, and waits for it.
  REQUIRE(cudaStreamSynchronize(second) == cudaSuccess);
  REQUIRE(cudaStreamWaitEvent(first, before_destroy, 0) == cudaSuccess);
  REQUIRE(simcuda_launch(first, at(0), 4096, 1) != 0);
  CHECK(simcuda_race_count() == 0);
  REQUIRE(cudaStreamSynchronize(first) == cudaSuccess);
  CHECK(cudaEventQuery(before_destroy) == cudaSuccess);
  // A new stream may receive the dead handle; it starts with nothing pending.
  std::vector<cudaStream_t> created;
  for (int i = 0; i < 8; ++i) {
    cudaStream_t stream = nullptr;
    REQUIRE(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess);
    CHECK(simcuda_pending(stream) == 0);
    created.push_back(stream);
  }
  for (cudaStream_t stream : created) REQUIRE(cudaStreamDestroy(stream) == cudaSuccess);
  REQUIRE(cudaEventDestroy(before_destroy) == cudaSuccess);
  simcuda_complete_all();
  CHECK(simcuda_pending(reinterpret_cast<void*>(-1)) == 0);
}

extern "C" {
cudaError_t __cudaGetKernel(cudaKernel_t* kernel, const void* function);
cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 grid, dim3 block, void** arguments, size_t shared_bytes,
                               cudaStream_t stream);
cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 grid, dim3 block, void** arguments, size_t shared_bytes,
                                    cudaStream_t stream);
}

// Note [Kernel launch entry points]: what nvcc's <<<>>> compiles to since CUDA 12.
TEST_CASE_METHOD(Fixture, "the <<<>>> launch path (__cudaGetKernel, __cudaLaunchKernel) launches on the stream") {
  static int host_stub = 0;
  cudaKernel_t kernel = nullptr;
  REQUIRE(__cudaGetKernel(&kernel, &host_stub) == cudaSuccess);
  CHECK(kernel != nullptr);
  CHECK(__cudaGetKernel(nullptr, &host_stub) == cudaErrorInvalidValue);
  cudaGetLastError();
  void* no_arguments[1] = {nullptr};
  CHECK(__cudaLaunchKernel(kernel, dim3(1), dim3(32), no_arguments, 0, first) == cudaSuccess);
  CHECK(__cudaLaunchKernel_ptsz(kernel, dim3(1), dim3(32), no_arguments, 0, nullptr) == cudaSuccess);
  CHECK(cudaStreamQuery(first) == cudaSuccess);
  CHECK(simcuda_call_count("__cudaLaunchKernel") >= 1);
  CHECK(__cudaLaunchKernel(nullptr, dim3(1), dim3(1), no_arguments, 0, first) == cudaErrorInvalidDeviceFunction);
  cudaGetLastError();
}
