// lazylab show: a workload's or .lzir file's IR after a pipeline. With
// --split-input-file each `// -----` chunk of the file is a separate case,
// as in MLIR's tests. With --code, the code the backend generates for the
// lowered Program (the cuda backend's CUDA C++, each kernel marked).
#include <fmt/format.h>

#include <algorithm>
#include <sstream>

#include "core/backend.h"
#include "core/dot.h"
#include "core/pass_manager.h"
#include "core/source_file.h"
#include "core/text_format.h"
#include "core/verifier.h"
#include "options.h"
#include "runner/workload.h"

namespace lazylab::cli {
namespace {

struct ShowOptions {
  std::string target, pipeline;
  std::vector<std::string> params, print_after;
  std::string backend;
  bool dot = false, split = false, verify_each = false, print_after_all = false, explain_fusion = false;
  bool code = false;
  const lazylab_capabilities* capabilities = nullptr;
  Backend* backend_object = nullptr;
};

struct Chunk {
  std::string text;
  int first_line;
};

std::vector<Chunk> split_chunks(const std::string& text, bool split) {
  if (!split) return {{text, 1}};
  std::vector<Chunk> chunks{{"", 1}};
  std::istringstream in(text);
  int line_number = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_number;
    if (line.rfind("// -----", 0) == 0)
      chunks.push_back({"", line_number + 1});
    else
      chunks.back().text += line + "\n";
  }
  return chunks;
}

Expected<WorkloadParams> parse_params(const std::vector<std::string>& items) {
  WorkloadParams params;
  for (const std::string& item : items) {
    size_t eq = item.find('=');
    try {
      if (eq == std::string::npos) throw std::invalid_argument(item);
      params[item.substr(0, eq)] = std::stoll(item.substr(eq + 1));
    } catch (const std::exception&) {
      return make_error(fmt::format("--param '{}': expected NAME=INTEGER", item));
    }
  }
  return params;
}

Expected<Graph> capture_workload(const ShowOptions& o) {
  auto params = parse_params(o.params);
  if (!params) return params.error();
  auto workload = make_builtin_workload(o.target, *params);
  if (!workload) return workload.error();
  Context context;
  std::vector<Tensor> inputs = bind_inputs(context, (*workload)->make_inputs(0));
  std::vector<Tensor> outputs = (*workload)->step(context, inputs);
  for (const Tensor& output : outputs)
    if (!output.ok()) return *output.error();
  return context.capture();
}

// One line per candidate pair, in the order the strategy considered them.
void print_fusion_log(const Module& module) {
  for (const FusionCandidate& c : module.fusion_log)
    std::cout << fmt::format(
        "// fusion: %{} {} -> %{} {}: {}\n", c.producer, op_name(module.graph.node(c.producer).op), c.consumer,
        op_name(module.graph.node(c.consumer).op),
        c.decision.fuse ? "fuse" : fmt::format("no: {} [{}]", c.decision.reason, refusal_code_name(c.decision.code)));
}

Status show_graph(Graph graph, const std::string& name, const ShowOptions& o, const Pipeline& pipeline) {
  LAZYLAB_TRY(verify(graph));
  Module module;
  module.name = name;
  module.graph = std::move(graph);
  module.capabilities = o.capabilities;
  PassManagerOptions pm{o.verify_each, o.print_after_all, {o.print_after.begin(), o.print_after.end()}, &std::cout};
  auto stats = run_pipeline(pipeline, module, pm);
  if (!stats) return stats.error();
  if (o.code) {
    if (!module.program)
      return make_error("--code: the pipeline must lower the graph to a Program (end it with 'lower')");
    auto code = o.backend_object->generated_code(*module.program, module.graph);
    if (!code) return code.error();
    std::cout << (code->empty() ? fmt::format("// backend {} generates no code\n", o.backend_object->name()) : *code);
  } else if (o.dot)
    std::cout << to_dot(module.graph, module.kernel_of.empty() ? nullptr : &module.kernel_of);
  else if (!o.print_after_all)
    std::cout << print_module(module);
  if (o.explain_fusion) print_fusion_log(module);
  return {};
}

int show_file(const ShowOptions& o, const Pipeline& pipeline) {
  auto text = read_source_file(o.target, "a .lzir file");
  if (!text) {
    std::cerr << "lazylab: " << text.error().message << "\n";
    return kExitError;
  }
  int exit = kExitOk;
  std::vector<Chunk> chunks = split_chunks(*text, o.split);
  for (size_t i = 0; i < chunks.size(); ++i) {
    if (i) std::cout << "// -----\n";
    auto parsed = parse_graph(chunks[i].text, o.target, chunks[i].first_line);
    Status status = parsed ? show_graph(std::move(parsed->graph), parsed->name, o, pipeline) : Status(parsed.error());
    if (!status) {
      std::cerr << "lazylab: " << status.error().message << "\n";
      exit = kExitError;
    }
  }
  return exit;
}

}  // namespace

