// Note [Index nodes] (free_index.cpp): inserting into a std::map or std::set through a
// spare node -- one extracted earlier and kept -- so that an index whose entries come and
// go as often allocates no host memory for them. Invariant: after a call the spare is
// empty (its node is in the tree, or was a duplicate and is destroyed).
#pragma once

#include <map>
#include <set>
#include <utility>

namespace fragless::core {

template <typename Key, typename Value>
void insert_reusing(std::map<Key, Value>& tree, typename std::map<Key, Value>::node_type& spare, const Key& key,
                    Value value) {
  if (spare.empty()) {
    tree.emplace(key, std::move(value));
    return;
  }
  spare.key() = key;
  spare.mapped() = std::move(value);
  tree.insert(std::move(spare));
}

template <typename Value>
void insert_reusing(std::set<Value>& tree, typename std::set<Value>::node_type& spare, const Value& value) {
  if (spare.empty()) {
    tree.insert(value);
    return;
  }
  spare.value() = value;
  tree.insert(std::move(spare));
}

}  // namespace fragless::core
