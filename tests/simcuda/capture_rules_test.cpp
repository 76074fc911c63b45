// The rules a stream capture imposes on simcuda (Note [Stream capture]): captured events
// cannot be queried; unsafe calls fail and invalidate a capture by thread mode; forks must be
// joined back (transitively); a capturing stream may not wait on outside work; the legacy
// stream is unusable while a blocking stream captures; what simcuda cannot capture is refused.
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "capture_fixture.h"

using simcuda_test::capture_status;
using simcuda_test::CaptureFixture;
using simcuda_test::end_capture;

namespace {

// Ends an invalidated capture: no graph, cudaErrorStreamCaptureInvalidated.
void require_invalidated_end(cudaStream_t stream) {
  CHECK(capture_status(stream) == cudaStreamCaptureStatusInvalidated);
  cudaGraph_t graph = reinterpret_cast<cudaGraph_t>(1);
  CHECK(cudaStreamEndCapture(stream, &graph) == cudaErrorStreamCaptureInvalidated);
  (void)cudaGetLastError();
  CHECK(graph == nullptr);
  CHECK(capture_status(stream) == cudaStreamCaptureStatusNone);
}

}  // namespace

TEST_CASE_METHOD(CaptureFixture, "a captured event cannot be queried until recorded outside a capture") {
  cudaEvent_t start = nullptr;
  cudaEvent_t event = nullptr;
  REQUIRE(cudaEventCreate(&start) == cudaSuccess);
  REQUIRE(cudaEventCreate(&event) == cudaSuccess);
  REQUIRE(cudaEventRecord(start, stream) == cudaSuccess);
  REQUIRE(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed) == cudaSuccess);
  REQUIRE(cudaEventRecord(event, stream) == cudaSuccess);
  CHECK(cudaEventQuery(event) == cudaErrorCapturedEvent);  // even in relaxed mode
  CHECK(cudaEventSynchronize(event) == cudaErrorCapturedEvent);
  float milliseconds = 0;
  CHECK(cudaEventElapsedTime(&milliseconds, start, event) == cudaErrorCapturedEvent);
  (void)cudaGetLastError();
  CHECK(cudaGraphDestroy(end_capture(stream)) == cudaSuccess);
  CHECK(cudaEventQuery(event) == cudaErrorCapturedEvent);  // still last recorded in a capture
  (void)cudaGetLastError();
  REQUIRE(cudaEventRecord(event, stream) == cudaSuccess);
  CHECK(cudaEventSynchronize(event) == cudaSuccess);
  CHECK(cudaEventElapsedTime(&milliseconds, start, event) == cudaSuccess);
  cudaEventDestroy(event);
  cudaEventDestroy(start);
}

