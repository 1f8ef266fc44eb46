#include "host_ceilings.h"

#include <fmt/format.h>

#include "experiment.h"
#include "resolve.h"

namespace lazylab {

HostMeter HostMeter::find(const Experiment& e, const Resolved& r) {
  HostMeter meter;
  for (const std::unique_ptr<Backend>& backend : r.backends)
    if (backend && backend->measures_host()) {
      meter.backend_ = backend.get();
      return meter;
    }
  std::string options;
  for (const BackendEntry& entry : e.backends)
    if (entry.name == "cpu") {
      options = entry.options;
      break;
    }
  auto cpu = load_backend("cpu", options);
  if (!cpu) {
    meter.missing_ = "no backend here measures the host, and the cpu backend cannot: " + cpu.error().message;
    return meter;
  }
  if (!(*cpu)->measures_host()) {
    meter.missing_ = "no backend here measures the host, nor does the cpu backend found (" + (*cpu)->path() + ")";
    return meter;
  }
  meter.owned_ = std::move(*cpu);
  meter.backend_ = meter.owned_.get();
  return meter;
}

Expected<Ceilings> HostMeter::measure() {
  if (!backend_) return Ceilings{0, 0, 0, "", "not measured: " + missing_, {}};
  auto ceilings = backend_->measure_host_ceilings(false);
  if (!ceilings) return make_error(fmt::format("the host's ceilings: {}", ceilings.error().message));
  ceilings->method =
      fmt::format("measured at the start of the run by backend {}: {}", backend_->name(), ceilings->method);
  return ceilings;
}

Expected<std::optional<Ceilings>> HostMeter::sample() {
  if (!backend_) return std::optional<Ceilings>();
  auto ceilings = backend_->measure_host_ceilings(true);
  if (!ceilings) return make_error(fmt::format("the host's ceilings in a round: {}", ceilings.error().message));
  return std::optional<Ceilings>(std::move(*ceilings));
}

}  // namespace lazylab
