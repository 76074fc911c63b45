// CUDA graphs on simcuda (Note [Graph replay] in graphs.cpp): the nodes a stream capture
// recorded, executable copies of them, and their replay on a stream.
// Invariant (state lock held): a graph's nodes are in capture order and every node comes
// after the nodes it depends on, so replaying them in order on one stream honours every edge.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "device_state.h"

namespace simcuda {

// One recorded operation: what launch_locked would have enqueued, plus what a copy, memset
// or event node does when it is replayed.
struct GraphNode {
  std::string what;                        // "kernel", "memcpyAsync", "memset", "hostFunc", ...
  std::vector<Access> accesses;            // device ranges, for the race oracle at replay
  size_t modelled_bytes = 0;               // adds to the replayed op's simulated duration
  std::function<void()> on_complete;       // runs when the replayed op completes (lock held)
  std::function<bool()> effect;            // copies/memsets: moves the bytes at replay; false: a
                                           // range was not accessible then
  std::function<void(Stream&)> at_replay;  // event record/wait nodes: acts on the launch stream
                                           // instead of enqueuing an op
  std::vector<size_t> dependencies;        // indices of the nodes this one runs after
};

struct Graph {
  std::deque<GraphNode> nodes;  // a deque, so node handles (addresses) survive later captures
};

// Graph objects; their handles are their addresses.
Graph* register_graph_locked(std::unique_ptr<Graph> graph);  // cuStreamEndCapture hands it over
Graph* resolve_graph_locked(void* handle);                   // finished graphs only
Graph* instantiate_graph_locked(const Graph& graph);         // an exec: a copy of the nodes
Graph* resolve_exec_locked(void* handle);
bool destroy_graph_locked(void* handle);
bool destroy_exec_locked(void* handle);

// Enqueues the exec's nodes on `stream` in order, as if enqueued there now
// (Note [Graph replay]); CUDA_ERROR_INVALID_VALUE if a copy or memset met memory that is gone.
CUresult launch_graph_locked(const Graph& exec, Stream& stream);

// cuGraphDebugDotPrint: one line per node and per edge, in Graphviz syntax.
CUresult write_graph_dot_locked(const Graph& graph, const char* path);

}  // namespace simcuda