TEST_CASE_METHOD(CaptureFixture, "unsafe calls fail and invalidate the capture unless relaxed") {
  void* allocated_before = nullptr;
  REQUIRE(cudaMalloc(&allocated_before, 4096) == cudaSuccess);
  cudaEvent_t ordinary = nullptr;
  REQUIRE(cudaEventCreate(&ordinary) == cudaSuccess);
  REQUIRE(cudaEventRecord(ordinary, side) == cudaSuccess);
  std::vector<unsigned char> host(64);
  void* pinned = nullptr;
  const std::vector<std::pair<std::string, std::function<cudaError_t()>>> unsafe_calls = {
      {"cudaMalloc", [&] { void* block = nullptr; return cudaMalloc(&block, 4096); }},
      {"cudaFree", [&] { return cudaFree(allocated_before); }},
      {"cudaMallocHost", [&] { return cudaMallocHost(&pinned, 4096); }},
      {"cudaDeviceSynchronize", [] { return cudaDeviceSynchronize(); }},
      {"cudaStreamSynchronize of another stream", [&] { return cudaStreamSynchronize(side); }},
      {"cudaStreamQuery of the capturing stream", [&] { return cudaStreamQuery(stream); }},
      // Seen on a GPU (driver 580): asking the capturing stream's device spoils the capture.
      {"cudaStreamGetDevice of the capturing stream", [&] { int device = -1; return cudaStreamGetDevice(stream, &device); }},
      {"cudaEventQuery", [&] { return cudaEventQuery(ordinary); }},
      {"cudaMemcpy", [&] { return cudaMemcpy(host.data(), buffer, 64, cudaMemcpyDeviceToHost); }},
      {"cudaMemset", [&] { return cudaMemset(buffer, 1, 64); }},
  };
  for (const auto& [name, call] : unsafe_calls) {
    INFO(name);
    REQUIRE(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal) == cudaSuccess);
    CHECK(call() == cudaErrorStreamCaptureUnsupported);
    (void)cudaGetLastError();
    require_invalidated_end(stream);
  }
  CHECK(pinned == nullptr);
  CHECK(buffer[0] == 0);  // the refused memset did nothing

  // A relaxed thread may make them; the capture survives.
  REQUIRE(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal) == cudaSuccess);
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  REQUIRE(cudaThreadExchangeStreamCaptureMode(&mode) == cudaSuccess);
  CHECK(mode == cudaStreamCaptureModeGlobal);
  void* relaxed = nullptr;
  CHECK(cudaMalloc(&relaxed, 4096) == cudaSuccess);
  CHECK(cudaDeviceSynchronize() == cudaSuccess);
  CHECK(cudaStreamQuery(stream) == cudaErrorStreamCaptureUnsupported);  // its own stream: never
  (void)cudaGetLastError();
  REQUIRE(cudaThreadExchangeStreamCaptureMode(&mode) == cudaSuccess);
  CHECK(mode == cudaStreamCaptureModeRelaxed);
  require_invalidated_end(stream);

  // A capture begun in relaxed mode prohibits nothing, and may end on another thread.
  REQUIRE(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed) == cudaSuccess);
  CHECK(cudaFree(relaxed) == cudaSuccess);
  CHECK(capture_status(stream) == cudaStreamCaptureStatusActive);
  cudaError_t ended = cudaErrorUnknown;
  cudaGraph_t graph = nullptr;
  std::thread([&] { ended = cudaStreamEndCapture(stream, &graph); }).join();
  CHECK(ended == cudaSuccess);
  if (graph != nullptr) cudaGraphDestroy(graph);
  // A global one may not.
  REQUIRE(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal) == cudaSuccess);
  std::thread([&] { ended = cudaStreamEndCapture(stream, &graph); }).join();
  CHECK(ended == cudaErrorStreamCaptureWrongThread);
  CHECK(cudaGraphDestroy(end_capture(stream)) == cudaSuccess);
  CHECK(cudaFree(allocated_before) == cudaSuccess);
  cudaEventDestroy(ordinary);
}

