// CUDA graphs on simcuda (Notes [Stream capture] and [Graph replay]): captured work runs at
// every replay and never at capture, the race oracle sees replayed work, capture ids are
// unique, capture info names the graph and its dependencies, execs outlive their graph,
// host functions and external event nodes replay, the _ptsz and driver variants work, and
// fault injection and call counters cover the new entry points.
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <unistd.h>

#include "capture_fixture.h"

using simcuda_test::capture_status;
using simcuda_test::CaptureFixture;
using simcuda_test::end_capture;

// Declared by the CUDA headers only for programs built with --default-stream per-thread;
// the real libraries export them all the same.
extern "C" {
cudaError_t CUDARTAPI cudaStreamBeginCapture_ptsz(cudaStream_t stream, cudaStreamCaptureMode mode);
cudaError_t CUDARTAPI cudaStreamEndCapture_ptsz(cudaStream_t stream, cudaGraph_t* graph);
cudaError_t CUDARTAPI cudaStreamIsCapturing_ptsz(cudaStream_t stream, cudaStreamCaptureStatus* status);
cudaError_t CUDARTAPI cudaGraphLaunch_ptsz(cudaGraphExec_t exec, cudaStream_t stream);
CUresult CUDAAPI cuStreamBeginCapture_v2_ptsz(CUstream stream, CUstreamCaptureMode mode);
CUresult CUDAAPI cuStreamEndCapture_ptsz(CUstream stream, CUgraph* graph);
CUresult CUDAAPI cuGraphLaunch_ptsz(CUgraphExec exec, CUstream stream);
}

namespace {

void count_call(void* counter) { ++*static_cast<int*>(counter); }

}  // namespace

TEST_CASE_METHOD(CaptureFixture, "captured memset, copy and kernel run at each replay, never at capture") {
  REQUIRE(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal) == cudaSuccess);
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  unsigned long long first_id = 0;
  REQUIRE(cudaStreamGetCaptureInfo(stream, &status, &first_id, nullptr, nullptr, nullptr, nullptr) == cudaSuccess);
  CHECK(status == cudaStreamCaptureStatusActive);
  CHECK(first_id != 0);
  REQUIRE(cudaMemsetAsync(buffer, 7, 4096, stream) == cudaSuccess);
  REQUIRE(cudaMemcpyAsync(buffer + 8192, buffer, 4096, cudaMemcpyDeviceToDevice, stream) == cudaSuccess);
  CHECK(simcuda_launch_fill(stream, buffer + 16384, 4096, 9) != 0);  // recorded: an id, no pending work
  CHECK(simcuda_pending(stream) == 0);
  // Nothing captured is pending, so another stream writing the same bytes does not race with it.
  REQUIRE(simcuda_launch(side, buffer, 20480, 1) != 0);
  simcuda_complete_all();
  CHECK(simcuda_race_count() == 0);
  CHECK(buffer[0] == 0);
  CHECK(buffer[8192] == 0);
  CHECK(buffer[16384] == 0);

  cudaGraph_t graph = end_capture(stream);
  CHECK(capture_status(stream) == cudaStreamCaptureStatusNone);
  size_t nodes = 0;
  REQUIRE(cudaGraphGetNodes(graph, nullptr, &nodes) == cudaSuccess);
  CHECK(nodes == 3);
  cudaGraphExec_t exec = nullptr;
  REQUIRE(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);
  for (int replay = 0; replay < 2; ++replay) {
    INFO("replay " << replay);
    std::memset(buffer, 0, 20480);
    REQUIRE(cudaGraphLaunch(exec, stream) == cudaSuccess);
    CHECK(simcuda_pending(stream) == 3);  // enqueued like work enqueued now
    CHECK(buffer[0] == 7);                 // copies and memsets move bytes when enqueued
    CHECK(buffer[8192] == 7);              // after the memset: the nodes keep their order
    CHECK(buffer[16384] == 0);             // the kernel writes when it completes
    REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
    CHECK(buffer[4095] == 7);
    CHECK(buffer[4096] == 0);
    CHECK(buffer[12287] == 7);
    CHECK(buffer[16384] == 9);
    CHECK(buffer[20479] == 9);
    CHECK(buffer[20480] == 0);
  }
  // The race oracle checks replayed work: a read of the replayed kernel's range from another
  // stream, while the replay is pending, races with it.
  REQUIRE(cudaGraphLaunch(exec, stream) == cudaSuccess);
  REQUIRE(simcuda_launch(side, buffer + 16384, 16, 0) != 0);
  CHECK(simcuda_race_count() == 1);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);

  REQUIRE(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal) == cudaSuccess);
  unsigned long long second_id = 0;
  REQUIRE(cudaStreamGetCaptureInfo(stream, &status, &second_id, nullptr, nullptr, nullptr, nullptr) == cudaSuccess);
  CHECK(second_id != 0);
  CHECK(second_id != first_id);
  CHECK(cudaGraphDestroy(end_capture(stream)) == cudaSuccess);

  // An exec is independent of its graph; a destroyed exec is gone.
  REQUIRE(cudaGraphDestroy(graph) == cudaSuccess);
  CHECK(cudaGraphDestroy(graph) != cudaSuccess);
  (void)cudaGetLastError();
  std::memset(buffer, 0, 4096);
  REQUIRE(cudaGraphLaunch(exec, stream) == cudaSuccess);
  REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
  CHECK(buffer[0] == 7);
  CHECK(cudaGraphExecDestroy(exec) == cudaSuccess);
  CHECK(cudaGraphExecDestroy(exec) != cudaSuccess);
  CHECK(cudaGraphLaunch(exec, stream) != cudaSuccess);
  (void)cudaGetLastError();
}

