// Property tests over generated corpus seeds replayed through fragless on simcuda, every
// family: live blocks never overlap, the bytes written at the head and tail of each block
// are intact when it is freed (fill patterns), the race oracle stays at zero while each
// block is written by a simulated kernel on its stream at allocation and read at its free,
// and reserved bytes stay within the stated bound of the live bytes at every event:
//   reserved <= 8 x (peak live bytes so far) + 256 MiB
// (a sanity bound against leaks and runaway growth, not the placement goal, which the
// corpus benchmark measures; fragless reached 4.2x on corpus:huge-tensors:1000, so a 4x
// bound fails today -- the placement work should make it hold). Seeds: FRAGLESS_CORPUS_TEST_SEEDS (default 2 per family,
// drawn from FRAGLESS_CORPUS_TEST_FIRST_SEED, default 1000).
#include <catch2/catch.hpp>

#include <simcuda/control.h>

#include "replay/cuda_streams.hpp"
#include "replay/live_block_checker.hpp"
#include "replay/replay_allocator.hpp"
#include "workloads/corpus.hpp"

#include <cstdlib>
#include <cstring>
#include <unordered_map>

using namespace fragless::bench;

namespace {

constexpr std::size_t pattern_bytes = 256;

std::uint64_t env_number(const char* name, std::uint64_t fallback) {
  const char* text = std::getenv(name);
  return text == nullptr || *text == '\0' ? fallback : std::strtoull(text, nullptr, 10);
}

std::uint8_t pattern_byte(std::uint64_t id, std::size_t offset) {
  return static_cast<std::uint8_t>((id * 131 + offset * 7 + 1) & 0xff);
}

// Writes (or checks) the pattern over the first and last pattern_bytes of the block.
bool pattern(void* block, std::uint64_t size, std::uint64_t id, bool write) {
  auto* bytes = static_cast<std::uint8_t*>(block);
  const std::size_t head = static_cast<std::size_t>(std::min<std::uint64_t>(size, pattern_bytes));
  // The tail copy only where it cannot overlap the head.
  for (std::size_t part = 0; part < (size >= 2 * pattern_bytes ? 2u : 1u); ++part) {
    const std::uint64_t start = part == 0 ? 0 : size - head;
    for (std::size_t i = 0; i < head; ++i) {
      std::uint8_t& byte = bytes[start + i];
      const std::uint8_t want = pattern_byte(id, part * pattern_bytes + i);
      if (write) byte = want;
      else if (byte != want) return false;
    }
  }
  return true;
}

}  // namespace

TEST_CASE("corpus seeds through fragless: no overlap, data intact, no races, reserved bounded", "[bench][corpus]") {
  peer_creation peer = create_peer("fragless", "");
  if (!peer.allocator) {
    WARN("fragless peer not built: " << peer.unavailable_reason);
    return;
  }
  replay_allocator& allocator = *peer.allocator;
  const std::uint64_t seeds = env_number("FRAGLESS_CORPUS_TEST_SEEDS", 2);
  const std::uint64_t first_seed = env_number("FRAGLESS_CORPUS_TEST_FIRST_SEED", 1000);
  simcuda_set_auto_complete(0);
  for (const std::string& family : corpus_families()) {
    for (std::uint64_t seed = first_seed; seed < first_seed + seeds; ++seed) {
      INFO(corpus_source(family, seed));
      const fragless::traces::trace t = generate_corpus_workload(family, seed);
      const std::vector<stream_handle> streams = create_replay_streams(t.stream_count);
      simcuda_race_reset();
      struct live {
        void* pointer;
        std::uint64_t size;
        stream_handle stream;
      };
      std::unordered_map<std::uint64_t, live> blocks;
      live_block_checker checker;
      std::uint64_t live_bytes = 0, peak_live = 0, corrupted = 0, over_bound = 0, failed = 0;
      std::string conflict, first_over_bound;
      for (std::size_t i = 0; i < t.events.size(); ++i) {
        const auto& e = t.events[i];
        stream_handle stream = streams[e.stream_index];
        if (e.op == fragless::traces::trace_op::alloc) {
          void* pointer = allocator.allocate(e.size_bytes, stream);
          if (pointer == nullptr) {
            ++failed;
            continue;
          }
          REQUIRE(checker.insert(reinterpret_cast<std::uintptr_t>(pointer), e.size_bytes, &conflict));
          pattern(pointer, e.size_bytes, e.block_id, true);
          simcuda_launch(stream, pointer, e.size_bytes, 1);
          blocks[e.block_id] = live{pointer, e.size_bytes, stream};
          live_bytes += e.size_bytes;
          peak_live = std::max(peak_live, live_bytes);
        } else {
          auto found = blocks.find(e.block_id);
          if (found == blocks.end()) continue;
          const live block = found->second;
          blocks.erase(found);
          if (!pattern(block.pointer, block.size, e.block_id, false)) ++corrupted;
          simcuda_launch(block.stream, block.pointer, block.size, 0);
          checker.erase(reinterpret_cast<std::uintptr_t>(block.pointer));
          allocator.deallocate(block.pointer, block.size, block.stream);
          live_bytes -= block.size;
        }
        if (i % 8 == 0) simcuda_advance(stream, 1 + i % 5);
        const std::uint64_t reserved = allocator.reserved_bytes();
        if (reserved > 8 * peak_live + (std::uint64_t{256} << 20) && over_bound++ == 0) {
          first_over_bound = "event " + std::to_string(i) + ": reserved " + std::to_string(reserved >> 20) +
                             " MiB, peak live so far " + std::to_string(peak_live >> 20) + " MiB";
        }
      }
      for (auto& [id, block] : blocks) {
        if (!pattern(block.pointer, block.size, id, false)) ++corrupted;
        allocator.deallocate(block.pointer, block.size, block.stream);
      }
      simcuda_complete_all();
      allocator.release_cached();
      destroy_replay_streams(streams);
      CHECK(failed == 0);
      CHECK(corrupted == 0);
      INFO(first_over_bound);
      CHECK(over_bound == 0);
      CHECK(simcuda_race_count() == 0);
    }
  }
  simcuda_set_auto_complete(1);
}
