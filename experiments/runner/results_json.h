// Measured results to and from JSON: the one description of a cell's,
// and the ceilings', fields in reports. Reports, resumed runs, shards being
// merged and child processes all read cells back through it.
#pragma once

#include <nlohmann/json.hpp>

#include "runner.h"

namespace lazylab {

nlohmann::json cell_to_json(const CellResult& cell);
Expected<CellResult> cell_from_json(const nlohmann::json& json);
// Every key cell_to_json writes (report.schema.json's cell properties must
// be these).
std::vector<std::string> cell_field_names();

nlohmann::json ceilings_to_json(const Ceilings& ceilings);
Ceilings ceilings_from_json(const nlohmann::json& json);

// Named by backend entry (unmeasured entries are left out).
nlohmann::json device_ceilings_to_json(const ExperimentResult& result);

// A torch workload's capture, in the fields lazylab.torch.export writes to
// capture.json (python/lazylab/torch/export.py); reports carry the same.
nlohmann::json capture_to_json(const TorchCapture& capture);
Expected<TorchCapture> capture_from_json(const nlohmann::json& json);

}  // namespace lazylab
