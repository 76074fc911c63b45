// Stream capture and CUDA graphs on simcuda (Note [Stream capture]): captured work runs only
// at replay, every replay; captures have unique ids; captured events cannot be queried;
// unsafe calls invalidate a capture unless the thread is relaxed; forks must be joined;
// a capturing stream may not wait on outside work; the legacy stream cannot capture.
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "simcuda_test_support.h"

using simcuda_test::require_simcuda;

namespace {

struct Fixture {
  unsigned char* buffer = nullptr;
  cudaStream_t stream = nullptr;
  cudaStream_t side = nullptr;
  Fixture() {
    require_simcuda();
    REQUIRE(cudaMalloc(reinterpret_cast<void**>(&buffer), 1 << 20) == cudaSuccess);
    REQUIRE(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess);
    REQUIRE(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking) == cudaSuccess);
    REQUIRE(cudaMemset(buffer, 0, 1 << 20) == cudaSuccess);
  }
  ~Fixture() {
    cudaDeviceSynchronize();
    cudaStreamDestroy(stream);
    cudaStreamDestroy(side);
    cudaFree(buffer);
  }
};

}  // namespace

TEST_CASE_METHOD(Fixture, "captured work runs at each replay, not at capture") {
  REQUIRE(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal) == cudaSuccess);
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  unsigned long long first_id = 0;
  REQUIRE(cudaStreamGetCaptureInfo(stream, &status, &first_id, nullptr, nullptr, nullptr, nullptr) == cudaSuccess);
  CHECK(status == cudaStreamCaptureStatusActive);
  CHECK(first_id != 0);
  REQUIRE(cudaMemsetAsync(buffer, 7, 4096, stream) == cudaSuccess);
  REQUIRE(cudaMemcpyAsync(buffer + 8192, buffer, 4096, cudaMemcpyDeviceToDevice, stream) == cudaSuccess);
  CHECK(buffer[0] == 0);     // nothing ran
  CHECK(buffer[8192] == 0);
  cudaGraph_t graph = nullptr;
  REQUIRE(cudaStreamEndCapture(stream, &graph) == cudaSuccess);
  REQUIRE(graph != nullptr);
  REQUIRE(cudaStreamIsCapturing(stream, &status) == cudaSuccess);
  CHECK(status == cudaStreamCaptureStatusNone);
  size_t nodes = 0;
  REQUIRE(cudaGraphGetNodes(graph, nullptr, &nodes) == cudaSuccess);
  CHECK(nodes == 2);
  cudaGraphExec_t exec = nullptr;
  REQUIRE(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);
  for (int replay = 0; replay < 2; ++replay) {
    std::memset(buffer, 0, 16384);
    REQUIRE(cudaGraphLaunch(exec, stream) == cudaSuccess);
    REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
    CHECK(buffer[0] == 7);
    CHECK(buffer[4095] == 7);
    CHECK(buffer[8192] == 7);  // the copy ran after the memset, in order
    CHECK(buffer[4096] == 0);
  }
  // A second capture gets another id.
  REQUIRE(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal) == cudaSuccess);
  unsigned long long second_id = 0;
  REQUIRE(cudaStreamGetCaptureInfo(stream, &status, &second_id, nullptr, nullptr, nullptr, nullptr) == cudaSuccess);
  CHECK(second_id != first_id);
  cudaGraph_t empty = nullptr;
  REQUIRE(cudaStreamEndCapture(stream, &empty) == cudaSuccess);
  CHECK(cudaGraphExecDestroy(exec) == cudaSuccess);
  CHECK(cudaGraphExecDestroy(exec) != cudaSuccess);
  CHECK(cudaGraphDestroy(graph) == cudaSuccess);
  CHECK(cudaGraphDestroy(empty) == cudaSuccess);
}

TEST_CASE_METHOD(Fixture, "captured events cannot be queried; unsafe calls invalidate unless relaxed") {
  cudaEvent_t event = nullptr;
  REQUIRE(cudaEventCreateWithFlags(&event, cudaEventDisableTiming) == cudaSuccess);
  REQUIRE(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal) == cudaSuccess);
  REQUIRE(cudaEventRecord(event, stream) == cudaSuccess);
  CHECK(cudaEventQuery(event) == cudaErrorCapturedEvent);
  // A relaxed thread may allocate; the capture survives.
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  REQUIRE(cudaThreadExchangeStreamCaptureMode(&mode) == cudaSuccess);
  void* relaxed = nullptr;
  CHECK(cudaMalloc(&relaxed, 4096) == cudaSuccess);
  REQUIRE(cudaThreadExchangeStreamCaptureMode(&mode) == cudaSuccess);
  CHECK(mode == cudaStreamCaptureModeRelaxed);
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  REQUIRE(cudaStreamIsCapturing(stream, &status) == cudaSuccess);
  CHECK(status == cudaStreamCaptureStatusActive);
  // The same call in global mode is refused and invalidates the capture.
  void* refused = nullptr;
  CHECK(cudaMalloc(&refused, 4096) == cudaErrorStreamCaptureUnsupported);
  (void)cudaGetLastError();
  REQUIRE(cudaStreamIsCapturing(stream, &status) == cudaSuccess);
  CHECK(status == cudaStreamCaptureStatusInvalidated);
  cudaGraph_t graph = reinterpret_cast<cudaGraph_t>(1);
  CHECK(cudaStreamEndCapture(stream, &graph) == cudaErrorStreamCaptureInvalidated);
  (void)cudaGetLastError();
  CHECK(graph == nullptr);
  // Recorded again outside a capture, the event is an ordinary event.
  REQUIRE(cudaEventRecord(event, stream) == cudaSuccess);
  REQUIRE(cudaEventSynchronize(event) == cudaSuccess);
  CHECK(cudaFree(relaxed) == cudaSuccess);
  cudaEventDestroy(event);
}

