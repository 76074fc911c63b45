// call_log: see call_log.hpp and Note [Call log] there.
#include "replay/call_log.hpp"

#include <cerrno>
#include <cstring>

namespace fragless::bench {

call_log::~call_log() {
  if (file_ != nullptr) std::fclose(file_);
}

bool call_log::open(const std::string& path, std::string& error) {
  file_ = std::fopen(path.c_str(), "w");
  if (file_ == nullptr) {
    error = "cannot write call log " + path + ": " + std::strerror(errno);
    return false;
  }
  std::fputs("pass,event,op,size_bytes,stream,reserved_bytes,live_bytes,allocs,frees,maps,unmaps,set_access,event_calls,"
             "syncs\n",
             file_);
  return true;
}

call_log::snapshot call_log::read(const device_counters& counters) {
  snapshot s;
  s.counts = counters.read();
  s.set_access = counters.count("cuMemSetAccess");
  s.event_calls =
      counters.count("cudaEventRecord") + counters.count("cudaEventQuery") + counters.count("cudaStreamWaitEvent");
  return s;
}

void call_log::start_from(const device_counters& counters) {
  if (file_ != nullptr) last_ = read(counters);
}

bool call_log::moved(const device_counters& counters) {
  if (file_ == nullptr) return false;
  now_ = read(counters);
  return !(now_ == last_);
}

void call_log::write(int pass, std::size_t event, const char* op, std::uint64_t size_bytes, std::size_t stream_index,
                     std::uint64_t reserved_bytes, std::uint64_t live_bytes) {
  if (file_ == nullptr) return;
  const auto delta = [](std::uint64_t after, std::uint64_t before) {
    return static_cast<unsigned long long>(after - before);
  };
  std::fprintf(file_, "%d,%zu,%s,%llu,%zu,%llu,%llu,%llu,%llu,%llu,%llu,%llu,%llu,%llu\n", pass, event, op,
               static_cast<unsigned long long>(size_bytes), stream_index, static_cast<unsigned long long>(reserved_bytes),
               static_cast<unsigned long long>(live_bytes), delta(now_.counts.allocs, last_.counts.allocs),
               delta(now_.counts.frees, last_.counts.frees), delta(now_.counts.maps, last_.counts.maps),
               delta(now_.counts.unmaps, last_.counts.unmaps), delta(now_.set_access, last_.set_access),
               delta(now_.event_calls, last_.event_calls), delta(now_.counts.syncs, last_.counts.syncs));
  last_ = now_;
}

}  // namespace fragless::bench
