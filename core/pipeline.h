// Textual pass pipelines: "canonicalize,cse,fuse{strategy=none},lower".
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "pass.h"

namespace lazylab {

struct PassInvocation {
  const PassInfo* info = nullptr;
  PassOptions options;    // validated, defaults filled in
  std::string canonical;  // "fuse{strategy=none}" with every option spelled out
};

struct Pipeline {
  std::vector<PassInvocation> passes;
  std::string canonical;     // the whole pipeline, canonical
  uint64_t fingerprint = 0;  // hash of `canonical`: part of the cache key
  bool lowers = false;       // it turns the graph into a Program (an engine needs one)
};

// Unknown passes and options, and passes out of stage order (a graph pass
// after the lowering, a Program pass before it), are errors.
Expected<Pipeline> parse_pipeline(std::string_view text, const PassRegistry& registry = PassRegistry::global());

}  // namespace lazylab
