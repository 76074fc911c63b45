// CUDA graphs: graph and exec objects, replay, Graphviz output (see graphs.h).
//
// Note [Graph replay]
// A graph is the list of nodes a stream capture recorded (Note [Stream capture]); an exec
// (cuGraphInstantiate) is a copy of that list, so destroying the graph leaves its execs
// working. cuGraphLaunch(exec, stream) enqueues the nodes on `stream` in capture order, each
// exactly as launch_locked enqueues work there now: it waits for the stream's earlier work,
// the race oracle checks it against other streams' pending work, and later work (and events
// recorded after the launch) wait for it. Copies and memsets move their bytes when replayed
// (Note [Copies take effect at enqueue]) -- every replay, never at capture; a simulated
// kernel's fill and a host function run when the replayed op completes. External event
// record / wait nodes record or wait on their event on the launch stream. What simcuda does
// not model: the branches of a forked graph run concurrently on a GPU but one after the
// other here, so a race *between two branches of one graph* is not reported (races between a
// replay and other streams are). Launching an exec into a capturing stream records its nodes
// into that capture (a child graph, flattened).
#include "graphs.h"

#include <cstdio>
#include <unordered_map>

#include "pending_work.h"
#include "stream_capture.h"

namespace simcuda {
namespace {

// Both under the state lock; keyed by handle (the object's address).
std::unordered_map<void*, std::unique_ptr<Graph>>& graphs() {
  static std::unordered_map<void*, std::unique_ptr<Graph>> made;
  return made;
}
std::unordered_map<void*, std::unique_ptr<Graph>>& execs() {
  static std::unordered_map<void*, std::unique_ptr<Graph>> made;
  return made;
}

}  // namespace

Graph* register_graph_locked(std::unique_ptr<Graph> graph) {
  Graph* handle = graph.get();
  graphs().emplace(static_cast<void*>(handle), std::move(graph));
  return handle;
}

Graph* resolve_graph_locked(void* handle) {
  auto found = graphs().find(handle);
  return found == graphs().end() ? nullptr : found->second.get();
}

Graph* instantiate_graph_locked(const Graph& graph) {
  auto made = std::make_unique<Graph>(graph);
  Graph* exec = made.get();
  execs().emplace(static_cast<void*>(exec), std::move(made));
  return exec;
}

Graph* resolve_exec_locked(void* handle) {
  auto found = execs().find(handle);
  return found == execs().end() ? nullptr : found->second.get();
}

bool destroy_graph_locked(void* handle) { return graphs().erase(handle) == 1; }
bool destroy_exec_locked(void* handle) { return execs().erase(handle) == 1; }

// Note [Graph replay]
CUresult launch_graph_locked(const Graph& exec, Stream& stream) {
  CUresult result = CUDA_SUCCESS;
  for (const GraphNode& node : exec.nodes) {
    if (stream.capture != nullptr) {  // a launch inside a capture is recorded, not run
      capture_node_locked(stream, node);  // chained after the stream's current dependencies
      continue;
    }
    if (node.at_replay) {
      node.at_replay(stream);
      continue;
    }
    launch_locked(stream, node.accesses, node.on_complete, node.what, node.modelled_bytes);
    if (node.effect && !node.effect()) result = CUDA_ERROR_INVALID_VALUE;
  }
  return result;
}

CUresult write_graph_dot_locked(const Graph& graph, const char* path) {
  std::FILE* out = std::fopen(path, "w");
  if (out == nullptr) return CUDA_ERROR_OPERATING_SYSTEM;
  std::fprintf(out, "digraph simcuda_graph {\n");
  size_t index = 0;
  for (const GraphNode& node : graph.nodes) {
    std::fprintf(out, "  node%zu [label=\"%zu: %s", index, index, node.what.c_str());
    if (node.modelled_bytes > 0) std::fprintf(out, " (%zu B)", node.modelled_bytes);
    std::fprintf(out, "\"];\n");
    for (size_t dependency : node.dependencies) std::fprintf(out, "  node%zu -> node%zu;\n", dependency, index);
    ++index;
  }
  std::fprintf(out, "}\n");
  return std::fclose(out) == 0 ? CUDA_SUCCESS : CUDA_ERROR_OPERATING_SYSTEM;
}

}  // namespace simcuda
