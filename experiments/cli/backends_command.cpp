// lazylab backends: each backend plugin on the plugin path, once, with the
// file it came from. Each plugin is loaded in a child process (this binary,
// `backends --probe FILE`), so one that crashes or hangs while loading is
// listed as unusable with the reason, and the others still are.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/backend.h"
#include "options.h"
#include "runner/child_process.h"

namespace lazylab::cli {
namespace {

namespace fs = std::filesystem;

constexpr double kProbeTimeoutSeconds = 60;

nlohmann::json probe_json(const BackendListing& listing) {
  return {{"summary", listing.summary}, {"device", listing.device}, {"problem", listing.problem}};
}

// The child's half: load, create, report on stdout as one JSON object.
int probe_in_this_process(const std::string& path) {
  BackendListing listing{fs::path(path).stem().string(), path, {}, {}, {}};
  probe_backend(listing);
  std::cout << probe_json(listing).dump() << std::endl;
  return kExitOk;
}

void probe_in_child(BackendListing& listing, const fs::path& scratch, int index) {
  fs::path output = scratch / fmt::format("probe-{}.json", index);
  ChildOptions options;
  options.stdout_file = output.string();
  options.stderr_file = (scratch / fmt::format("probe-{}.err", index)).string();
  options.timeout_s = kProbeTimeoutSeconds;
  ChildOutcome outcome = run_child({self_executable(), "backends", "--probe", listing.path}, options);
  std::ifstream in(output);
  nlohmann::json json = in ? nlohmann::json::parse(in, nullptr, false) : nlohmann::json();
  if (outcome.succeeded() && json.is_object()) {
    listing.summary = json.value("summary", "");
    listing.device = json.value("device", "");
    listing.problem = json.value("problem", "");
  } else if (outcome.signal) {
    listing.problem = fmt::format("crashed while loading (signal {}: {})", outcome.signal, strsignal(outcome.signal));
  } else if (outcome.timed_out) {
    listing.problem = fmt::format("did not finish loading in {:.0f} s", kProbeTimeoutSeconds);
  } else {
    listing.problem = fmt::format("the probe failed: {}", outcome.describe("lazylab backends --probe"));
  }
}

void print_listing(const BackendListing& b) {
  if (b.problem.empty())
    std::cout << fmt::format("{:<10} {}\n           device: {}\n           file: {}\n", b.name, b.summary, b.device,
                             b.path);
  else if (!b.summary.empty())
    std::cout << fmt::format("{:<10} {}\n           UNUSABLE here: {}\n           file: {}\n", b.name, b.summary,
                             b.problem, b.path);
  else
    std::cout << fmt::format("{:<10} UNUSABLE: {}\n           file: {}\n", b.name, b.problem, b.path);
}

}  // namespace

int backends_command(const Args& args) {
  const char* usage =
      "usage: lazylab backends [--in-process]\n"
      "Lists each backend plugin on the plugin path once, loading each in a child process.";
  po::options_description options("options");
  bool in_process = false;
  std::string probe;
  options.add_options()("in-process", po::bool_switch(&in_process),
                        "load the plugins in this process (a crashing plugin ends the listing)")(
      "probe", po::value(&probe), "(internal) load one plugin file and report it as JSON");
  po::variables_map vm;
  if (auto exit = parse_args(args, usage, options, {}, vm)) return *exit;
  if (!probe.empty()) return probe_in_this_process(probe);
  std::vector<BackendListing> listings = find_backend_plugins();
  std::error_code ec;
  fs::path scratch = fs::temp_directory_path(ec) / fmt::format("lazylab-backends-{}", getpid());
  if (!in_process) fs::create_directories(scratch, ec);
  for (size_t i = 0; i < listings.size(); ++i) {
    if (in_process || ec)
      probe_backend(listings[i]);
    else
      probe_in_child(listings[i], scratch, static_cast<int>(i));
    print_listing(listings[i]);
  }
  fs::remove_all(scratch, ec);
  std::cout << fmt::format("plugin path: {}\n", fmt::join(PluginSearch::directories(), ":"));
  return listings.empty() ? kExitError : kExitOk;
}

}  // namespace lazylab::cli
