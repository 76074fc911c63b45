// Tasks by index on several threads, for the subcommands that run many independent ones
// (corpus replays, layouts). Invariant: task(i) runs exactly once for every i below
// `count`, on at most max(jobs, 1) threads, this one among them; it returns after all did.
#pragma once

#include <atomic>
#include <cstddef>
#include <thread>
#include <vector>

namespace fragless::bench {

// `task` must not throw (a thread's exception would end the program).
template <typename Task>
void run_in_parallel(std::size_t count, int jobs, Task&& task) {
  std::atomic<std::size_t> next{0};
  auto worker = [&] {
    for (std::size_t i = next++; i < count; i = next++) task(i);
  };
  std::vector<std::thread> threads;
  for (int j = 1; j < jobs; ++j) threads.emplace_back(worker);
  worker();
  for (std::thread& thread : threads) thread.join();
}

}  // namespace fragless::bench
