// cuBLASLt's algorithm for one product shape on one device: the fastest of
// the heuristic's first candidates and every configuration of cuBLASLt's
// algorithms (where the product is quick to time), each timed there. It is kept per device
// in memory and on disk beside the compiled kernels (disk_cache.h), so that
// a new process with a warm cache does not time the candidates again, and it
// is described with every candidate's time for the reports (the executable
// notes of ABI 3.5).
#pragma once

#include <cublasLt.h>

#include <optional>
#include <string>
#include <vector>

namespace lazylab::cuda {

struct AlgoChoice {
  enum class Source {
    Timed,      // the candidates were timed at this compile
    Disk,       // read from the disk cache, timed by an earlier process
    Process,    // chosen earlier in this process, for another executable
    Heuristic,  // the heuristic's first: the operands were too large to time
  };
  cublasLtMatmulAlgo_t algo{};
  int chosen = 0;  // among the candidates: the heuristic's, in its order, then the configurations
  // Each one's mean over back-to-back runs (more for the fastest few);
  // negative where one could not run.
  std::vector<float> candidate_ms;
  Source source = Source::Timed;
  // Timed: how long the timing took on the host (graphs made, run and
  // waited for), in ms; negative where not known (read from the disk).
  float search_ms = -1;
  // Timed: candidates whose shared graph could not be made or run, each
  // then timed in a graph of its own (the slower way).
  int timed_alone = 0;
};

// "candidate 2 of 8, 1.3710 ms (timed at compile; all: 1.4020 1.3710 ... ms)",
// "timed at compile in 12.3 ms" where the search's time is known;
// past 8 candidates, the fastest five and the heuristic's first instead of all.
std::string describe(const AlgoChoice& choice);

// The disk form (text: the algorithm's words in hex, the index, the times),
// and back; nullopt for a payload that is not one.
std::string serialize(const AlgoChoice& choice);
std::optional<AlgoChoice> parse_algo_choice(const std::string& payload);

// The entry of `identity` (text naming the shape, the device and the
// library versions) in `cache_dir`.
std::string algo_choice_path(const std::string& cache_dir, const std::string& identity);
// nullopt with `why` when there is no sound entry.
std::optional<AlgoChoice> load_algo_choice(const std::string& path, std::string& why);
void store_algo_choice(const std::string& path, const AlgoChoice& choice);

}  // namespace lazylab::cuda
