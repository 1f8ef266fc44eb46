// One cell in flight. Its engine, context and inputs live across the rounds
// of its workload, so the runner can interleave the steps of many cells; a
// step that fails ends the cell with the reason recorded, never the run.
#pragma once

#include <memory>

#include "core/backend.h"
#include "core/engine.h"
#include "core/pipeline.h"
#include "runner.h"
#include "workload.h"

namespace lazylab {

struct CellSetup {
  const Experiment& experiment;
  const Workload& workload;
  const std::vector<HostTensor>& inputs;
  Backend& backend;
  const Pipeline& pipeline;
};

EngineOptions engine_options(const Experiment& experiment);

// One step of `setup` on a fresh engine, read back to the host.
Expected<ReferenceOutputs> run_reference(const CellSetup& setup);

class CellRun {
 public:
  CellRun(const CellSetup& setup, const ReferenceOutputs& reference, CellIdentity identity);
  ~CellRun();

  // Step 0 is the cold step (compilation); the warm-up steps follow, then
  // the timed ones. Every step's outputs are checked against the reference.
  void step(int64_t index);
  bool failed() const { return result_.status == CellStatus::Failed; }
  // Compiles the cell once more in a fresh engine (a backend's disk cache is
  // now warm) and summarises the samples.
  CellResult finish();

 private:
  Status run_step(int64_t index);
  // Writes Experiment::flush_bytes on the backend; with `wait`, waits for it.
  Status flush_caches(bool wait);
  void record_compilation();
  // The steps after the timed ones, each kernel timed by the backend: the
  // median per kernel goes to the result.
  void profile_kernels();

  CellSetup setup_;
  const ReferenceOutputs& reference_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<Context> context_;
  std::vector<Tensor> inputs_;
  std::unique_ptr<Engine> flush_engine_;  // its own engine: the cell's cache and metrics stay the step's
  std::unique_ptr<Context> flush_context_;
  CellResult result_;
  std::vector<double> trace_us_, overhead_us_, execute_ms_;
};

}  // namespace lazylab
