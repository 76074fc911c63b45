// Shared by the stream-capture tests (graphs_test.cpp, capture_rules_test.cpp): a zeroed
// device buffer, two non-blocking streams and a blocking one, and helpers that end captures.
// Invariant: a test leaves no capture running and its thread in global mode, whatever fails.
#pragma once

#include "simcuda_test_support.h"

namespace simcuda_test {

// Ends the capture `stream` takes part in as origin, if any, and destroys what it produced.
inline void end_any_capture(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &status) == cudaSuccess && status != cudaStreamCaptureStatusNone) {
    cudaGraph_t graph = nullptr;
    cudaStreamEndCapture(stream, &graph);
    if (graph != nullptr) cudaGraphDestroy(graph);
  }
  (void)cudaGetLastError();
}

// Ends a capture that must succeed and returns its graph.
inline cudaGraph_t end_capture(cudaStream_t stream) {
  cudaGraph_t graph = nullptr;
  REQUIRE(cudaStreamEndCapture(stream, &graph) == cudaSuccess);
  REQUIRE(graph != nullptr);
  return graph;
}

inline cudaStreamCaptureStatus capture_status(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  REQUIRE(cudaStreamIsCapturing(stream, &status) == cudaSuccess);
  return status;
}

struct CaptureFixture {
  static constexpr size_t kBufferBytes = size_t{1} << 20;
  unsigned char* buffer = nullptr;
  cudaStream_t stream = nullptr;    // non-blocking
  cudaStream_t side = nullptr;      // non-blocking
  cudaStream_t blocking = nullptr;  // synchronizes with the legacy stream
  CaptureFixture() {
    require_simcuda();
    REQUIRE(cudaMalloc(reinterpret_cast<void**>(&buffer), kBufferBytes) == cudaSuccess);
    REQUIRE(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess);
    REQUIRE(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking) == cudaSuccess);
    REQUIRE(cudaStreamCreate(&blocking) == cudaSuccess);
    REQUIRE(cudaMemset(buffer, 0, kBufferBytes) == cudaSuccess);
    simcuda_race_reset();
  }
  ~CaptureFixture() {
    cudaStreamCaptureMode mode = cudaStreamCaptureModeGlobal;
    cudaThreadExchangeStreamCaptureMode(&mode);
    for (cudaStream_t one : {stream, side, blocking, cudaStreamPerThread}) end_any_capture(one);
    simcuda_clear_faults();
    cudaDeviceSynchronize();
    cudaStreamDestroy(stream);
    cudaStreamDestroy(side);
    cudaStreamDestroy(blocking);
    cudaFree(buffer);
    (void)cudaGetLastError();
  }
};

}  // namespace simcuda_test