TEST_CASE_METHOD(CaptureFixture, "capture info names the graph being built and the stream's dependencies") {
  REQUIRE(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
  REQUIRE(cudaMemsetAsync(buffer, 1, 64, stream) == cudaSuccess);
  REQUIRE(cudaMemsetAsync(buffer + 64, 2, 64, stream) == cudaSuccess);
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  unsigned long long id = 0;
  cudaGraph_t building = nullptr;
  const cudaGraphNode_t* dependencies = nullptr;
  const cudaGraphEdgeData* edges = nullptr;
  size_t count = 0;
  REQUIRE(cudaStreamGetCaptureInfo(stream, &status, &id, &building, &dependencies, &edges, &count) == cudaSuccess);
  REQUIRE(building != nullptr);
  REQUIRE(count == 1);
  cudaGraphNode_t nodes[2] = {};
  size_t node_count = 2;
  REQUIRE(cudaGraphGetNodes(building, nodes, &node_count) == cudaSuccess);
  REQUIRE(node_count == 2);
  CHECK(dependencies[0] == nodes[1]);  // the next node follows the last one
  CHECK(edges != nullptr);
  CHECK(cudaGraphDestroy(building) != cudaSuccess);  // still owned by the capture
  (void)cudaGetLastError();

  const auto path = std::filesystem::temp_directory_path() / ("simcuda_graph_" + std::to_string(getpid()) + ".dot");
  REQUIRE(cudaGraphDebugDotPrint(building, path.c_str(), 0) == cudaSuccess);
  std::ifstream file(path);
  const std::string dot((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  std::filesystem::remove(path);
  CHECK(dot.find("digraph") != std::string::npos);
  CHECK(dot.find("memset") != std::string::npos);
  CHECK(dot.find("node0 -> node1") != std::string::npos);

  cudaGraph_t graph = end_capture(stream);
  CHECK(graph == building);  // ownership passes to the caller, same handle
  REQUIRE(cudaStreamGetCaptureInfo(stream, &status, &id, &building, &dependencies, &edges, &count) == cudaSuccess);
  CHECK(status == cudaStreamCaptureStatusNone);
  CHECK(count == 0);
  CHECK(cudaGraphDestroy(graph) == cudaSuccess);
}

TEST_CASE_METHOD(CaptureFixture, "host functions and external event nodes run at every replay") {
  int calls = 0;
  cudaEvent_t recorded = nullptr;
  REQUIRE(cudaEventCreateWithFlags(&recorded, cudaEventDisableTiming) == cudaSuccess);
  CHECK(cudaEventRecordWithFlags(recorded, stream, cudaEventRecordExternal) == cudaErrorInvalidValue);  // not capturing
  (void)cudaGetLastError();
  REQUIRE(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal) == cudaSuccess);
  REQUIRE(cudaLaunchHostFunc(stream, count_call, &calls) == cudaSuccess);
  REQUIRE(cudaEventRecordWithFlags(recorded, stream, cudaEventRecordExternal) == cudaSuccess);
  cudaGraph_t graph = end_capture(stream);
  CHECK(calls == 0);
  cudaGraphExec_t exec = nullptr;
  REQUIRE(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);
  for (int replay = 1; replay <= 2; ++replay) {
    REQUIRE(cudaGraphLaunch(exec, stream) == cudaSuccess);
    CHECK(calls == replay - 1);                            // runs when the stream reaches it
    CHECK(cudaEventQuery(recorded) == cudaErrorNotReady);  // recorded at replay, after it
    REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
    CHECK(calls == replay);
    CHECK(cudaEventQuery(recorded) == cudaSuccess);
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);

  // An external wait node orders the replay after the event's work: no race with it then.
  cudaEvent_t outside = nullptr;
  REQUIRE(cudaEventCreateWithFlags(&outside, cudaEventDisableTiming) == cudaSuccess);
  for (const bool external_wait : {true, false}) {
    INFO((external_wait ? "with" : "without") << " the external wait");
    REQUIRE(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal) == cudaSuccess);
    if (external_wait) REQUIRE(cudaStreamWaitEvent(stream, outside, cudaEventWaitExternal) == cudaSuccess);
    REQUIRE(cudaMemsetAsync(buffer, 3, 4096, stream) == cudaSuccess);
    graph = end_capture(stream);
    REQUIRE(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);
    simcuda_race_reset();
    REQUIRE(simcuda_launch(side, buffer, 4096, 1) != 0);
    REQUIRE(cudaEventRecord(outside, side) == cudaSuccess);
    REQUIRE(cudaGraphLaunch(exec, stream) == cudaSuccess);
    CHECK(simcuda_race_count() == (external_wait ? 0u : 1u));
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
  }
  cudaEventDestroy(outside);
  cudaEventDestroy(recorded);
}

TEST_CASE_METHOD(CaptureFixture, "per-thread-default-stream and driver variants capture and launch") {
  REQUIRE(cudaStreamBeginCapture_ptsz(nullptr, cudaStreamCaptureModeGlobal) == cudaSuccess);  // 0: per-thread
  CHECK(capture_status(cudaStreamPerThread) == cudaStreamCaptureStatusActive);
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  REQUIRE(cudaStreamIsCapturing_ptsz(nullptr, &status) == cudaSuccess);
  CHECK(status == cudaStreamCaptureStatusActive);
  REQUIRE(cudaMemsetAsync(buffer, 5, 64, cudaStreamPerThread) == cudaSuccess);
  cudaGraph_t graph = nullptr;
  REQUIRE(cudaStreamEndCapture_ptsz(nullptr, &graph) == cudaSuccess);
  REQUIRE(graph != nullptr);
  CHECK(buffer[0] == 0);
  cudaGraphExec_t exec = nullptr;
  REQUIRE(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);
  REQUIRE(cudaGraphLaunch_ptsz(exec, nullptr) == cudaSuccess);
  REQUIRE(cudaStreamSynchronize(cudaStreamPerThread) == cudaSuccess);
  CHECK(buffer[0] == 5);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);

  REQUIRE(cuStreamBeginCapture_v2_ptsz(nullptr, CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_SUCCESS);
  REQUIRE(cudaMemsetAsync(buffer + 64, 6, 64, cudaStreamPerThread) == cudaSuccess);
  CUgraph driver_graph = nullptr;
  REQUIRE(cuStreamEndCapture_ptsz(nullptr, &driver_graph) == CUDA_SUCCESS);
  CUgraphExec driver_exec = nullptr;
  REQUIRE(cuGraphInstantiateWithFlags(&driver_exec, driver_graph, 0) == CUDA_SUCCESS);
  CHECK(buffer[64] == 0);
  REQUIRE(cuGraphLaunch_ptsz(driver_exec, nullptr) == CUDA_SUCCESS);
  REQUIRE(cudaStreamSynchronize(cudaStreamPerThread) == cudaSuccess);
  CHECK(buffer[64] == 6);
  CHECK(cuGraphExecDestroy(driver_exec) == CUDA_SUCCESS);
  CHECK(cuGraphDestroy(driver_graph) == CUDA_SUCCESS);
}

TEST_CASE_METHOD(CaptureFixture, "fault injection and call counters cover the capture and graph entry points") {
  simcuda_reset_counters();
  REQUIRE(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal) == cudaSuccess);
  REQUIRE(cudaMemsetAsync(buffer, 4, 64, stream) == cudaSuccess);
  cudaGraph_t graph = end_capture(stream);
  cudaGraphExec_t exec = nullptr;
  REQUIRE(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);
  CHECK(simcuda_call_count("cudaStreamBeginCapture") == 1);
  CHECK(simcuda_call_count("cudaStreamEndCapture") == 1);
  CHECK(simcuda_call_count("cudaGraphInstantiate") == 1);
  CHECK(simcuda_call_count("cuStreamBeginCapture_v2") == 0);  // used inside the runtime, not by the program

  REQUIRE(simcuda_fail("cudaGraphLaunch", 1, cudaErrorLaunchFailure, SIMCUDA_FAIL_ONCE) == 0);
  CHECK(cudaGraphLaunch(exec, stream) == cudaErrorLaunchFailure);
  (void)cudaGetLastError();
  CHECK(simcuda_pending(stream) == 0);  // a failed launch enqueues nothing
  CHECK(buffer[0] == 0);
  REQUIRE(cudaGraphLaunch(exec, stream) == cudaSuccess);
  CHECK(buffer[0] == 4);
  CHECK(simcuda_call_count("cudaGraphLaunch") == 2);
  CHECK(simcuda_call_count("cuGraphLaunch") == 0);

  // A driver fault hits the program's own driver calls only.
  REQUIRE(simcuda_fail("cuGraphLaunch", 1, CUDA_ERROR_LAUNCH_FAILED, SIMCUDA_FAIL_ONCE) == 0);
  CHECK(cudaGraphLaunch(exec, stream) == cudaSuccess);
  CHECK(cuGraphLaunch(reinterpret_cast<CUgraphExec>(exec), stream) == CUDA_ERROR_LAUNCH_FAILED);
  CHECK(simcuda_call_count("cuGraphLaunch") == 1);

  REQUIRE(simcuda_fail("cudaStreamBeginCapture", 1, cudaErrorNotPermitted, SIMCUDA_FAIL_ONCE) == 0);
  CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal) == cudaErrorNotPermitted);
  (void)cudaGetLastError();
  CHECK(capture_status(stream) == cudaStreamCaptureStatusNone);
  REQUIRE(simcuda_fail("cudaStreamIsCapturing", 1, cudaErrorUnknown, SIMCUDA_FAIL_ONCE) == 0);
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  CHECK(cudaStreamIsCapturing(stream, &status) == cudaErrorUnknown);
  (void)cudaGetLastError();
  REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
}
