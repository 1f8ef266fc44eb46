// A workload that could not be made: its capture or import failed for a
// reason of the program's or of lazylab's, not of the experiment file. The
// runner fails its cells with the reason, so one program that PyTorch
// stops, or one model with an op lazylab lacks, leaves the rest of a run
// and its report whole.
#include "workload.h"

namespace lazylab {
namespace {

class FailedWorkload : public Workload {
 public:
  FailedWorkload(std::string name, WorkloadParams params, std::string why)
      : name_(std::move(name)), params_(std::move(params)), why_(std::move(why)) {}
  std::string name() const override { return name_; }
  WorkloadParams params() const override { return params_; }
  std::vector<TensorType> input_types() const override { return {}; }
  std::vector<HostTensor> make_inputs(uint64_t) const override { return {}; }
  std::vector<Tensor> step(Context&, const std::vector<Tensor>&) const override { return {}; }
  const std::string* failure() const override { return &why_; }

 private:
  std::string name_;
  WorkloadParams params_;
  std::string why_;
};

}  // namespace

std::unique_ptr<Workload> make_failed_workload(std::string name, WorkloadParams params, std::string why) {
  return std::make_unique<FailedWorkload>(std::move(name), std::move(params), std::move(why));
}

}  // namespace lazylab
