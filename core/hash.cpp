#include "core/hash.h"

// Node hashes are a few dozen bytes: inlining XXH3 (a mode xxHash documents
// for small inputs) avoids a call through the shared library per node.
#define XXH_INLINE_ALL
#include <xxhash.h>

#include <bit>

namespace lazylab {
namespace {

// Words are gathered into a stack buffer and hashed in one call: cheaper
// than streaming through XXH3's state for the handful of words a node has.
class WordBuffer {
 public:
  void push(uint64_t word) {
    if (size_ == kCapacity) flush();
    words_[size_++] = word;
  }
  uint64_t finish() {
    flush();
    return seed_;
  }

 private:
  void flush() {
    seed_ = XXH3_64bits_withSeed(words_, size_ * sizeof(uint64_t), seed_);
    size_ = 0;
  }
  static constexpr size_t kCapacity = 48;
  uint64_t words_[kCapacity];
  size_t size_ = 0;
  uint64_t seed_ = 0x6c617a796c6162ULL;
};

}  // namespace

uint64_t hash_node(const Node& node, std::span<const Node> earlier_nodes) {
  WordBuffer words;
  words.push(static_cast<uint64_t>(node.op) << 8 | static_cast<uint64_t>(node.type.dtype));
  words.push(node.type.shape.size());
  for (int64_t d : node.type.shape) words.push(static_cast<uint64_t>(d));
  words.push(node.operands.size());
  // An out-of-range operand (a malformed graph the verifier will reject)
  // hashes as a sentinel instead of reading out of bounds.
  for (NodeId operand : node.operands)
    words.push(operand < earlier_nodes.size() ? earlier_nodes[operand].hash : ~uint64_t{0});
  const OpInfo& info = op_info(node.op);
  for (int a = 0; a < info.num_attrs; ++a) {
    const AttrValue& value = node.attrs[a];
    switch (info.attrs[a].kind) {
      case AttrKind::Int:
      case AttrKind::Bool: words.push(static_cast<uint64_t>(value.i)); break;
      case AttrKind::Float: words.push(std::bit_cast<uint64_t>(value.f)); break;
      case AttrKind::Scalar:  // an integer's `f` follows from its `i`, a float's `i` is 0
        words.push(is_float(node.type.dtype) ? std::bit_cast<uint64_t>(value.f) : static_cast<uint64_t>(value.i));
        break;
      case AttrKind::Ints:
        words.push(value.ints.size());
        for (int64_t v : value.ints) words.push(static_cast<uint64_t>(v));
        break;
    }
  }
  return words.finish();
}

uint64_t hash_roots(std::span<const uint64_t> root_hashes) {
  return XXH3_64bits_withSeed(root_hashes.data(), root_hashes.size_bytes(), root_hashes.size());
}

uint64_t hash_bytes(const void* data, size_t size) { return XXH3_64bits(data, size); }

uint64_t hash_combine(uint64_t a, uint64_t b) {
  uint64_t words[2] = {a, b};
  return XXH3_64bits(words, sizeof(words));
}

}  // namespace lazylab
