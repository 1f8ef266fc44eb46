// Structural hashing. 64-bit XXH3 over a node's op, result type, attributes
// and operand hashes: O(1) per node (bounded by rank and arity). Parameters
// hash by type and ordinal, never by data. Collisions are possible at 2^-64
// per pair; the cache can verify structural equality on every hit.
#pragma once

#include <cstdint>
#include <span>

#include "graph.h"

namespace lazylab {

uint64_t hash_node(const Node& node, std::span<const Node> earlier_nodes);
uint64_t hash_roots(std::span<const uint64_t> root_hashes);
uint64_t hash_bytes(const void* data, size_t size);
uint64_t hash_combine(uint64_t a, uint64_t b);

}  // namespace lazylab
