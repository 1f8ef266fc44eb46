// fix(...): the passes in its parentheses, repeated until a round changes
// nothing (XLA's HloPassFix). canonicalize,cse runs each once; in
// fix(canonicalize,cse) a merge that cse makes can let a rule fire that
// waited for an operand to have one user, and so on to a fixed point.
#include "core/fixed_point.h"

namespace lazylab {
namespace {

LAZYLAB_REGISTER_PASS(PassInfo{
    "fix",
    "Repeat the passes in its parentheses until a round changes nothing: fix(canonicalize,cse)",
    {{"max-iterations", OptionKind::Int, "8", "rounds before stopping short of a fixed point", {}, {}, 1}},
    [](const PassOptions& options) {
      return std::make_unique<FixedPoint>(std::vector<std::unique_ptr<Pass>>{}, options.get_int("max-iterations"));
    },
    PassStage::Graph,
    {},
    {},
    [](const PassOptions& options, std::vector<std::unique_ptr<Pass>> passes) -> std::unique_ptr<Pass> {
      return std::make_unique<FixedPoint>(std::move(passes), options.get_int("max-iterations"));
    }});

}  // namespace
}  // namespace lazylab
