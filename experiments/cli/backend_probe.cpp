#include "backend_probe.h"

#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "core/backend.h"
#include "runner/child_process.h"

namespace lazylab::cli {
namespace {

namespace fs = std::filesystem;

// A GPU plugin's create and ceilings take seconds; one that takes this long
// is taken for hung.
constexpr double kProbeTimeoutSeconds = 120;

// Each stage is announced on a line of its own before it starts, so a child
// that dies says where; the last line is the JSON result.
nlohmann::json probe_json(const std::string& path, const std::string& options, bool ceilings) {
  nlohmann::json json = {{"summary", ""}, {"device", ""}, {"problem", ""}};
  std::cout << "loading" << std::endl;
  auto summary = backend_library_summary(path);
  if (!summary) {
    json["problem"] = summary.error().message;
    return json;
  }
  json["summary"] = *summary;
  if (auto options = backend_library_options(path)) json["options"] = *options;
  std::cout << "creating" << std::endl;
  auto backend = load_backend(path, options);
  if (!backend) {
    json["problem"] = backend.error().message;
    return json;
  }
  json["device"] = (*backend)->device_description();
  if (ceilings) {
    std::cout << "measuring its ceilings" << std::endl;
    auto measured = (*backend)->measure_ceilings(0);
    if (!measured) {
      json["problem"] = measured.error().message;
      return json;
    }
    json["ceilings"] = {
        {"copy_gb_s", measured->copy_gb_s}, {"gemm_gflop_s", measured->gemm_gflop_s}, {"method", measured->method}};
  }
  return json;
}

}  // namespace

int probe_in_this_process(const std::string& path, const std::string& options, bool ceilings) {
  std::cout << probe_json(path, options, ceilings).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
            << std::endl;
  return kExitOk;
}

BackendProbe probe_in_child(const std::string& path, const std::string& options, bool ceilings) {
  static std::atomic<int> probes{0};
  std::error_code ec;
  fs::path scratch = fs::temp_directory_path(ec) / fmt::format("lazylab-probe-{}-{}", getpid(), probes++);
  fs::create_directories(scratch, ec);
  BackendProbe probe;
  if (ec) {
    probe.crash = fmt::format("cannot create {}: {}", scratch.string(), ec.message());
    return probe;
  }
  fs::path output = scratch / "probe.json", errors = scratch / "stderr.txt";
  std::vector<std::string> argv = {self_executable(), "backends", "--probe", path, "--options", options};
  if (ceilings) argv.push_back("--ceilings");
  ChildOptions child;
  child.stdout_file = output.string();
  child.stderr_file = errors.string();
  child.timeout_s = kProbeTimeoutSeconds;
  ChildOutcome outcome = run_child(argv, child);
  std::ifstream in(output);
  std::string stage = "loading", line;
  nlohmann::json json;
  while (std::getline(in, line)) {
    if (line.starts_with("{"))
      json = nlohmann::json::parse(line, nullptr, false);
    else if (!line.empty())
      stage = line;
  }
  std::string said = last_lines(errors.string(), 3);
  if (outcome.succeeded() && json.is_object()) {
    probe.summary = json.value("summary", "");
    probe.device = json.value("device", "");
    probe.error = json.value("problem", "");
    probe.options = json.value("options", std::vector<std::string>());
    if (json.contains("ceilings") && json["ceilings"].is_object())
      probe.ceilings = {json["ceilings"].value("copy_gb_s", 0.0), json["ceilings"].value("gemm_gflop_s", 0.0),
                        json["ceilings"].value("method", std::string())};
  } else if (outcome.signal) {
    probe.crash = fmt::format("crashed while {} (signal {}: {}){}", stage, outcome.signal, strsignal(outcome.signal),
                              said.empty() ? "" : ": " + said);
  } else if (outcome.timed_out) {
    probe.crash = fmt::format("did not finish {} in {:.0f} s", stage, kProbeTimeoutSeconds);
  } else {
    probe.crash = fmt::format("the probe failed: {}{}", outcome.describe("lazylab backends --probe"),
                              said.empty() ? "" : ": " + said);
  }
  fs::remove_all(scratch, ec);
  return probe;
}

}  // namespace lazylab::cli
