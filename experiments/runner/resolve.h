// What an experiment names, resolved and loaded before any cell runs: its
// pipelines parsed, its workloads made (their inputs and footprint checked
// against the limits), its backends loaded here or in a child each.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/pipeline.h"
#include "experiment.h"
#include "runner.h"
#include "workload.h"

namespace lazylab {

// What the experiment names, resolved and loaded. A contained backend
// (RunOptions::containment) is not loaded here: `backends` holds null for
// it, and so does it for the backends an isolated cell's child does not run.
struct Resolved {
  std::unique_ptr<Backend> reference_backend;  // null where the reference is contained
  Pipeline reference_pipeline;
  std::vector<Pipeline> pipelines;
  std::vector<std::unique_ptr<Workload>> workloads;
  std::vector<std::unique_ptr<Backend>> backends;
  std::vector<std::string> devices;
  // By backend entry: its cells run in children; why none can run (it
  // crashed or hung while it was created in a child); its device ceilings,
  // measured there.
  std::vector<bool> contained;
  std::vector<std::string> unusable;
  std::vector<DeviceCeilings> probed_ceilings;
  bool every_cell_contained = false;
};

Expected<Resolved> resolve(const Experiment& e, const RunOptions& options);

}  // namespace lazylab
