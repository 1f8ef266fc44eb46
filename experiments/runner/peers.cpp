#include "peers.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "child_process.h"
#include "statistics.h"
#include "workload.h"

namespace lazylab {

std::string_view clock_name(PeerClock clock) { return clock == PeerClock::Device ? "device" : "host"; }

namespace {

namespace fs = std::filesystem;

bool is_builtin(const std::string& name) {
  for (const WorkloadInfo& info : builtin_workloads())
    if (info.name == name) return true;
  return false;
}

// How the peer is told a workload: a model by its absolute path, since the
// peer runs in the experiment's folder.
std::string peer_name(const WorkloadEntry& w) {
  std::error_code ec;
  return is_builtin(w.name) ? w.name : fs::absolute(w.name, ec).lexically_normal().string();
}

std::vector<std::string> protocol_arguments(const Experiment& e, const fs::path& out, const PeerRound* round) {
  std::vector<std::string> names, args;
  for (size_t index : round ? std::vector<size_t>{round->workload} : peer_workloads(e)) {
    const WorkloadEntry& w = e.workloads[index];
    names.push_back(peer_name(w));
    for (auto& [key, value] : w.params) args.push_back(fmt::format("--param={}.{}={}", peer_name(w), key, value));
  }
  args.insert(args.begin(), "--workloads=" + fmt::format("{}", fmt::join(names, ",")));
  args.push_back(fmt::format("--warmup={}", e.warmup));
  args.push_back(fmt::format("--runs={}", round ? round->runs : e.runs));
  args.push_back(fmt::format("--threads={}", std::max(1u, std::thread::hardware_concurrency())));
  args.push_back(fmt::format("--seed={}", e.seed));
  args.push_back("--out=" + out.string());
  if (e.flush_bytes > 0) args.push_back(fmt::format("--flush-mib={}", e.flush_bytes >> 20));
  return args;
}

std::string read_report(const fs::path& file, PeerResult& result) {
  std::ifstream in(file);
  if (!in) return fmt::format("it wrote no report to {}", file.string());
  try {
    nlohmann::json report = nlohmann::json::parse(in);
    result.description = report.at("peer").get<std::string>();
    std::string clock = report.value("clock", "host");
    if (clock != "host" && clock != "device")
      return fmt::format("its report {} gives clock '{}': it must be 'host' or 'device'", file.string(), clock);
    result.clock = clock == "device" ? PeerClock::Device : PeerClock::Host;
    for (const nlohmann::json& cell : report.at("cells")) {
      const nlohmann::json& ms = cell.at("step_ms");
      result.cells.push_back({cell.at("workload").get<std::string>(),
                              ms.at("median").get<double>(),
                              ms.at("min").get<double>(),
                              ms.at("max").get<double>(),
                              {},
                              cell.value("inputs", std::string()),
                              cell.value("train", std::string())});
    }
  } catch (const nlohmann::json::exception& ex) {
    result.cells.clear();
    return fmt::format("its report {} is not a peer report: {}", file.string(), ex.what());
  }
  return "";
}

// The end of a file, at most `limit` bytes.
std::string tail_of(const fs::path& file, std::streamoff limit) {
  std::ifstream in(file, std::ios::binary | std::ios::ate);
  if (!in) return "";
  std::streamoff size = in.tellg();
  in.seekg(std::max<std::streamoff>(0, size - limit));
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The last line with text in it: a Python traceback ends with its reason.
std::string last_line(const std::string& text) {
  size_t end = text.find_last_not_of(" \t\r\n");
  if (end == std::string::npos) return "";
  size_t start = text.rfind('\n', end);
  return text.substr(start == std::string::npos ? 0 : start + 1,
                     end + 1 - (start == std::string::npos ? 0 : start + 1));
}

}  // namespace

std::vector<size_t> peer_workloads(const Experiment& experiment) {
  std::vector<size_t> given;
  std::vector<std::string> names;
  for (size_t index = 0; index < experiment.workloads.size(); ++index) {
    const WorkloadEntry& w = experiment.workloads[index];
    // .lzir files have no peer definition (ONNX models and PyTorch programs
    // do: a peer may rebuild the network or run the program); a workload
    // listed again (a sweep) is given to the peer once, with its first
    // entry's parameters.
    bool peer_can_know = is_builtin(w.name) || w.name.ends_with(".onnx") || w.name.ends_with(".py");
    if (!peer_can_know || std::find(names.begin(), names.end(), peer_name(w)) != names.end()) continue;
    names.push_back(peer_name(w));
    given.push_back(index);
  }
  return given;
}

void add_round(PeerResult& total, PeerResult round) {
  if (total.command.empty()) {
    total.command = std::move(round.command);
    total.description = round.description;
    total.clock = round.clock;
  }
  if (total.description.empty()) total.description = round.description;
  if (!round.error.empty() && total.error.empty()) {
    total.error = std::move(round.error);
    total.stderr_text = std::move(round.stderr_text);
  }
  for (PeerCell& cell : round.cells) {
    auto same = std::find_if(total.cells.begin(), total.cells.end(),
                             [&](const PeerCell& c) { return c.workload == cell.workload; });
    if (same == total.cells.end()) {
      cell.round_ms = {cell.median_ms};
      total.cells.push_back(std::move(cell));
      continue;
    }
    same->round_ms.push_back(cell.median_ms);
    same->min_ms = std::min(same->min_ms, cell.min_ms);
    same->max_ms = std::max(same->max_ms, cell.max_ms);
    same->median_ms = spread_of(same->round_ms).median;
  }
}

PeerResult run_peer(const PeerEntry& peer, const Experiment& experiment, const std::vector<std::string>& environment,
                    const PeerRound* round) {
  PeerResult result{peer.name, peer.command, "", "", "", {}};
  std::error_code ec;
  fs::path scratch = fs::temp_directory_path(ec) / fmt::format("lazylab-peer-{}-{}", getpid(), peer.name);
  fs::create_directories(scratch, ec);
  if (ec) {
    result.error = fmt::format("cannot create {}: {}", scratch.string(), ec.message());
    return result;
  }
  fs::path out = scratch / "report.json";
  for (std::string& arg : protocol_arguments(experiment, out, round)) result.command.push_back(std::move(arg));
  fs::path folder = fs::path(experiment.path).parent_path();
  ChildOptions options;
  options.folder = folder.empty() ? "." : folder.string();
  options.set_environment = environment;
  // A Python peer may import lazylab (bench/peers/torch_training.py does).
  if (std::string path = package_python_path(); !path.empty()) options.set_environment.push_back("PYTHONPATH=" + path);
  options.timeout_s = experiment.peer_timeout_s;
  fs::path errors = scratch / "stderr.txt";
  options.stderr_file = errors.string();
  result.error = run_child(result.command, options).describe(result.command[0]);
  if (result.error.empty()) result.error = read_report(out, result);
  for (PeerCell& cell : result.cells)  // named back as the experiment names them
    for (const WorkloadEntry& w : experiment.workloads)
      if (cell.workload == peer_name(w)) cell.workload = w.name;
  if (!result.error.empty()) {
    result.stderr_text = tail_of(errors, 1 << 20);
    if (std::string reason = last_line(result.stderr_text); !reason.empty()) result.error += ": " + reason;
  }
  fs::remove_all(scratch, ec);
  return result;
}

}  // namespace lazylab
