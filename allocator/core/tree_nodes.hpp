// Note [Index nodes] (free_index.cpp): inserting into a std::map or std::set through spare
// nodes -- extracted earlier and kept -- so that an index whose entries come and go as
// often allocates no host memory for them. Invariant: a node taken from the spares is in
// the tree after the insert (or was a duplicate and is destroyed); at most kSpareNodes
// nodes are kept.
#pragma once

#include <cstddef>
#include <map>
#include <set>
#include <utility>
#include <vector>

namespace fragless::core {

// A tree's spare nodes. More than one: a loop often frees several blocks before it
// allocates again (a layer's activations, then the next layer's), and with a single spare
// every free but the last gave its node back to the heap and every allocation after the
// first took a new one (corpus sharded-data-parallel seed 17: 0.8 heap allocations and
// frees per block allocated in a steady pass).
template <typename Tree>
class spare_nodes {
 public:
  using node_type = typename Tree::node_type;
  static constexpr std::size_t kSpareNodes = 64;

  // Keeps `node` (when not empty) for a later insert; beyond kSpareNodes, or without host
  // memory for the list, it is destroyed.
  void keep(node_type&& node) noexcept {
    if (node.empty() || nodes_.size() >= kSpareNodes) return;
    try {
      nodes_.push_back(std::move(node));
    } catch (...) {
      // the node goes back to the heap
    }
  }
  // At least one node kept, made now if none is (std::bad_alloc: then nothing changed).
  // Taken before a change that removes an entry and adds one back, whose add then
  // allocates nothing.
  void keep_at_least_one() {
    if (!nodes_.empty()) return;
    nodes_.reserve(kSpareNodes);
    Tree made;
    made.emplace();
    nodes_.push_back(made.extract(made.begin()));
  }
  // A kept node, or an empty one.
  node_type take() noexcept {
    if (nodes_.empty()) return node_type{};
    node_type node = std::move(nodes_.back());
    nodes_.pop_back();
    return node;
  }

 private:
  std::vector<node_type> nodes_;
};

template <typename Key, typename Value>
void insert_reusing(std::map<Key, Value>& tree, spare_nodes<std::map<Key, Value>>& spares, const Key& key,
                    Value value) {
  typename std::map<Key, Value>::node_type node = spares.take();
  if (node.empty()) {
    tree.emplace(key, std::move(value));
    return;
  }
  node.key() = key;
  node.mapped() = std::move(value);
  tree.insert(std::move(node));
}

// A node holding `value`, kept or new: an insert in two trees takes both nodes before
// changing either, so a failed allocation leaves both as they were.
template <typename Value>
typename std::set<Value>::node_type node_holding(spare_nodes<std::set<Value>>& spares, const Value& value) {
  typename std::set<Value>::node_type node = spares.take();
  if (node.empty()) {
    std::set<Value> made{value};
    return made.extract(made.begin());
  }
  node.value() = value;
  return node;
}

template <typename Value>
void insert_reusing(std::set<Value>& tree, spare_nodes<std::set<Value>>& spares, const Value& value) {
  typename std::set<Value>::node_type node = spares.take();
  if (node.empty()) {
    tree.insert(value);
    return;
  }
  node.value() = value;
  tree.insert(std::move(node));
}

}  // namespace fragless::core
