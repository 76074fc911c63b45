// A process holding known allocations in the real allocator (libfragless on simcuda) that
// publishes the allocator's own stats and snapshots for fragless-stats. Prints, in order:
// "requested <bytes> <count>", the allocator's stats JSON on one line, "ready"; then
// waits until stdin closes. libfragless's own publishing is expected to be off
// (FRAGLESS_CONF=publish_stats:False) so that this process's page is the one below.
// argv[1] == "--busy": four threads keep allocating and freeing blocks meanwhile (mostly
// small, every eighth large)
// (snapshots of a busy process, Note [Consistent snapshots] in fragless-stats).
#include <atomic>
#include <cstdio>
#include <cstring>
#include <poll.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "fragless/fragless.hpp"
#include "fragless/stats_publisher.hpp"

int main(int argc, char** argv) {
  using namespace fragless;
  const bool busy = argc > 1 && std::strcmp(argv[1], "--busy") == 0;
  const std::size_t sizes[] = {1000, 4096, 200000, 1 << 20, 3 << 20, 25 << 20, 64 << 20};
  std::vector<void*> blocks;
  std::size_t requested = 0;
  for (int round = 0; round < 3; ++round)
    for (std::size_t size : sizes) {
      blocks.push_back(allocate(size, 0, nullptr));
      requested += size;
    }
  // Free every third block: the cache now holds free blocks between live ones.
  for (std::size_t i = 0; i < blocks.size(); i += 3) {
    requested -= sizes[i % std::size(sizes)];
    deallocate(blocks[i]);
    blocks[i] = nullptr;
  }
  std::size_t live = 0;
  for (void* b : blocks) live += b != nullptr;

  auto publisher = stats_publisher::create();
  if (!publisher) return 1;
  const device_stats stats = get_device_stats(0);
  publisher->publish(0, stats);
  publisher->start_request_thread(
      [] {
        memory_snapshot s = snapshot(0);
        return s;
      },
      std::chrono::milliseconds(5));
  std::printf("requested %zu %zu\n", requested, live);
  std::string json = stats_json(0);
  for (char& c : json)
    if (c == '\n') c = ' ';
  std::printf("%s\nready\n", json.c_str());
  std::fflush(stdout);
  std::atomic<bool> stop{false};
  std::vector<std::thread> workers;
  for (int t = 0; busy && t < 4; ++t)
    workers.emplace_back([&stop, t] {
      std::vector<void*> mine(64, nullptr);
      for (std::size_t i = 0; !stop.load(std::memory_order_relaxed); ++i) {
        void*& slot = mine[i % mine.size()];
        if (slot != nullptr) deallocate(slot);
        // Mostly small blocks, and every eighth a large one (1-3 MiB): both pools change
        // while the snapshots are taken (Note [Frees in flight]).
        const std::size_t mixed = i * 97 + static_cast<std::size_t>(t) * 31;
        slot = allocate(i % 8 == 7 ? (std::size_t{1} << 20) + mixed % (std::size_t{2} << 20) : 512 + mixed % 8000, 0,
                        nullptr);
      }
      for (void* b : mine)
        if (b != nullptr) deallocate(b);
    });
  pollfd input{STDIN_FILENO, POLLIN, 0};
  char buffer[64];
  while (::poll(&input, 1, 60000) > 0 && ::read(STDIN_FILENO, buffer, sizeof buffer) > 0) {
  }
  stop.store(true);
  for (std::thread& worker : workers) worker.join();
  for (void* b : blocks)
    if (b != nullptr) deallocate(b);
  return 0;
}
