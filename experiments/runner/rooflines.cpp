#include "rooflines.h"

#include <algorithm>
#include <limits>
#include <map>

namespace lazylab {

// The floor is the slowest of three bounds: the minimum bytes at copy
// bandwidth, the matmul FLOPs the graph needs at the sgemm rate (a causal
// attention needs half its products), and the elementwise work at
// the elementwise rate. Elementwise work is the least any pipeline of the
// run needed for that workload, so a pipeline that does more extra work is
// not given a higher floor for it.
void compute_rooflines(ExperimentResult& result) {
  std::map<size_t, uint64_t> least_elementwise;  // by workload entry
  for (const CellResult& cell : result.cells) {
    if (!cell.ran()) continue;
    auto [it, inserted] = least_elementwise.emplace(cell.workload_entry, cell.cost.elementwise_ops);
    it->second = std::min(it->second, cell.cost.elementwise_ops);
  }
  auto ms_at = [](double amount, double per_second) { return per_second > 0 ? amount / per_second * 1e3 : 0.0; };
  auto floor_ms = [&](const CellResult& cell, double copy, double gemm, double elementwise) {
    double memory_ms = ms_at(static_cast<double>(cell.cost.minimum_bytes), copy * 1e9);
    double matmul_ms = ms_at(static_cast<double>(cell.cost.minimum_flops), gemm * 1e9);
    double elementwise_ms = ms_at(static_cast<double>(least_elementwise[cell.workload_entry]), elementwise * 1e9);
    return std::max({memory_ms, matmul_ms, elementwise_ms});
  };
  for (CellResult& cell : result.cells) {
    if (!cell.ran()) continue;
    // A device backend's cells are timed on its device, against its ceilings
    // (no elementwise rate is measured there: that bound is left out).
    CellCeilings ceilings = ceilings_for(result, cell.backend_entry);
    cell.device_ceilings = ceilings.device;
    double copy = ceilings.copy_gb_s, gemm = ceilings.gemm_gflop_s, elementwise = ceilings.elementwise_gop_s;
    double time_ms = cell.time_ms();
    double seconds = time_ms / 1e3;
    if (seconds <= 0) continue;
    cell.achieved_gb_s = static_cast<double>(cell.cost.total_bytes) / seconds / 1e9;
    cell.copy_bandwidth_fraction = copy > 0 ? cell.achieved_gb_s / copy : 0;
    cell.floor_ms = floor_ms(cell, copy, gemm, elementwise);
    cell.floor_fraction = cell.floor_ms / time_ms;  // 0 without ceilings (an isolated cell's child)
    if (ceilings.device || cell.rounds_copy_gb_s <= 0) continue;
    double rounds_gemm = cell.rounds_sgemm_gflop_s > 0 ? cell.rounds_sgemm_gflop_s : gemm;
    cell.rounds_floor_ms = floor_ms(cell, cell.rounds_copy_gb_s, rounds_gemm, elementwise);
    cell.rounds_floor_fraction = cell.rounds_floor_ms / time_ms;
  }
}

CellCeilings ceilings_for(const ExperimentResult& result, size_t backend_entry) {
  if (backend_entry < result.device_ceilings.size() && result.device_ceilings[backend_entry].measured()) {
    const DeviceCeilings& device = result.device_ceilings[backend_entry];
    return {device.copy_gb_s, device.gemm_gflop_s, 0, true};
  }
  return {result.ceilings.copy_gb_s, result.ceilings.gemm_gflop_s, result.ceilings.elementwise_gop_s, false};
}

}  // namespace lazylab
