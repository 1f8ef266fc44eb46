// The host machine's ceilings, measured by a backend that computes on the
// host's cores (ABI 3.12's measure_host_ceilings: lazylab's cpu backend)
// at the start of a run; the machines are shared, so ratios are only
// meaningful within one run. A host-memory cell's floor is read against
// them.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "core/backend.h"

namespace lazylab {

struct Experiment;
struct Resolved;

// A report's host ceilings: as measured here, or pinned from another report.
using Ceilings = HostCeilings;

// The backend that measures the host: the first of the experiment's
// backends loaded in this process that does, else the shipped cpu backend
// loaded for it (with the options of the experiment's first cpu entry, so
// that it runs the same OpenBLAS kernels).
class HostMeter {
 public:
  static HostMeter find(const Experiment& e, const Resolved& r);
  HostMeter() = default;  // none: measures nothing (a run with pinned ceilings)

  // The best of several trials; zeros, with `method` saying why, where no
  // backend measures the host.
  Expected<Ceilings> measure();
  // One trial of the copy and the product, for a timed round; nullopt where
  // no backend measures the host.
  Expected<std::optional<Ceilings>> sample();

 private:
  Backend* backend_ = nullptr;
  std::unique_ptr<Backend> owned_;
  std::string missing_;  // why there is none
};

}  // namespace lazylab
