// Scheduler `program`: the topological order that follows program order,
// which is what lower emits; the baseline the others are compared with.
#include <numeric>

#include "core/scheduler.h"

namespace lazylab {
namespace {

class ProgramOrder : public Scheduler {
 public:
  Expected<std::vector<int>> order(const Program& program) override {
    std::vector<int> identity(program.kernels.size());
    std::iota(identity.begin(), identity.end(), 0);
    return identity;
  }
};

const SchedulerRegistrar kRegistrar{{"program", "program order (what lower emits)",
                                     [](const PassOptions&) { return std::make_unique<ProgramOrder>(); }}};

}  // namespace
}  // namespace lazylab
