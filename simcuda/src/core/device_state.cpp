// The State singleton: created on first use from the environment (SIMCUDA_DEVICES,
// SIMCUDA_MEMORY, SIMCUDA_KERNEL_NS, SIMCUDA_AUTO_COMPLETE); see device_state.h.
#include "device_state.h"

#include <pthread.h>
#include <sys/mman.h>

#include <algorithm>

#include "env_parse.h"

namespace simcuda {
namespace {

constexpr int kMaxDevices = 16;
constexpr size_t kMinWindowBytes = size_t{256} << 30;
constexpr size_t kMaxWindowBytes = size_t{4} << 40;

std::mutex g_state_mutex;

// Note [Fork while inside simcuda]
// A process may fork while another thread is inside simcuda. The state lock is taken
// around fork() (pthread_atfork) so the child never inherits it held, and the child keeps a
// consistent device state (a real driver is unusable in such a child; simcuda stays usable,
// which only makes tests of fork-safety stricter).
void lock_for_fork() { g_state_mutex.lock(); }
void unlock_after_fork() { g_state_mutex.unlock(); }
__attribute__((constructor)) void register_fork_handlers() {  // Note [Fork while inside simcuda]
  pthread_atfork(lock_for_fork, unlock_after_fork, unlock_after_fork);
}

// Note [Device windows]
// Each device owns one PROT_NONE, MAP_NORESERVE mapping (4x its capacity, at least 256 GiB)
// that cudaMalloc carves from. Device pointers therefore never alias the host heap, and a
// freed range goes back to PROT_NONE so a stray host touch faults instead of reading stale
// bytes. The window costs address space only. Where the process has less address space
// than that (under valgrind, whose address space ends at 128 GiB or earlier, or a ulimit
// -v), the window is halved until it maps, down to 4x the capacity: a smaller
// SIMCUDA_MEMORY then lets the emulation run there.
void map_window(Device& device) {
  const size_t wanted = static_cast<size_t>(device.capacity_bytes) * 4;
  size_t bytes = std::clamp<size_t>(wanted, kMinWindowBytes, kMaxWindowBytes);
  void* base = mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  while (base == MAP_FAILED && bytes / 2 >= wanted && bytes / 2 != 0) {
    bytes /= 2;
    base = mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  }
  if (base == MAP_FAILED) {
    warn("could not reserve the device address window; cudaMalloc will fail");
    return;
  }
  device.window_begin = reinterpret_cast<uintptr_t>(base);
  device.window_bytes = bytes;
  device.free_spans.emplace(device.window_begin, bytes);
}

State* create_state() {
  auto* created = new State();  // never destroyed: CUDA calls may come from static destructors
  int device_count = 1;
  if (auto text = env_string("SIMCUDA_DEVICES")) {
    auto parsed = parse_unsigned(*text);
    if (parsed && *parsed >= 1 && *parsed <= kMaxDevices) device_count = static_cast<int>(*parsed);
    else warn("SIMCUDA_DEVICES='" + *text + "' is not 1..16; using 1");
  }
  uint64_t capacity = kDefaultCapacityBytes;
  if (auto text = env_string("SIMCUDA_MEMORY")) {
    auto parsed = parse_bytes(*text);
    if (parsed && *parsed > 0) capacity = *parsed;
    else warn("SIMCUDA_MEMORY='" + *text + "' is not a byte count (e.g. 16GiB); using 80GiB");
  }
  if (auto text = env_string("SIMCUDA_KERNEL_NS")) {
    auto parsed = parse_unsigned(*text);
    if (parsed) created->kernel_ns = *parsed;
    else warn("SIMCUDA_KERNEL_NS='" + *text + "' is not a number; using 1000");
  }
  if (auto text = env_string("SIMCUDA_AUTO_COMPLETE")) created->auto_complete = *text != "0";
  created->devices.resize(static_cast<size_t>(device_count));
  for (int index = 0; index < device_count; ++index) {
    Device& device = created->devices[static_cast<size_t>(index)];
    device.capacity_bytes = capacity;
    map_window(device);
    device.legacy_stream = std::make_unique<Stream>();
    device.legacy_stream->id = created->next_stream_id++;
    device.legacy_stream->device = index;
    device.legacy_stream->kind = StreamKind::legacy;
    created->stream_by_id[device.legacy_stream->id] = device.legacy_stream.get();
    device.context = std::make_unique<PrimaryContext>();
    device.context->device = index;
    device.default_pool = std::make_unique<MemoryPool>();
    device.default_pool->device = index;
    device.peer_enabled.assign(static_cast<size_t>(device_count), false);
  }
  return created;
}

thread_local int t_current_device = -1;

}  // namespace

State& state() {
  static State* instance = create_state();
  return *instance;
}

namespace {
// Note [No guarded statics on entry] (entry_scope.h): the state is made when the library is
// loaded, so no thread can be inside its initializer when another forks.
__attribute__((constructor)) void create_state_at_load() { (void)state(); }
}  // namespace

// Note [Host callbacks]
// Host functions enqueued on a stream (cudaLaunchHostFunc, cudaStreamAddCallback) run when
// their op completes. Completion happens with the state lock held, and a callback may call
// CUDA, so completion only queues the callback on the completing thread; the StateLock that
// thread holds runs the queue right after unlocking, in completion order.
namespace {
thread_local std::vector<std::function<void()>> t_host_callbacks;
}

void queue_host_callback_locked(std::function<void()> callback) { t_host_callbacks.push_back(std::move(callback)); }

StateLock::StateLock() {
  state();  // created before the first lock (static initialisation is thread-safe)
  lock_ = std::unique_lock<std::mutex>(g_state_mutex);
}

StateLock::~StateLock() {
  lock_.unlock();
  while (!t_host_callbacks.empty()) {
    std::vector<std::function<void()>> ready;
    ready.swap(t_host_callbacks);
    for (auto& callback : ready) callback();
  }
}

StateLock lock_state() { return StateLock(); }

int current_device() { return t_current_device < 0 ? 0 : t_current_device; }
bool has_current_context() { return t_current_device >= 0; }
void set_current_device(int device) { t_current_device = device; }

bool valid_device_locked(int device) {
  return device >= 0 && device < static_cast<int>(state().devices.size());
}

PrimaryContext& primary_context_locked(int device) {
  return *state().devices[static_cast<size_t>(device)].context;
}

}  // namespace simcuda
