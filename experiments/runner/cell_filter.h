// --filter: which cells of an experiment run. A filter is KEY=GLOB items
// joined by ',' that must all hold (keys: workload, pipeline, backend,
// label); a cell runs when any of the filters given holds for it.
#pragma once

#include <string>
#include <vector>

#include "core/expected.h"
#include "runner.h"

namespace lazylab {

class CellFilter {
 public:
  static Expected<CellFilter> parse(const std::vector<std::string>& filters);
  bool empty() const { return alternatives_.empty(); }
  // A workload matches by its name, its label or how reports show it
  // ("softmax[cols=64,rows=8]"); a backend by name or shown form.
  bool selects(const CellIdentity& cell) const;

 private:
  struct Condition {
    std::string key, glob;
  };
  std::vector<std::vector<Condition>> alternatives_;
};

}  // namespace lazylab
