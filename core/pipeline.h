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
  // The plugins (name and version) that provide this pass or the strategy
  // it runs; empty when all built in.
  std::vector<std::string> provenance;
  std::vector<PassInvocation> body;  // a combinator's passes (fix(...)), in order

  // The pass to run: info's, made with the options (around the body's).
  std::unique_ptr<Pass> create() const;
};

struct Pipeline {
  std::vector<PassInvocation> passes;
  std::string canonical;                // the whole pipeline, canonical
  std::vector<std::string> provenance;  // every plugin it uses, once, in order
  // Hash of `canonical` and `provenance`: part of the cache key, so a new
  // version of a plugin never hits the old one's entries.
  uint64_t fingerprint = 0;
  bool lowers = false;  // it turns the graph into a Program (an engine needs one)
};

// Unknown passes and options, and passes out of stage order (a graph pass
// after the lowering, a Program pass before it), are errors.
Expected<Pipeline> parse_pipeline(std::string_view text, const PassRegistry& registry = PassRegistry::global());

}  // namespace lazylab
