// save-all: the forward keeps every value its backward reads (what
// differentiation gives; the baseline the others are measured against).
#include "core/remat_strategy.h"

namespace lazylab {
namespace {

class SaveAll : public RematStrategy {
 public:
  Expected<std::vector<bool>> recompute(const Graph& graph, const JointSplit&) override {
    return std::vector<bool>(graph.size(), false);
  }
};

const RematStrategyRegistrar kRegistrar{{"save-all", "Keep every forward value the backward reads; recompute nothing",
                                         [](const PassOptions&) { return std::make_unique<SaveAll>(); }}};

}  // namespace
}  // namespace lazylab
