// lazylab backends: each backend plugin on the plugin path, once, with the
// file it came from. Each plugin is loaded in a child process
// (backend_probe.h), so one that crashes or hangs while loading is listed
// as unusable with the reason, and the others still are.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "backend_probe.h"
#include "core/backend.h"
#include "options.h"

namespace lazylab::cli {
namespace {

void print_listing(const BackendListing& b) {
  if (b.problem.empty())
    std::cout << fmt::format("{:<10} {}\n           device: {}\n           file: {}\n", b.name, b.summary, b.device,
                             b.path);
  else if (!b.summary.empty())
    std::cout << fmt::format("{:<10} {}\n           UNUSABLE here: {}\n           file: {}\n", b.name, b.summary,
                             b.problem, b.path);
  else
    std::cout << fmt::format("{:<10} UNUSABLE: {}\n           file: {}\n", b.name, b.problem, b.path);
  for (size_t i = 0; i < b.options.size(); ++i)
    std::cout << fmt::format("           {:<9}{}\n", i == 0 ? "options:" : "", b.options[i]);
}

}  // namespace

int backends_command(const Args& args) {
  const char* usage =
      "usage: lazylab backends [--in-process]\n"
      "Lists each backend plugin on the plugin path once, loading each in a child process.";
  po::options_description options("options");
  bool in_process = false;
  std::string probe;
  std::string probe_options;
  bool probe_ceilings = false;
  options.add_options()("in-process", po::bool_switch(&in_process),
                        "load the plugins in this process (a crashing plugin ends the listing)")(
      "probe", po::value(&probe), "(internal) load and create one plugin file and report it as JSON")(
      "options", po::value(&probe_options), "(internal, for --probe) the options to create it with")(
      "ceilings", po::bool_switch(&probe_ceilings), "(internal, for --probe) measure its device ceilings too");
  po::variables_map vm;
  if (auto exit = parse_args(args, usage, options, {}, vm)) return *exit;
  if (!probe.empty()) return probe_in_this_process(probe, probe_options, probe_ceilings);
  std::vector<BackendListing> listings = find_backend_plugins();
  for (BackendListing& listing : listings) {
    if (in_process) {
      probe_backend(listing);
    } else {
      BackendProbe found = probe_in_child(listing.path, "", false);
      listing.summary = found.summary;
      listing.device = found.device;
      listing.problem = found.crash.empty() ? found.error : found.crash;
      listing.options = found.options;
    }
    print_listing(listing);
  }
  std::cout << fmt::format("plugin path: {}\n", fmt::join(PluginSearch::directories(), ":"));
  return listings.empty() ? kExitError : kExitOk;
}

}  // namespace lazylab::cli