int show_command(const Args& args) {
  ShowOptions o;
  po::options_description options("lazylab show options");
  options.add_options()("target", po::value(&o.target)->required(), "a built-in workload name or a .lzir file")(
      "pipeline,p", po::value(&o.pipeline), "pass pipeline, e.g. 'canonicalize,cse,dce,fuse{strategy=none},lower'")(
      "param", po::value(&o.params)->composing(), "workload parameter NAME=INTEGER (repeatable)")(
      "dot", po::bool_switch(&o.dot), "print Graphviz DOT instead of IR")(
      "split-input-file", po::bool_switch(&o.split), "treat each '// -----' chunk of the file as its own case")(
      "verify-each", po::bool_switch(&o.verify_each), "verify the IR after every pass")(
      "print-after-all", po::bool_switch(&o.print_after_all), "print the IR after every pass")(
      "print-after", po::value(&o.print_after)->composing(), "print the IR after this pass (repeatable)")(
      "explain-fusion", po::bool_switch(&o.explain_fusion),
      "print each candidate pair a fusion strategy considered, with its decision and reason")(
      "backend,b", po::value(&o.backend), "fuse for this backend's capabilities (default: no limits)")(
      "code", po::bool_switch(&o.code),
      "print the code the backend generates for the lowered Program (needs --backend)");
  po::positional_options_description positional;
  positional.add("target", 1);
  po::variables_map vm;
  if (auto exit =
          parse_args(args, "usage: lazylab show WORKLOAD|FILE.lzir [--pipeline P] [--dot]", options, positional, vm))
    return *exit;
  std::unique_ptr<Backend> backend;
  if (!o.backend.empty()) {
    auto loaded = load_backend(o.backend);
    if (!loaded) {
      std::cerr << "lazylab: " << loaded.error().message << "\n";
      return kExitError;
    }
    backend = std::move(*loaded);
    o.capabilities = &backend->capabilities();
    o.backend_object = backend.get();
  } else if (o.code) {
    std::cerr << "lazylab: --code needs --backend: the backend whose code to show\n";
    return kExitUsage;
  }
  Pipeline pipeline;  // no --pipeline: the graph as it is; an empty one is an error, as in an experiment
  if (vm.count("pipeline")) {
    auto parsed = parse_pipeline(o.pipeline);
    if (!parsed) {
      std::cerr << "lazylab: " << parsed.error().message << "\n";
      return kExitError;
    }
    pipeline = std::move(*parsed);
  }
  for (const std::string& name : o.print_after)
    if (std::none_of(pipeline.passes.begin(), pipeline.passes.end(),
                     [&](const PassInvocation& p) { return p.info->name == name; })) {
      std::cerr << fmt::format("lazylab: --print-after {}: not a pass of the pipeline '{}'\n", name, o.pipeline);
      return kExitUsage;
    }
  if (o.target.ends_with(".lzir")) return show_file(o, pipeline);
  auto graph = capture_workload(o);
  Status status = graph ? show_graph(std::move(*graph), o.target, o, pipeline) : Status(graph.error());
  if (!status) {
    std::cerr << "lazylab: " << status.error().message << "\n";
    return kExitError;
  }
  return kExitOk;
}

}  // namespace lazylab::cli
