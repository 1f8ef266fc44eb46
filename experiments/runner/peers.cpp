#include "peers.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spawn.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "workload.h"

extern char** environ;

namespace lazylab {
namespace {

namespace fs = std::filesystem;

bool is_builtin(const std::string& name) {
  for (const WorkloadInfo& info : builtin_workloads())
    if (info.name == name) return true;
  return false;
}

std::vector<std::string> protocol_arguments(const Experiment& e, const fs::path& out) {
  std::vector<std::string> names, args;
  for (const WorkloadEntry& w : e.workloads) {
    // .lzir files have no peer definition; a workload listed again (a sweep)
    // is given to the peer once, with its first entry's parameters.
    if (!is_builtin(w.name) || std::find(names.begin(), names.end(), w.name) != names.end()) continue;
    names.push_back(w.name);
    for (auto& [key, value] : w.params) args.push_back(fmt::format("--param={}.{}={}", w.name, key, value));
  }
  args.insert(args.begin(), "--workloads=" + fmt::format("{}", fmt::join(names, ",")));
  args.push_back(fmt::format("--warmup={}", e.warmup));
  args.push_back(fmt::format("--runs={}", e.runs));
  args.push_back(fmt::format("--threads={}", std::max(1u, std::thread::hardware_concurrency())));
  args.push_back(fmt::format("--seed={}", e.seed));
  args.push_back("--out=" + out.string());
  return args;
}

// Runs `argv` in `folder` with OPENBLAS_CORETYPE set; the exit status, or
// the reason it could not start.
std::string spawn_and_wait(const std::vector<std::string>& argv, const fs::path& folder, const std::string& blas_core) {
  std::vector<std::string> env_strings;
  for (char** at = environ; *at; ++at)
    if (std::strncmp(*at, "OPENBLAS_CORETYPE=", 18) != 0) env_strings.emplace_back(*at);
  if (!blas_core.empty()) env_strings.push_back("OPENBLAS_CORETYPE=" + blas_core);
  std::vector<char*> c_argv, c_env;
  for (const std::string& s : argv) c_argv.push_back(const_cast<char*>(s.c_str()));
  for (const std::string& s : env_strings) c_env.push_back(const_cast<char*>(s.c_str()));
  c_argv.push_back(nullptr);
  c_env.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addchdir_np(&actions, folder.c_str());
  pid_t pid = 0;
  int failed = posix_spawnp(&pid, c_argv[0], &actions, nullptr, c_argv.data(), c_env.data());
  posix_spawn_file_actions_destroy(&actions);
  if (failed) return fmt::format("cannot start '{}': {}", argv[0], std::strerror(failed));
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return fmt::format("waiting for '{}': {}", argv[0], std::strerror(errno));
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return "";
  if (WIFEXITED(status)) return fmt::format("'{}' exited with status {}", argv[0], WEXITSTATUS(status));
  return fmt::format("'{}' ended by signal {}", argv[0], WTERMSIG(status));
}

std::string read_report(const fs::path& file, PeerResult& result) {
  std::ifstream in(file);
  if (!in) return fmt::format("it wrote no report to {}", file.string());
  try {
    nlohmann::json report = nlohmann::json::parse(in);
    result.description = report.at("peer").get<std::string>();
    for (const nlohmann::json& cell : report.at("cells")) {
      const nlohmann::json& ms = cell.at("step_ms");
      result.cells.push_back({cell.at("workload").get<std::string>(), ms.at("median").get<double>(),
                              ms.at("min").get<double>(), ms.at("max").get<double>()});
    }
  } catch (const nlohmann::json::exception& ex) {
    result.cells.clear();
    return fmt::format("its report {} is not a peer report: {}", file.string(), ex.what());
  }
  return "";
}

}  // namespace

PeerResult run_peer(const PeerEntry& peer, const Experiment& experiment, const std::string& blas_core) {
  PeerResult result{peer.name, peer.command, "", "", {}};
  std::error_code ec;
  fs::path scratch = fs::temp_directory_path(ec) / fmt::format("lazylab-peer-{}-{}", getpid(), peer.name);
  fs::create_directories(scratch, ec);
  if (ec) {
    result.error = fmt::format("cannot create {}: {}", scratch.string(), ec.message());
    return result;
  }
  fs::path out = scratch / "report.json";
  for (std::string& arg : protocol_arguments(experiment, out)) result.command.push_back(std::move(arg));
  fs::path folder = fs::path(experiment.path).parent_path();
  result.error = spawn_and_wait(result.command, folder.empty() ? fs::path(".") : folder, blas_core);
  if (result.error.empty()) result.error = read_report(out, result);
  fs::remove_all(scratch, ec);
  return result;
}

}  // namespace lazylab