TEST_CASE_METHOD(CaptureFixture, "a global capture prohibits unsafe calls in other global-mode threads only") {
  REQUIRE(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal) == cudaSuccess);
  cudaError_t global_thread = cudaSuccess;
  cudaError_t thread_local_thread = cudaErrorUnknown;
  std::thread([&] {
    global_thread = cudaDeviceSynchronize();
    (void)cudaGetLastError();
    cudaStreamCaptureMode mode = cudaStreamCaptureModeThreadLocal;
    cudaThreadExchangeStreamCaptureMode(&mode);
    void* block = nullptr;
    thread_local_thread = cudaMalloc(&block, 4096);
    if (block != nullptr) cudaFree(block);
  }).join();
  CHECK(global_thread == cudaErrorStreamCaptureUnsupported);
  CHECK(thread_local_thread == cudaSuccess);
  require_invalidated_end(stream);
  // The mode belongs to the thread: another thread turning relaxed (it starts in global mode)
  // leaves this one prohibited.
  REQUIRE(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
  cudaStreamCaptureMode previous = cudaStreamCaptureModeRelaxed;
  std::thread([&] { cudaThreadExchangeStreamCaptureMode(&previous); }).join();
  CHECK(previous == cudaStreamCaptureModeGlobal);
  void* refused = nullptr;
  CHECK(cudaMalloc(&refused, 4096) == cudaErrorStreamCaptureUnsupported);
  (void)cudaGetLastError();
  require_invalidated_end(stream);
  // A thread-local capture ignores other threads.
  REQUIRE(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
  cudaError_t other = cudaErrorUnknown;
  std::thread([&] { other = cudaDeviceSynchronize(); }).join();
  CHECK(other == cudaSuccess);
  CHECK(cudaGraphDestroy(end_capture(stream)) == cudaSuccess);
}

TEST_CASE_METHOD(CaptureFixture, "forked streams join the capture and must be joined back") {
  cudaStream_t third = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&third, cudaStreamNonBlocking) == cudaSuccess);
  cudaEvent_t fork = nullptr, inner_fork = nullptr, inner_join = nullptr, join = nullptr;
  for (cudaEvent_t* event : {&fork, &inner_fork, &inner_join, &join})
    REQUIRE(cudaEventCreateWithFlags(event, cudaEventDisableTiming) == cudaSuccess);

  // stream -> side -> third, joined back transitively: third into side, side into stream.
  REQUIRE(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal) == cudaSuccess);
  CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal) == cudaErrorIllegalState);
  (void)cudaGetLastError();
  REQUIRE(cudaEventRecord(fork, stream) == cudaSuccess);
  REQUIRE(cudaStreamWaitEvent(side, fork, 0) == cudaSuccess);
  CHECK(capture_status(side) == cudaStreamCaptureStatusActive);
  REQUIRE(cudaMemsetAsync(buffer, 1, 512, side) == cudaSuccess);
  REQUIRE(cudaEventRecord(inner_fork, side) == cudaSuccess);
  REQUIRE(cudaStreamWaitEvent(third, inner_fork, 0) == cudaSuccess);
  REQUIRE(cudaMemsetAsync(buffer + 512, 2, 512, third) == cudaSuccess);
  REQUIRE(cudaEventRecord(inner_join, third) == cudaSuccess);
  REQUIRE(cudaStreamWaitEvent(side, inner_join, 0) == cudaSuccess);
  REQUIRE(cudaEventRecord(join, side) == cudaSuccess);
  CHECK(cudaStreamEndCapture(side, nullptr) == cudaErrorInvalidValue);
  cudaGraph_t wrong = nullptr;
  CHECK(cudaStreamEndCapture(side, &wrong) == cudaErrorStreamCaptureUnmatched);  // not its origin
  (void)cudaGetLastError();
  REQUIRE(cudaStreamWaitEvent(stream, join, 0) == cudaSuccess);
  cudaGraph_t graph = end_capture(stream);
  CHECK(capture_status(side) == cudaStreamCaptureStatusNone);
  CHECK(capture_status(third) == cudaStreamCaptureStatusNone);
  CHECK(buffer[0] == 0);
  cudaGraphExec_t exec = nullptr;
  REQUIRE(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);
  REQUIRE(cudaGraphLaunch(exec, stream) == cudaSuccess);
  REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
  CHECK(buffer[0] == 1);  // the forked streams' work replays on the launch stream
  CHECK(buffer[512] == 2);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);

  // A fork that adds no work needs no join.
  REQUIRE(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal) == cudaSuccess);
  REQUIRE(cudaEventRecord(fork, stream) == cudaSuccess);
  REQUIRE(cudaStreamWaitEvent(side, fork, 0) == cudaSuccess);
  CHECK(cudaGraphDestroy(end_capture(stream)) == cudaSuccess);

  // A fork with work that is not joined back: no graph.
  REQUIRE(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal) == cudaSuccess);
  REQUIRE(cudaEventRecord(fork, stream) == cudaSuccess);
  REQUIRE(cudaStreamWaitEvent(side, fork, 0) == cudaSuccess);
  REQUIRE(cudaMemsetAsync(buffer, 3, 512, side) == cudaSuccess);
  REQUIRE(cudaEventRecord(join, side) == cudaSuccess);  // recorded, never waited on
  REQUIRE(cudaMemsetAsync(buffer, 4, 512, stream) == cudaSuccess);
  graph = nullptr;
  CHECK(cudaStreamEndCapture(stream, &graph) == cudaErrorStreamCaptureUnjoined);
  (void)cudaGetLastError();
  CHECK(graph == nullptr);
  CHECK(capture_status(side) == cudaStreamCaptureStatusNone);

  // Work added to a fork after its join is unjoined again.
  REQUIRE(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal) == cudaSuccess);
  REQUIRE(cudaEventRecord(fork, stream) == cudaSuccess);
  REQUIRE(cudaStreamWaitEvent(side, fork, 0) == cudaSuccess);
  REQUIRE(cudaEventRecord(join, side) == cudaSuccess);
  REQUIRE(cudaStreamWaitEvent(stream, join, 0) == cudaSuccess);
  REQUIRE(cudaMemsetAsync(buffer, 5, 512, side) == cudaSuccess);
  CHECK(cudaStreamEndCapture(stream, &graph) == cudaErrorStreamCaptureUnjoined);
  (void)cudaGetLastError();
  CHECK(buffer[0] == 1);
  for (cudaEvent_t event : {fork, inner_fork, inner_join, join}) cudaEventDestroy(event);
  cudaStreamDestroy(third);
}