TEST_CASE_METHOD(Fixture, "a global capture forbids unsafe calls in other global-mode threads only") {
  REQUIRE(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal) == cudaSuccess);
  cudaError_t global_thread = cudaSuccess;
  cudaError_t thread_local_thread = cudaErrorUnknown;
  std::thread([&] {
    void* block = nullptr;
    global_thread = cudaDeviceSynchronize();
    (void)cudaGetLastError();
    cudaStreamCaptureMode mode = cudaStreamCaptureModeThreadLocal;
    cudaThreadExchangeStreamCaptureMode(&mode);
    thread_local_thread = cudaMalloc(&block, 4096);
    if (block != nullptr) cudaFree(block);
  }).join();
  CHECK(global_thread == cudaErrorStreamCaptureUnsupported);
  CHECK(thread_local_thread == cudaSuccess);
  cudaGraph_t graph = nullptr;
  CHECK(cudaStreamEndCapture(stream, &graph) == cudaErrorStreamCaptureInvalidated);
  (void)cudaGetLastError();
  // A thread-local capture ignores other threads.
  REQUIRE(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
  cudaError_t other = cudaErrorUnknown;
  std::thread([&] { other = cudaDeviceSynchronize(); }).join();
  CHECK(other == cudaSuccess);
  REQUIRE(cudaStreamEndCapture(stream, &graph) == cudaSuccess);
  cudaGraphDestroy(graph);
}

TEST_CASE_METHOD(Fixture, "forks must be joined; capturing streams may not wait on outside work") {
  cudaEvent_t fork = nullptr;
  cudaEvent_t join = nullptr;
  cudaEvent_t outside = nullptr;
  REQUIRE(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming) == cudaSuccess);
  REQUIRE(cudaEventCreateWithFlags(&join, cudaEventDisableTiming) == cudaSuccess);
  REQUIRE(cudaEventCreateWithFlags(&outside, cudaEventDisableTiming) == cudaSuccess);
  for (const bool joined : {true, false}) {
    INFO((joined ? "joined" : "not joined"));
    REQUIRE(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal) == cudaSuccess);
    REQUIRE(cudaEventRecord(fork, stream) == cudaSuccess);
    REQUIRE(cudaStreamWaitEvent(side, fork, 0) == cudaSuccess);  // side joins the capture
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    REQUIRE(cudaStreamIsCapturing(side, &status) == cudaSuccess);
    CHECK(status == cudaStreamCaptureStatusActive);
    REQUIRE(cudaMemsetAsync(buffer, 3, 512, side) == cudaSuccess);
    if (joined) {
      REQUIRE(cudaEventRecord(join, side) == cudaSuccess);
      REQUIRE(cudaStreamWaitEvent(stream, join, 0) == cudaSuccess);
    }
    cudaGraph_t graph = nullptr;
    const cudaError_t ended = cudaStreamEndCapture(stream, &graph);
    (void)cudaGetLastError();
    CHECK(ended == (joined ? cudaSuccess : cudaErrorStreamCaptureUnjoined));
    CHECK((graph != nullptr) == joined);
    REQUIRE(cudaStreamIsCapturing(side, &status) == cudaSuccess);
    CHECK(status == cudaStreamCaptureStatusNone);
    if (graph != nullptr) cudaGraphDestroy(graph);
  }
  REQUIRE(cudaEventRecord(outside, side) == cudaSuccess);
  REQUIRE(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal) == cudaSuccess);
  CHECK(cudaStreamWaitEvent(stream, outside, 0) == cudaErrorStreamCaptureIsolation);
  (void)cudaGetLastError();
  cudaGraph_t graph = nullptr;
  CHECK(cudaStreamEndCapture(stream, &graph) == cudaErrorStreamCaptureInvalidated);
  (void)cudaGetLastError();
  CHECK(cudaStreamBeginCapture(nullptr, cudaStreamCaptureModeGlobal) != cudaSuccess);  // the legacy stream
  (void)cudaGetLastError();
  cudaEventDestroy(fork);
  cudaEventDestroy(join);
  cudaEventDestroy(outside);
}
