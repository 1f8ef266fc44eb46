#include "fuzzer.h"

#include <fmt/format.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <ostream>

#include "core/backend.h"
#include "core/fusion_strategy.h"
#include "core/pipeline.h"
#include "core/text_format.h"
#include "core/verifier.h"
#include "graph_generator.h"
#include "reducer.h"
#include "runner/cell_run.h"

namespace lazylab {
namespace {

constexpr const char* kReferencePipeline = "lower";

struct Target {
  std::string pipeline_name, pipeline_text, backend_name;
  Pipeline pipeline;
  Backend* backend;
};

std::vector<std::pair<std::string, std::string>> default_pipelines() {
  std::vector<std::pair<std::string, std::string>> pipelines = {{"eager", "decompose,lower"}};
  for (const std::string& strategy : FusionStrategyRegistry::global().names())
    pipelines.push_back(
        {strategy, fmt::format("decompose,canonicalize,cse,dce,fuse{{strategy={}}},lower,plan-memory", strategy)});
  return pipelines;
}

// One step of `graph` on `backend` with `pipeline`, read back.
Expected<ReferenceOutputs> run_once(const Experiment& e, const Graph& graph, Backend& backend, const Pipeline& pipeline,
                                    uint64_t input_seed) {
  std::unique_ptr<Workload> workload = make_graph_workload("fuzz", graph);
  std::vector<HostTensor> inputs = workload->make_inputs(input_seed);
  return run_reference({e, *workload, inputs, backend, pipeline});
}

// What is wrong with `target` on `graph`, or "" when it matches the reference
// (or the reference itself refuses the graph: then nothing can be said).
std::string problem_of(const Experiment& e, const Graph& graph, const Target& target, Backend& reference_backend,
                       const Pipeline& reference_pipeline, uint64_t input_seed) {
  auto want = run_once(e, graph, reference_backend, reference_pipeline, input_seed);
  if (!want) return "";
  auto got = run_once(e, graph, *target.backend, target.pipeline, input_seed);
  if (!got) return "error: " + got.error().message;
  Correctness c = compare_values(*got, *want, e.reference.rtol, e.reference.atol);
  return c.pass ? "" : "mismatch: " + c.problem;
}

Status write_failure(const FuzzOptions& options, const Graph& reduced, FuzzFailure& failure) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(options.out_dir, ec);
  // A backend named by its plugin's path is named by the file's stem here.
  std::string backend = fs::path(failure.backend).stem().string();
  std::string stem = fmt::format("fuzz-{}-{}-{}", failure.graph_seed, failure.pipeline, backend);
  fs::path lzir = fs::path(options.out_dir) / (stem + ".lzir"), yaml = fs::path(options.out_dir) / (stem + ".yaml");
  std::ofstream(lzir) << fmt::format("// lazylab fuzz --seed {}: {} on {}: {}\n// reproduce: lazylab run {}\n",
                                     failure.graph_seed, failure.pipeline, failure.backend, failure.problem,
                                     yaml.string())
                      << print_graph(reduced, "reduced");
  std::ofstream(yaml) << fmt::format(
      "# A failure found by lazylab fuzz, reduced from {} to {} nodes.\nname: {}\nseed: {}\nworkloads: [{{file: "
      "{}.lzir}}]\npipelines: {{{}: \"{}\"}}\nbackends: [{}]\nrepeat: {{warmup: 0, runs: 1}}\nreference: {{backend: "
      "interp, pipeline: \"{}\", rtol: {}, atol: {}}}\n",
      failure.nodes, failure.reduced_nodes, stem, failure.graph_seed, stem, failure.pipeline, failure.pipeline_text,
      failure.backend, kReferencePipeline, options.rtol, options.atol);
  if (!fs::exists(lzir) || !fs::exists(yaml)) return make_error(fmt::format("{}: cannot write", lzir.string()));
  failure.lzir_path = lzir.string();
  failure.experiment_path = yaml.string();
  return {};
}

Expected<std::vector<Target>> resolve_targets(const FuzzOptions& options,
                                              std::vector<std::unique_ptr<Backend>>& backends) {
  std::vector<Target> targets;
  auto pipelines = options.pipelines.empty() ? default_pipelines() : options.pipelines;
  for (const std::string& name : options.backends) {
    auto backend = load_backend(name);
    if (!backend) return backend.error();
    backends.push_back(std::move(*backend));
    for (auto& [pipeline_name, text] : pipelines) {
      auto pipeline = parse_pipeline(text);
      if (!pipeline) return make_error(fmt::format("pipeline {}: {}", pipeline_name, pipeline.error().message));
      targets.push_back({pipeline_name, text, name, std::move(*pipeline), backends.back().get()});
    }
  }
  return targets;
}

}  // namespace

