// A process that publishes known stats (publisher_fixture.hpp) and answers snapshot
// requests, for the fragless-stats tests. Prints "ready" when published, then waits until
// stdin closes (or 60 s). argv[1] == "--no-answer": never answers snapshot requests.
#include <cstdio>
#include <cstring>
#include <poll.h>
#include <unistd.h>

#include "fragless/stats_publisher.hpp"
#include "publisher_fixture.hpp"

int main(int argc, char** argv) {
  using namespace fragless;
  const bool answer = !(argc > 1 && std::strcmp(argv[1], "--no-answer") == 0);
  auto publisher = stats_publisher::create();
  if (!publisher) return 1;
  for (int device : fixture::devices) publisher->publish(device, fixture::known_stats(device));
  if (answer) publisher->start_request_thread([] { return fixture::known_snapshot(); }, std::chrono::milliseconds(5));
  std::printf("ready\n");
  std::fflush(stdout);
  pollfd input{STDIN_FILENO, POLLIN, 0};
  char buffer[64];
  while (::poll(&input, 1, 60000) > 0 && ::read(STDIN_FILENO, buffer, sizeof buffer) > 0) {
  }
  return 0;
}
