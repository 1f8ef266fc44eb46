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
#include "gradient_check.h"
#include "graph_generator.h"
#include "precise_evaluator.h"
#include "reducer.h"
#include "runner/cell_run.h"

namespace lazylab {
namespace {

constexpr const char* kReferencePipeline = "lower";
// The pipeline name of the interpreter's own check against the precise
// evaluator; `lazylab run` cannot replay it, so its failure is written as a
// .lzir only.
constexpr const char* kPreciseCheck = "precise-evaluator";
// Likewise for the gradient check (gradient_check.h).
constexpr const char* kGradientCheck = "grad";

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
// (or the reference itself refuses the graph: then nothing can be said). A
// mismatch says how far each side is from the precise evaluator, so that a
// reader sees which one is wrong (or that the graph is ill-conditioned).
std::string problem_of(const Experiment& e, const Graph& graph, const Target& target, Backend& reference_backend,
                       const Pipeline& reference_pipeline, uint64_t input_seed) {
  auto want = run_once(e, graph, reference_backend, reference_pipeline, input_seed);
  if (!want) return "";
  auto got = run_once(e, graph, *target.backend, target.pipeline, input_seed);
  if (!got) return "error: " + got.error().message;
  Correctness c = compare_values(*got, *want, e.reference.rtol, e.reference.atol);
  if (c.pass) return "";
  std::string problem = "mismatch: " + c.problem;
  auto precise = evaluate_precisely(graph, make_graph_workload("fuzz", graph)->make_inputs(input_seed));
  if (!precise) return problem;
  bool target_agrees = compare_values(*got, *precise, e.reference.rtol, e.reference.atol).pass;
  bool reference_agrees = compare_values(*want, *precise, e.reference.rtol, e.reference.atol).pass;
  std::string verdict = target_agrees && reference_agrees ? "accepts both (a tolerance edge)"
                        : reference_agrees                ? "agrees with the reference (interp, lower)"
                        : target_agrees ? "agrees with " + target.backend_name + " " + target.pipeline_name
                                        : "agrees with neither";
  return problem + " (the precise evaluator " + verdict + ")";
}

// The interpreter against the precise evaluator, or "" when they agree (or
// the graph is refused by the reference).
std::string reference_problem(const Experiment& e, const Graph& graph, Backend& reference_backend,
                              const Pipeline& reference_pipeline, uint64_t input_seed) {
  auto want = run_once(e, graph, reference_backend, reference_pipeline, input_seed);
  if (!want) return "";
  auto precise = evaluate_precisely(graph, make_graph_workload("fuzz", graph)->make_inputs(input_seed));
  if (!precise) return "the precise evaluator refuses what interp runs: " + precise.error().message;
  Correctness c = compare_values(*want, *precise, e.reference.rtol, e.reference.atol);
  return c.pass ? "" : "interp disagrees with the precise evaluator: " + c.problem;
}

Status write_failure(const FuzzOptions& options, const Graph& reduced, FuzzFailure& failure) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(options.out_dir, ec);
  // A backend named by its plugin's path is named by the file's stem here.
  std::string backend = fs::path(failure.backend).stem().string();
  std::string stem = fmt::format("fuzz-{}-{}-{}", failure.graph_seed, failure.pipeline, backend);
  fs::path lzir = fs::path(options.out_dir) / (stem + ".lzir"), yaml = fs::path(options.out_dir) / (stem + ".yaml");
  bool replayable = failure.pipeline != kPreciseCheck && failure.pipeline != kGradientCheck;
  std::ofstream(lzir) << fmt::format(
                             "// lazylab fuzz --seed {}: {} on {}: {}\n// {}\n", failure.graph_seed, failure.pipeline,
                             failure.backend, failure.problem,
                             replayable ? "reproduce: lazylab run " + yaml.string() : "checked by lazylab fuzz only")
                      << print_graph(reduced, "reduced");
  failure.lzir_path = lzir.string();
  if (!replayable) return fs::exists(lzir) ? Status{} : make_error(fmt::format("{}: cannot write", lzir.string()));
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
    // A failing check, reduced (delta debugging over nodes) while
    // `problem_on` still reports a problem, written and reported.
    auto record = [&](const std::string& problem, const std::string& pipeline_name, const std::string& pipeline_text,
                      const std::string& backend_name, auto&& problem_on) -> Status {
      Graph reduced = reduce_graph(
          graph, [&](const Graph& candidate) { return verify(candidate) && !problem_on(candidate).empty(); });
      FuzzFailure failure{
          seed, pipeline_name, pipeline_text, backend_name, problem_on(reduced), graph.size(), reduced.size(), "", ""};
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
      return {};
    };
    ++report.checks;
    auto reference_on = [&](const Graph& g) {
      return reference_problem(e, g, **reference_backend, reference_pipeline, seed);
    };
    if (std::string problem = reference_on(graph); !problem.empty())
      LAZYLAB_TRY(record(problem, kPreciseCheck, kReferencePipeline, "interp", reference_on));
    for (const Target& target : *targets) {
      ++report.checks;
      auto target_on = [&](const Graph& g) {
        return problem_of(e, g, target, **reference_backend, reference_pipeline, seed);
      };
      if (std::string problem = target_on(graph); !problem.empty())
        LAZYLAB_TRY(record(problem, target.pipeline_name, target.pipeline_text, target.backend_name, target_on));
    }
    if (options.gradients) {
      ++report.checks;
      GradientCheck check = check_gradient(graph, seed, **reference_backend);
      report.differentiated += check.differentiated;
      report.gradient_elements += check.elements;
      auto gradient_on = [&](const Graph& g) { return check_gradient(g, seed, **reference_backend).problem; };
      if (!check.problem.empty())
        LAZYLAB_TRY(
            record(check.problem, kGradientCheck, "decompose{keep=fused-gradient},grad", "interp", gradient_on));
    }
    if (progress && !options.quiet && (g + 1) % 500 == 0)
      *progress << fmt::format("  {} graphs, {} checks, {} failures, {:.0f} s\n", report.graphs, report.checks,
                               report.failures.size(), elapsed());
  }
  report.seconds = elapsed();
  return report;
}

}  // namespace lazylab