Expected<FuzzReport> run_fuzz(const FuzzOptions& options, std::ostream* progress) {
  auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  std::vector<std::unique_ptr<Backend>> backends;
  auto targets = resolve_targets(options, backends);
  if (!targets) return targets.error();
  auto reference_backend = load_backend("interp");
  if (!reference_backend) return reference_backend.error();
  Pipeline reference_pipeline = *parse_pipeline(kReferencePipeline);
  Experiment e;
  e.reference.rtol = options.rtol;
  e.reference.atol = options.atol;
  FuzzReport report;
  if (!options.out_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(options.out_dir, ec);
    if (ec) return make_error(fmt::format("{}: cannot create: {}", options.out_dir, ec.message()));
  }
  for (int64_t g = 0; g < options.graphs && (options.seconds <= 0 || elapsed() < options.seconds); ++g) {
    uint64_t seed = options.seed * 1000003 + static_cast<uint64_t>(g);
    Graph graph = random_graph(seed);
    ++report.graphs;
    // A crash ends the process: the graph it was on is left behind.
    if (!options.out_dir.empty())
      std::ofstream(std::filesystem::path(options.out_dir) / "current.lzir")
          << fmt::format("// lazylab fuzz: graph seed {} (inputs seeded alike)\n", seed)
          << print_graph(graph, "current");
    if (!verify(graph) || !run_once(e, graph, **reference_backend, reference_pipeline, seed)) {
      ++report.rejected;
      continue;
    }
    for (const Target& target : *targets) {
      ++report.checks;
      std::string problem = problem_of(e, graph, target, **reference_backend, reference_pipeline, seed);
      if (problem.empty()) continue;
      auto still_fails = [&](const Graph& candidate) {
        return verify(candidate) &&
               !problem_of(e, candidate, target, **reference_backend, reference_pipeline, seed).empty();
      };
      Graph reduced = reduce_graph(graph, still_fails);
      FuzzFailure failure{seed,
                          target.pipeline_name,
                          target.pipeline_text,
                          target.backend_name,
                          problem_of(e, reduced, target, **reference_backend, reference_pipeline, seed),
                          graph.size(),
                          reduced.size(),
                          "",
                          ""};
      // A failure that comes and goes (reading memory never written, a race)
      // may pass the last check: say so rather than print nothing.
      if (failure.problem.empty())
        failure.problem = problem + " (not seen again on the reduced graph: nondeterministic?)";
      if (!options.out_dir.empty()) LAZYLAB_TRY(write_failure(options, reduced, failure));
      if (progress)
        *progress << fmt::format(
            "FAIL graph seed {}: {} on {}: {} (reduced {} -> {} nodes){}\n", seed, failure.pipeline, failure.backend,
            failure.problem, failure.nodes, failure.reduced_nodes,
            failure.experiment_path.empty() ? "" : "; reproduce: lazylab run " + failure.experiment_path);
      report.failures.push_back(std::move(failure));
    }
    if (progress && !options.quiet && (g + 1) % 500 == 0)
      *progress << fmt::format("  {} graphs, {} checks, {} failures, {:.0f} s\n", report.graphs, report.checks,
                               report.failures.size(), elapsed());
  }
  report.seconds = elapsed();
  return report;
}

}  // namespace lazylab
