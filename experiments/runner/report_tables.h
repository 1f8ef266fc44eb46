// The report's tables, each column described once (report_table.h). Which
// table shows where:
//   console:  cells (identity, measures, traffic, outcome: the console's
//             columns), captures, peers
//   Markdown: cells (identity, measures, outcome), traffic (identity,
//             traffic), captures, peers, fusion refusals, passes
//   CSV:      one row per cell: identity, measures, traffic, outcome (the
//             CSV columns)
//   HTML:     the Markdown tables, and each cell's kernels (kernel_columns)
#pragma once

#include <vector>

#include "report_table.h"
#include "runner.h"

namespace lazylab {

// A peer's time beside the fastest correct lazylab cell on that workload, on
// the peer's clock: a peer timed by device events against the cells' device
// time, one timed on the host against their host step (trace, sync, wait).
struct PeerComparison {
  const PeerResult* peer;
  const PeerCell* peer_cell;
  const CellResult* best;  // null when no lazylab cell of that workload is correct
  double lazylab_ms = 0;   // best's time on the peer's clock
  bool lazylab_on_device = false;
  double ratio() const { return peer_cell->median_ms / lazylab_ms; }
  // In rounds: each round's peer median over best's median in that round's
  // share of its timed steps (the steps after it; empty without samples).
  std::vector<double> round_ratios;
};
std::vector<PeerComparison> peer_comparisons(const ExperimentResult& result);

// A torch workload's capture beside the fastest correct cell of its entry
// (host step: the capture is host time too).
struct CaptureRow {
  const CaptureResult* capture;
  std::string workload;    // as the cells name it
  const CellResult* best;  // null when no cell of the entry is correct
  // What a loop's step costs: the cell's step, plus the host's time around
  // it (TorchCapture::host_ms_per_step).
  double step_with_host_ms() const;
};
std::vector<CaptureRow> capture_rows(const ExperimentResult& result);
// What the captures table's columns mean.
inline constexpr const char* kCaptureNote =
    "graphs: what the step ran as (dynamo: one per graph break, the model's forward and backward apart), "
    "stitched into the one the cells run; capture ms: the host's time to capture the step (the program's "
    "Python, autograd and the capture), paid each step (lazy, or dynamo where a guard fails each step) or once "
    "(fx, dynamo); baked reads: tensors read into Python numbers that became constants of the "
    "graph (it is that step's only); loss vs eager: relative; state vs eager: the tensors the step leaves "
    "(weights, optimizer state), largest difference over largest magnitude, both against eager PyTorch's step "
    "on the same inputs; host ms/step: what a loop pays each step beside the graph (the capture; or binding "
    "the batch and rebinding the state a loop keeps on the device); step + host: the fastest cell's step plus "
    "that";

struct PassRow {
  const CellResult* cell;
  const PassStat* pass;
};

using CellColumns = std::vector<ReportColumn<CellResult>>;

// Which workload, pipeline and backend a cell is.
const CellColumns& cell_identity_columns();
// Its compile and step times and speedup.
const CellColumns& cell_measure_columns();
// Whether it ran and matched the reference, and how closely.
const CellColumns& cell_outcome_columns();
// How the floor in rounds is taken (its columns are blank where it was not).
inline constexpr const char* kRoundsFloorNote =
    "floor in rounds: the same floor from the host's copy and sgemm rates probed once after the cells of each timed "
    "round of the workload (the ceilings' probes, medians): the machine's bandwidth while the cells' steps ran";
bool probed_in_rounds(const ExperimentResult& result);

// The bytes it moved and how close it came to its floor.
const CellColumns& cell_traffic_columns();
CellColumns join_columns(std::initializer_list<const CellColumns*> parts);

// One kernel of a cell, measured against its backend's ceilings.
struct KernelRow {
  const CellResult* cell;
  size_t kernel;
  CellCeilings ceilings;
  double seconds() const { return cell->kernel_ms[kernel] / 1e3; }
  double bytes() const;
  double operations() const;
  double flops() const;  // its matmuls' alone
};
// A cell's kernels by time, slowest first (those with times).
std::vector<KernelRow> kernel_rows(const ExperimentResult& result, const CellResult& cell);

const std::vector<ReportColumn<PassRow>>& pass_columns();
// Each kernel's time, traffic, rates and share of the ceilings.
const std::vector<ReportColumn<KernelRow>>& kernel_columns();
const std::vector<ReportColumn<PeerComparison>>& peer_columns();
const std::vector<ReportColumn<CaptureRow>>& capture_columns();
// Fusion refusals by reason code, for cells that have any.
const CellColumns& refusal_columns();

// A cell's recompile warning (runner.h), given the experiment's step count.
std::string recompile_text(const ExperimentResult& result, const CellResult& cell);
// One line per cell that recompiles on most steps, naming why.
std::string recompile_lines(const ExperimentResult& result, const std::string& prefix);
// "2 of 12 cells failed; 3 of 12 cells too noisy to rank ...", or "".
std::string outcome_summary(const ExperimentResult& result);

// The text a cell's outcome column shows: "ok (1.2e-07)", "FAILED: why".
std::string outcome_text(const CellResult& cell);

}  // namespace lazylab