TEST_CASE_METHOD(CaptureFixture, "a capturing stream may not wait on work outside its capture") {
  cudaEvent_t outside = nullptr;
  cudaEvent_t other_capture = nullptr;
  REQUIRE(cudaEventCreateWithFlags(&outside, cudaEventDisableTiming) == cudaSuccess);
  REQUIRE(cudaEventCreateWithFlags(&other_capture, cudaEventDisableTiming) == cudaSuccess);
  REQUIRE(cudaEventRecord(outside, side) == cudaSuccess);
  REQUIRE(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal) == cudaSuccess);
  CHECK(cudaStreamWaitEvent(stream, outside, 0) == cudaErrorStreamCaptureIsolation);
  (void)cudaGetLastError();
  require_invalidated_end(stream);
  // Two captures cannot be merged: both are invalidated.
  REQUIRE(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal) == cudaSuccess);
  REQUIRE(cudaStreamBeginCapture(side, cudaStreamCaptureModeGlobal) == cudaSuccess);
  REQUIRE(cudaEventRecord(other_capture, side) == cudaSuccess);
  CHECK(cudaStreamWaitEvent(stream, other_capture, 0) == cudaErrorStreamCaptureIsolation);
  (void)cudaGetLastError();
  require_invalidated_end(stream);
  require_invalidated_end(side);
  CHECK(cudaStreamBeginCapture(nullptr, cudaStreamCaptureModeGlobal) == cudaErrorStreamCaptureUnsupported);
  (void)cudaGetLastError();
  cudaEventDestroy(outside);
  cudaEventDestroy(other_capture);
}

TEST_CASE_METHOD(CaptureFixture, "the legacy stream is unusable while a blocking stream captures") {
  // A relaxed capture, so that only the legacy-stream rule can refuse.
  REQUIRE(cudaStreamBeginCapture(blocking, cudaStreamCaptureModeRelaxed) == cudaSuccess);
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  CHECK(cudaStreamIsCapturing(nullptr, &status) == cudaErrorStreamCaptureImplicit);
  (void)cudaGetLastError();
  CHECK(capture_status(blocking) == cudaStreamCaptureStatusActive);  // a query does not invalidate
  CHECK(simcuda_launch(nullptr, buffer, 64, 1) == 0);
  require_invalidated_end(blocking);

  const std::vector<std::pair<std::string, std::function<cudaError_t()>>> legacy_uses = {
      {"cudaMemsetAsync", [&] { return cudaMemsetAsync(buffer, 1, 64, nullptr); }},
      {"cudaMemset", [&] { return cudaMemset(buffer, 1, 64); }},
      {"cudaStreamSynchronize", [] { return cudaStreamSynchronize(nullptr); }},
      {"cudaStreamQuery", [] { return cudaStreamQuery(cudaStreamLegacy); }},
  };
  for (const auto& [name, call] : legacy_uses) {
    INFO(name);
    REQUIRE(cudaStreamBeginCapture(blocking, cudaStreamCaptureModeRelaxed) == cudaSuccess);
    CHECK(call() == cudaErrorStreamCaptureImplicit);
    (void)cudaGetLastError();
    require_invalidated_end(blocking);
  }
  CHECK(buffer[0] == 0);

  // A non-blocking stream's capture leaves the legacy stream alone.
  REQUIRE(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed) == cudaSuccess);
  REQUIRE(cudaStreamIsCapturing(nullptr, &status) == cudaSuccess);
  CHECK(status == cudaStreamCaptureStatusNone);
  CHECK(cudaMemsetAsync(buffer, 1, 64, nullptr) == cudaSuccess);
  CHECK(cudaGraphDestroy(end_capture(stream)) == cudaSuccess);
  REQUIRE(cudaStreamSynchronize(nullptr) == cudaSuccess);
  CHECK(buffer[0] == 1);
}

TEST_CASE_METHOD(CaptureFixture, "work simcuda cannot capture is refused and invalidates the capture") {
  const std::vector<std::pair<std::string, std::function<cudaError_t()>>> refused = {
      {"cudaMallocAsync", [&] { void* block = nullptr; return cudaMallocAsync(&block, 4096, stream); }},
      {"cudaFreeAsync", [&] { return cudaFreeAsync(buffer, stream); }},
      {"cudaStreamAddCallback",
       [&] { return cudaStreamAddCallback(stream, [](cudaStream_t, cudaError_t, void*) {}, nullptr, 0); }},
      {"cudaStreamDestroy", [&] { return cudaStreamDestroy(stream); }},
  };
  for (const auto& [name, call] : refused) {
    INFO(name);
    REQUIRE(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed) == cudaSuccess);
    CHECK(call() == cudaErrorStreamCaptureUnsupported);
    (void)cudaGetLastError();
    require_invalidated_end(stream);
  }
  CHECK(simcuda_is_accessible(buffer, 4096) == 1);  // the refused free did nothing
  CHECK(cudaMemsetAsync(buffer, 2, 64, stream) == cudaSuccess);  // the stream survived
  REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
  CHECK(buffer[0] == 2);
}
