// The address table (Note [Address tables]) against std::map: random inserts, replacements,
// lookups and erases of 512 B-aligned addresses -- clustered ones that share home slots,
// strided ones, and spread ones -- through growth, with the table's contents compared
// whole after every batch; and erase's backward shift checked where runs wrap the end of
// the slot array.
#include <catch2/catch.hpp>

#include <cstdint>
#include <algorithm>
#include <map>
#include <random>
#include <vector>

#include "core/address_table.hpp"

using fragless::core::address_table;

namespace {

struct payload {
  std::size_t size_bytes = 0;
  std::uint64_t sequence = 0;
  bool operator==(const payload& other) const { return size_bytes == other.size_bytes && sequence == other.sequence; }
};

void check_same(const address_table<payload>& table, const std::map<std::uintptr_t, payload>& model) {
  REQUIRE(table.size() == model.size());
  std::size_t visited = 0;
  table.for_each([&](std::uintptr_t key, const payload& value) {
    ++visited;
    auto found = model.find(key);
    REQUIRE(found != model.end());
    REQUIRE(found->second == value);
  });
  REQUIRE(visited == model.size());
  for (const auto& [key, value] : model) {
    const payload* found = table.find(key);
    REQUIRE(found != nullptr);
    REQUIRE(*found == value);
  }
}

// Addresses of three shapes: a few hot pages (many keys, few 512 B units apart), a stride
// of a power of two (the pattern that defeats weak hashes), and spread ones.
std::uintptr_t random_address(std::mt19937_64& random, int shape) {
  const std::uintptr_t base = std::uintptr_t{0x7f00} << 32;
  switch (shape) {
    case 0:
      return base + (random() % 8) * (std::uintptr_t{2} << 20) + (random() % 64) * 512;
    case 1:
      return base + (random() % 4096) * (std::uintptr_t{1} << 21);
    default:
      return base + (random() % (std::uintptr_t{1} << 28)) * 512;
  }
}

}  // namespace

TEST_CASE("the address table agrees with a map through growth and erases", "[address_table]") {
  for (int shape = 0; shape < 3; ++shape) {
    for (std::uint64_t seed = 1; seed <= 20; ++seed) {
      std::mt19937_64 random(seed * 7919 + static_cast<std::uint64_t>(shape));
      address_table<payload> table(4);
      std::map<std::uintptr_t, payload> model;
      for (int batch = 0; batch < 40; ++batch) {
        const bool growing = batch < 25;
        for (int step = 0; step < 60; ++step) {
          const std::uintptr_t key = random_address(random, shape);
          const int action = static_cast<int>(random() % 10);
          if (action < (growing ? 6 : 3)) {
            const payload value{static_cast<std::size_t>(random() % 100000) * 512, random()};
            table.insert_or_assign(key, value);
            model[key] = value;
          } else if (action < 9) {
            // Erase a present key most of the time, an absent one otherwise.
            std::uintptr_t victim = key;
            if (!model.empty() && random() % 4 != 0) {
              auto at = model.lower_bound(key);
              if (at == model.end()) at = model.begin();
              victim = at->first;
            }
            payload removed;
            const bool was_there = model.count(victim) != 0;
            REQUIRE(table.erase(victim, &removed) == was_there);
            if (was_there) {
              REQUIRE(removed == model[victim]);
              model.erase(victim);
            }
          } else {
            const payload* found = table.find(key);
            auto at = model.find(key);
            REQUIRE((found != nullptr) == (at != model.end()));
            if (found != nullptr) REQUIRE(*found == at->second);
          }
        }
        check_same(table, model);
      }
      // Empty it completely: every entry must be found on its way out.
      while (!model.empty()) {
        const std::uintptr_t key = model.begin()->first;
        REQUIRE(table.erase(key));
        model.erase(model.begin());
      }
      check_same(table, model);
      REQUIRE(table.find(random_address(random, shape)) == nullptr);
    }
  }
}

TEST_CASE("the address table keeps runs that wrap the slot array's end", "[address_table]") {
  // A small table filled up to its bound, then emptied in every order of a few keys: the
  // runs that wrap past the last slot must keep finding their entries.
  std::mt19937_64 random(12345);
  for (int round = 0; round < 200; ++round) {
    address_table<payload> table(8);
    std::vector<std::uintptr_t> keys;
    while (keys.size() < 4) {
      const std::uintptr_t key = (std::uintptr_t{1} << 40) + (random() % 64) * 512;
      if (table.find(key) != nullptr) continue;
      table.insert_or_assign(key, payload{key, keys.size()});
      keys.push_back(key);
    }
    std::shuffle(keys.begin(), keys.end(), random);
    for (std::size_t gone = 0; gone < keys.size(); ++gone) {
      REQUIRE(table.erase(keys[gone]));
      REQUIRE(table.find(keys[gone]) == nullptr);
      for (std::size_t left = gone + 1; left < keys.size(); ++left) {
        const payload* found = table.find(keys[left]);
        REQUIRE(found != nullptr);
        REQUIRE(found->size_bytes == keys[left]);
      }
    }
    REQUIRE(table.size() == 0);
  }
}

TEST_CASE("the address table never finds the empty key", "[address_table]") {
  address_table<payload> table;
  REQUIRE(table.find(0) == nullptr);
  REQUIRE_FALSE(table.erase(0));
  table.insert_or_assign(512, payload{1, 2});
  REQUIRE(table.find(0) == nullptr);
  REQUIRE(table.find(512) != nullptr);
}
