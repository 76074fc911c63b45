// Driver API: streams, events, context synchronization and (no-op) kernel launches, on the
// pending-work model of core/pending_work (Notes [Vector clocks], [Legacy default stream]),
// under the capture rules of core/stream_capture (Note [Stream capture]).
// Invariant: a query answers CUDA_ERROR_NOT_READY exactly while the work it names is pending.
#include <algorithm>

#include "driver_common.h"

using namespace simcuda;

namespace {

// Note [Stream capture]: querying or synchronizing the legacy stream while a blocking stream
// captures, a capturing stream, or any stream while a capture prohibits it, is refused.
// Takes the state lock; runs `body(stream)` when the call may go on (Note [Stream arguments]).
template <typename Body>
CUresult on_waitable_stream(CUstream handle, Body&& body) {
  auto lock = lock_state();
  return on_work_stream_locked(handle, [&body](Stream& stream) -> CUresult {
    if (CUresult refused = check_stream_not_capturing_locked(stream); refused != CUDA_SUCCESS) return refused;
    if (CUresult refused = check_unsafe_call_locked(); refused != CUDA_SUCCESS) return refused;
    return body(stream);
  });
}

// The same for an event: unknown is CUDA_ERROR_INVALID_HANDLE; a captured event, or any
// event while a capture prohibits waiting, is refused.
template <typename Body>
CUresult on_waitable_event(CUevent handle, Body&& body) {
  auto lock = lock_state();
  Event* event = resolve_event_locked(handle);
  if (event == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if (CUresult refused = check_event_not_captured_locked(*event); refused != CUDA_SUCCESS) return refused;
  if (CUresult refused = check_unsafe_call_locked(); refused != CUDA_SUCCESS) return refused;
  return body(*event);
}

// The stream getters: a null output is CUDA_ERROR_INVALID_VALUE, answered before the handle.
template <typename Value, typename Read>
CUresult read_stream(CUstream handle, Value* out, Read read) {
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto lock = lock_state();
  return on_stream_locked(handle, [&](Stream& stream) {
    *out = read(stream);
    return CUDA_SUCCESS;
  });
}

}  // namespace

namespace {

constexpr int kLeastPriority = 0;
constexpr int kGreatestPriority = -5;

CUresult create_stream(CUstream* out, unsigned int flags, int priority) {
  if (out == nullptr || (flags & ~static_cast<unsigned>(CU_STREAM_NON_BLOCKING)) != 0) return CUDA_ERROR_INVALID_VALUE;
  auto lock = lock_state();
  priority = std::clamp(priority, kGreatestPriority, kLeastPriority);
  *out = to_handle(create_stream_locked(context_device(), flags, priority));
  return CUDA_SUCCESS;
}

// Note [Stream capture]: on a capturing stream the event becomes captured, or with
// CU_EVENT_RECORD_EXTERNAL an event record node.
CUresult record_event(CUevent event, CUstream stream, unsigned int flags) {
  if ((flags & ~static_cast<unsigned>(CU_EVENT_RECORD_EXTERNAL)) != 0) return CUDA_ERROR_INVALID_VALUE;
  auto lock = lock_state();
  Event* recorded = resolve_event_locked(event);
  Stream* resolved = resolve_stream_locked(stream);
  if (recorded == nullptr || resolved == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if (CUresult refused = check_legacy_stream_use_locked(*resolved, true); refused != CUDA_SUCCESS) return refused;
  if ((flags & CU_EVENT_RECORD_EXTERNAL) != 0) return capture_external_record_locked(*recorded, *resolved);
  record_event_locked(*recorded, *resolved);
  return CUDA_SUCCESS;
}

// Writes 0 unless it answers CUDA_SUCCESS.
CUresult elapsed_ms(float* milliseconds, CUevent start_handle, CUevent end_handle) {
  if (milliseconds == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *milliseconds = 0;
  auto lock = lock_state();
  Event* start = resolve_event_locked(start_handle);
  Event* end = resolve_event_locked(end_handle);
  if (start == nullptr || end == nullptr || ((start->flags | end->flags) & CU_EVENT_DISABLE_TIMING) != 0)
    return CUDA_ERROR_INVALID_HANDLE;
  if (CUresult refused = check_event_not_captured_locked(*start); refused != CUDA_SUCCESS) return refused;  // Note [Stream capture]
  if (CUresult refused = check_event_not_captured_locked(*end); refused != CUDA_SUCCESS) return refused;
  if (!start->recorded || !end->recorded || !event_complete_locked(*start) || !event_complete_locked(*end))
    return CUDA_ERROR_NOT_READY;
  *milliseconds = static_cast<float>((static_cast<double>(end->time_ns) - static_cast<double>(start->time_ns)) / 1e6);
  return CUDA_SUCCESS;
}

}  // namespace

SIMCUDA_EXPORT CUresult CUDAAPI cuStreamCreate(CUstream* stream, unsigned int flags) {
  SIMCUDA_DRIVER_ENTER();
  return create_stream(stream, flags, 0);
}

SIMCUDA_EXPORT CUresult CUDAAPI cuStreamCreateWithPriority(CUstream* stream, unsigned int flags, int priority) {
  SIMCUDA_DRIVER_ENTER();
  return create_stream(stream, flags, priority);
}

SIMCUDA_EXPORT CUresult CUDAAPI cuCtxGetStreamPriorityRange(int* least, int* greatest) {
  SIMCUDA_DRIVER_ENTER();
  if (least != nullptr) *least = kLeastPriority;
  if (greatest != nullptr) *greatest = kGreatestPriority;
  return CUDA_SUCCESS;
}

SIMCUDA_EXPORT CUresult CUDAAPI cuStreamDestroy_v2(CUstream stream) {
  SIMCUDA_DRIVER_ENTER();
  auto lock = lock_state();
  return destroy_stream_locked(stream);
}

SIMCUDA_EXPORT CUresult CUDAAPI cuStreamQuery(CUstream stream) {
  SIMCUDA_DRIVER_ENTER();
  return on_waitable_stream(stream, [](Stream& resolved) {
    return stream_idle_locked(resolved) ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
  });
}

SIMCUDA_EXPORT CUresult CUDAAPI cuStreamSynchronize(CUstream stream) {
  SIMCUDA_DRIVER_ENTER();
  return on_waitable_stream(stream, [](Stream& resolved) {
    synchronize_stream_locked(resolved);
    return CUDA_SUCCESS;
  });
}

SIMCUDA_EXPORT CUresult CUDAAPI cuStreamWaitEvent(CUstream stream, CUevent event, unsigned int flags) {
  SIMCUDA_DRIVER_ENTER();
  if ((flags & ~static_cast<unsigned>(CU_EVENT_WAIT_EXTERNAL)) != 0) return CUDA_ERROR_INVALID_VALUE;
  auto lock = lock_state();
  Stream* resolved = resolve_stream_locked(stream);
  Event* waited = resolve_event_locked(event);
  if (resolved == nullptr || waited == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  // Note [Stream capture]: a fork, a join, an external wait node, or a capture rule broken.
  if (CUresult refused = check_legacy_stream_use_locked(*resolved, true); refused != CUDA_SUCCESS) return refused;
  bool ordinary = false;
  const bool external = (flags & CU_EVENT_WAIT_EXTERNAL) != 0;
  if (CUresult result = capture_wait_locked(*resolved, *waited, external, &ordinary); result != CUDA_SUCCESS)
    return result;
  if (ordinary) wait_event_locked(*resolved, *waited);
  return CUDA_SUCCESS;
}

SIMCUDA_EXPORT CUresult CUDAAPI cuStreamGetPriority(CUstream stream, int* priority) {
  SIMCUDA_DRIVER_ENTER();
  return read_stream(stream, priority, [](const Stream& resolved) { return resolved.priority; });
}

SIMCUDA_EXPORT CUresult CUDAAPI cuStreamGetFlags(CUstream stream, unsigned int* flags) {
  SIMCUDA_DRIVER_ENTER();
  return read_stream(stream, flags, [](const Stream& resolved) { return resolved.flags; });
}

// Note [Stream capture]: asking a capturing stream's device is refused like a query of it
// (seen on a GPU: cudaStreamGetDevice on a stream capturing in global mode).
SIMCUDA_EXPORT CUresult CUDAAPI cuStreamGetDevice(CUstream stream, CUdevice* device) {
  SIMCUDA_DRIVER_ENTER();
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto lock = lock_state();
  return on_stream_locked(stream, [&](Stream& resolved) {
    if (CUresult refused = check_stream_not_capturing_locked(resolved); refused != CUDA_SUCCESS) return refused;
    *device = resolved.device;
    return CUDA_SUCCESS;
  });
}

SIMCUDA_EXPORT CUresult CUDAAPI cuStreamGetId(CUstream stream, unsigned long long* id) {
  SIMCUDA_DRIVER_ENTER();
  return read_stream(stream, id, [](const Stream& resolved) { return resolved.id; });
}

SIMCUDA_EXPORT CUresult CUDAAPI cuCtxSynchronize(void) {
  SIMCUDA_DRIVER_ENTER();
  auto lock = lock_state();
  if (CUresult refused = check_unsafe_call_locked(); refused != CUDA_SUCCESS) return refused;
  complete_device_locked(context_device());
  return CUDA_SUCCESS;
}

SIMCUDA_EXPORT CUresult CUDAAPI cuEventCreate(CUevent* event, unsigned int flags) {
  SIMCUDA_DRIVER_ENTER();
  if (event == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto lock = lock_state();
  auto created = std::make_unique<Event>();
  created->flags = flags;
  created->device = context_device();
  *event = to_handle(created.get());
  state().events.emplace(static_cast<void*>(created.get()), std::move(created));
  return CUDA_SUCCESS;
}

SIMCUDA_EXPORT CUresult CUDAAPI cuEventRecord(CUevent event, CUstream stream) {
  SIMCUDA_DRIVER_ENTER();
  return record_event(event, stream, CU_EVENT_RECORD_DEFAULT);
}

SIMCUDA_EXPORT CUresult CUDAAPI cuEventRecordWithFlags(CUevent event, CUstream stream, unsigned int flags) {
  SIMCUDA_DRIVER_ENTER();
  return record_event(event, stream, flags);
}

SIMCUDA_EXPORT CUresult CUDAAPI cuEventQuery(CUevent event) {
  SIMCUDA_DRIVER_ENTER();
  return on_waitable_event(event, [](Event& queried) {
    return event_complete_locked(queried) ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
  });
}

SIMCUDA_EXPORT CUresult CUDAAPI cuEventSynchronize(CUevent event) {
  SIMCUDA_DRIVER_ENTER();
  return on_waitable_event(event, [](Event& waited) {
    synchronize_event_locked(waited);
    return CUDA_SUCCESS;
  });
}

SIMCUDA_EXPORT CUresult CUDAAPI cuEventDestroy_v2(CUevent event) {
  SIMCUDA_DRIVER_ENTER();
  auto lock = lock_state();
  return state().events.erase(static_cast<void*>(event)) == 1 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

SIMCUDA_EXPORT CUresult CUDAAPI cuEventElapsedTime(float* milliseconds, CUevent start, CUevent end) {
  SIMCUDA_DRIVER_ENTER();
  return elapsed_ms(milliseconds, start, end);
}

SIMCUDA_EXPORT CUresult CUDAAPI cuEventElapsedTime_v2(float* milliseconds, CUevent start, CUevent end) {
  SIMCUDA_DRIVER_ENTER();
  return elapsed_ms(milliseconds, start, end);
}

// Real kernels are not run: a launch is accepted and completes at once.
SIMCUDA_EXPORT CUresult CUDAAPI cuLaunchKernel(CUfunction, unsigned int, unsigned int, unsigned int, unsigned int,
                                               unsigned int, unsigned int, unsigned int, CUstream stream, void**,
                                               void**) {
  SIMCUDA_DRIVER_ENTER();
  auto lock = lock_state();
  return on_work_stream_locked(stream, [](Stream& resolved) {
    // Kernels run nothing here; a capture still records a (no-op) kernel node.
    std::vector<Access> no_accesses;
    std::function<void()> nothing;
    capture_op_locked(resolved, no_accesses, nothing, nullptr, "kernel", 0);
    return CUDA_SUCCESS;
  });
}

// Note [Host callbacks]: the function runs when this op completes, after the lock is released.
SIMCUDA_EXPORT CUresult CUDAAPI cuLaunchHostFunc(CUstream stream, CUhostFn function, void* user_data) {
  SIMCUDA_DRIVER_ENTER();
  if (function == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto lock = lock_state();
  return on_work_stream_locked(stream, [&](Stream& resolved) {
    launch_locked(resolved, {}, [function, user_data] { queue_host_callback_locked([=] { function(user_data); }); },
                  "hostFunc", 0);
    return CUDA_SUCCESS;
  });
}

SIMCUDA_EXPORT CUresult CUDAAPI cuStreamAddCallback(CUstream stream, CUstreamCallback callback, void* user_data,
                                                    unsigned int flags) {
  SIMCUDA_DRIVER_ENTER();
  if (callback == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  auto lock = lock_state();
  return on_work_stream_locked(stream, [&](Stream& resolved) {
    // Note [Stream capture]: CUDA documents stream callbacks as unsupported in a capture.
    if (CUresult refused = refuse_uncapturable_locked(resolved); refused != CUDA_SUCCESS) return refused;
    launch_locked(resolved, {}, [stream, callback, user_data] {
      queue_host_callback_locked([=] { callback(stream, CUDA_SUCCESS, user_data); });
    }, "streamCallback", 0);
    return CUDA_SUCCESS;
  });
}
