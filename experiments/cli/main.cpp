// lazylab: the command-line front door.
#include <fmt/format.h>

#include <cstring>
#include <functional>
#include <iostream>
#include <map>

#include "commands.h"
#include "core/backend.h"
#include "core/pass_plugin.h"
#include "core/version.h"

namespace {

struct Command {
  const char* summary;
  std::function<int(const lazylab::cli::Args&)> run;
};

const std::map<std::string, Command>& commands() {
  using namespace lazylab::cli;
  static const std::map<std::string, Command> kCommands = {
      {"run", {"run an experiment (workloads x pipelines x backends) and write its reports", run_command}},
      {"show", {"print a workload's or .lzir file's IR after a pipeline (or its Graphviz DOT)", show_command}},
      {"passes", {"list the registered passes with their options", passes_command}},
      {"backends", {"list the backend plugins found on the plugin path", backends_command}},
      {"workloads", {"list the built-in workloads and their parameters", workloads_command}},
      {"report", {"render a finished run's JSON report again: console, Markdown or CSV", report_command}},
      {"import", {"an ONNX model as a .lzir graph and its weights as NumPy arrays", import_command}},
      {"onnx-test", {"run ONNX's backend node tests on a backend: passed, failed, unsupported", onnx_test_command}},
      {"merge", {"join the reports of an experiment's shards (run --shard I/N) into one", merge_command}},
      {"fuzz", {"random graphs through every pipeline and backend against the interpreter", fuzz_command}},
      {"compare", {"compare two reports cell by cell: ratios with intervals, exit 5 on a regression", compare_command}},
  };
  return kCommands;
}

void print_usage(std::ostream& out) {
  out << "usage: lazylab COMMAND [ARGS...]   (lazylab COMMAND --help for details)\n"
         "       lazylab --version\n\n"
         "Any command takes --load-plugin PATH (repeatable): a pass or fusion strategy plugin to load first.\n\n"
         "commands:\n";
  for (auto& [name, command] : commands()) out << fmt::format("  {:<10} {}\n", name, command.summary);
}

void print_version() {
  const lazylab::VersionInfo& info = lazylab::version_info();
  std::cout << fmt::format("lazylab {}\n", info.version)
            << fmt::format("  source:      {}\n  build:       {}, compiler {}\n", info.git_revision, info.build_type,
                           info.compiler)
            << fmt::format("  backend ABI: {}.{} (loads backend plugins built for {}.x)\n", info.backend_abi_major,
                           info.backend_abi_minor, info.backend_abi_major)
            << fmt::format("  library:     {}\n", lazylab::PluginSearch::library_directory());
  for (const std::string& dir : lazylab::PluginSearch::directories())
    std::cout << fmt::format("  plugin path: {}\n", dir);
}

// Takes every `--load-plugin PATH` (or `=PATH`) out of `args` and loads
// those pass plugins, before any command parses a pipeline.
bool load_plugins_from(std::vector<std::string>& args) {
  std::vector<std::string> rest;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string path;
    if (args[i] == "--load-plugin" && i + 1 < args.size())
      path = args[++i];
    else if (args[i].starts_with("--load-plugin="))
      path = args[i].substr(14);
    else {
      rest.push_back(args[i]);
      continue;
    }
    if (auto loaded = lazylab::load_pass_plugin(path); !loaded) {
      std::cerr << fmt::format("lazylab: {}\n", loaded.error().message);
      return false;
    }
  }
  args = std::move(rest);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    print_usage(argc < 2 ? std::cerr : std::cout);
    return argc < 2 ? lazylab::cli::kExitUsage : lazylab::cli::kExitOk;
  }
  if (!std::strcmp(argv[1], "--version")) {
    print_version();
    return lazylab::cli::kExitOk;
  }
  auto it = commands().find(argv[1]);
  if (it == commands().end()) {
    std::cerr << fmt::format("lazylab: unknown command '{}'\n", argv[1]);
    print_usage(std::cerr);
    return lazylab::cli::kExitUsage;
  }
  lazylab::cli::Args args(argv + 2, argv + argc);
  if (!load_plugins_from(args)) return lazylab::cli::kExitError;
  return it->second.run(args);
}
