// The emulated devices: memory regions, VMM handles, streams, events, contexts, races.
//
// All of simcuda's state lives in one State object behind one mutex. Functions named
// *_locked expect that mutex held (take it with `auto lock = lock_state();`).
// Invariants (with the lock held):
//   used_bytes(device) == sum of page-rounded cudaMalloc regions + sizes of live physical handles
//   regions never overlap; each lies inside a device window or a VMM reservation
//   stream.completed <= stream.launched and stream.pending holds exactly the ops in between
#pragma once

#include <cuda.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace simcuda {

constexpr size_t kPageBytes = 4096;
constexpr size_t kVmmGranularityBytes = size_t{2} << 20;
constexpr uint64_t kDefaultCapacityBytes = uint64_t{80} << 30;

// Sequence number each stream (by id) has reached; see Note [Vector clocks].
using VectorClock = std::unordered_map<uint64_t, uint64_t>;

struct Access {
  uintptr_t begin;
  uintptr_t end;
  bool writes;
};

// A simulated kernel, copy, memset or deferred free, pending on one stream.
struct PendingOp {
  uint64_t kernel_id = 0;
  uint64_t sequence = 0;              // 1-based position on its stream
  std::vector<Access> accesses;       // device ranges only
  VectorClock dependencies;           // other streams' work this op is ordered after
  std::function<void()> on_complete;  // runs with the state lock held
  uint64_t end_time_ns = 0;           // simulated device time when it finishes
  std::string what;
};

enum class StreamKind { legacy, per_thread, created };

struct Capture;  // stream_capture.h

struct Stream {
  uint64_t id = 0;
  int device = 0;
  unsigned flags = 0;  // CU_STREAM_NON_BLOCKING
  int priority = 0;
  StreamKind kind = StreamKind::created;
  uint64_t launched = 0;   // sequence of the last op launched
  uint64_t completed = 0;  // sequence of the last op completed
  VectorClock waits;       // merged from events waited on and implicit syncs
  uint64_t ready_time_ns = 0;  // simulated time when everything launched here is done
  std::deque<PendingOp> pending;
  Capture* capture = nullptr;  // the capture sequence this stream belongs to (Note [Stream capture])
  bool blocking() const { return kind != StreamKind::created || (flags & CU_STREAM_NON_BLOCKING) == 0; }
};

struct Event {
  unsigned flags = 0;  // CU_EVENT_DISABLE_TIMING, ...
  int device = 0;
  bool recorded = false;
  VectorClock clock;     // what must complete for the event to complete
  uint64_t time_ns = 0;  // simulated completion time
  // Note [Stream capture]: the capture it was last recorded in (0: outside any), and the
  // graph nodes (indices) that record captured -- what a stream waiting on it then follows.
  uint64_t captured_in = 0;
  std::vector<size_t> captured_nodes;
};

enum class RegionKind { malloc, vmm_mapping };

// A contiguous range of device addresses backed by memory right now.
struct Region {
  uintptr_t begin = 0;
  size_t bytes = 0;         // usable bytes (the request for cudaMalloc)
  size_t mapped_bytes = 0;  // page-rounded extent that is mapped
  RegionKind kind = RegionKind::malloc;
  int device = 0;
  bool accessible = false;  // read-write now (VMM: after cuMemSetAccess)
  uint64_t handle = 0;      // VMM: physical handle id
  size_t handle_offset = 0;
  bool from_pool = false;   // cudaMallocAsync
  bool free_pending = false;  // cudaFreeAsync enqueued, not yet completed
};

struct Reservation {
  uintptr_t begin = 0;
  size_t bytes = 0;
  size_t mmap_bytes = 0;   // what was mmapped (before alignment trimming it equals bytes)
};

struct PhysicalHandle {
  int fd = -1;
  size_t fd_offset = 0;    // where the handle's bytes start in `fd` (Note [Physical arena])
  bool owns_fd = true;     // false: a slice of the shared arena file
  size_t bytes = 0;
  int device = 0;
  int mappings = 0;        // live cuMemMap mappings using it
  int references = 1;      // cuMemCreate + cuMemRetainAllocationHandle - cuMemRelease
  bool counted = true;     // counts against capacity (imported handles do not)
  CUmemAllocationProp properties{};
};

struct PrimaryContext {
  int device = 0;
  bool active = false;
  unsigned flags = 0;
  int retains = 0;
};

struct MemoryPool {
  int device = 0;
  uint64_t release_threshold = 0;
  uint64_t reserved_bytes = 0, reserved_high = 0, used_bytes = 0, used_high = 0;
};

struct Device {
  uint64_t capacity_bytes = kDefaultCapacityBytes;
  uint64_t used_bytes = 0;
  uintptr_t window_begin = 0;  // PROT_NONE reservation that cudaMalloc carves from
  size_t window_bytes = 0;
  std::map<uintptr_t, size_t> free_spans;  // begin -> bytes, address ordered, coalesced
  std::unique_ptr<Stream> legacy_stream;
  std::unique_ptr<PrimaryContext> context;
  std::unique_ptr<MemoryPool> default_pool;
  std::vector<bool> peer_enabled;
};

struct State {
  std::vector<Device> devices;
  std::map<uintptr_t, Region> regions;            // by begin
  std::map<uintptr_t, Reservation> reservations;  // by begin
  std::unordered_map<uint64_t, PhysicalHandle> handles;
  std::unordered_map<void*, std::unique_ptr<Stream>> streams;  // created + per-thread, by handle
  std::unordered_map<uint64_t, Stream*> stream_by_id;           // every stream incl. legacy and destroyed
  // Note [Destroyed streams]: destroyed streams whose work is still pending (no handle).
  std::vector<std::unique_ptr<Stream>> destroyed_streams;
  // Note [Destroyed streams]: the objects behind destroyed handles, newest last; the next
  // stream created takes the newest, so it receives the handle just destroyed.
  std::vector<std::unique_ptr<Stream>> reusable_stream_objects;
  std::unordered_map<void*, std::unique_ptr<Event>> events;
  std::map<uintptr_t, int> ipc_opened;  // base -> open count
  std::vector<std::string> race_reports;
  uint64_t race_count = 0;
  bool auto_complete = false;
  uint64_t kernel_ns = 1000;  // modelled duration of one simulated op (SIMCUDA_KERNEL_NS)
  uint64_t next_stream_id = 1;
  uint64_t next_kernel_id = 1;
  uint64_t next_handle_id = 1;
};

// Holds the state mutex. When released it runs, outside the lock, the host callbacks that
// work completed under it queued (Note [Host callbacks] in device_state.cpp).
class [[nodiscard]] StateLock {
 public:
  StateLock();
  ~StateLock();
  StateLock(const StateLock&) = delete;
  StateLock& operator=(const StateLock&) = delete;

 private:
  std::unique_lock<std::mutex> lock_;
};

// The lock and the state; the first call reads the environment and maps the device windows.
StateLock lock_state();
State& state();
// Runs `callback` once the current StateLock is released (cuLaunchHostFunc and friends).
void queue_host_callback_locked(std::function<void()> callback);

// Per-thread current device (the runtime's cudaSetDevice and the driver's current context).
int current_device();  // 0 when nothing was made current yet
bool has_current_context();
void set_current_device(int device);  // -1 clears
bool valid_device_locked(int device);
PrimaryContext& primary_context_locked(int device);

}  // namespace simcuda
