#include "child_process.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <spawn.h>
#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

extern char** environ;

namespace lazylab {
namespace {

std::vector<std::string> child_environment(const ChildOptions& options) {
  std::vector<std::string> env;
  for (char** at = environ; *at; ++at) {
    std::string_view entry(*at);
    std::string_view name = entry.substr(0, entry.find('='));
    bool removed = std::any_of(options.unset_environment.begin(), options.unset_environment.end(),
                               [&](const std::string& unset) { return name == unset; });
    if (!removed) env.emplace_back(entry);
  }
  for (const std::string& added : options.set_environment) env.push_back(added);
  return env;
}

// The child runs in a process group of its own, so that at its deadline
// everything it started goes too (a peer started through a shell left its
// grandchild running when only the shell was killed). A group of its own
// also hears no Ctrl-C from the terminal: while lazylab waits, an interrupt
// or termination it receives is passed on to the group before lazylab ends
// as that signal would have ended it.
std::atomic<int> received_signal{0};
extern "C" void note_signal(int signal) { received_signal = signal; }

class PassTerminationOn {
 public:
  PassTerminationOn() {
    struct sigaction action {};
    action.sa_handler = note_signal;
    sigemptyset(&action.sa_mask);
    for (size_t i = 0; i < std::size(kSignals); ++i) sigaction(kSignals[i], &action, &previous_[i]);
  }
  ~PassTerminationOn() { restore(); }
  void restore() {
    for (size_t i = 0; i < std::size(kSignals); ++i) sigaction(kSignals[i], &previous_[i], nullptr);
  }

 private:
  static constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP};
  struct sigaction previous_[std::size(kSignals)]{};
};

// Waits for `pid`, killing its group at the deadline or when lazylab is
// interrupted; polls, since waitpid has no timeout.
void wait_for(pid_t pid, const ChildOptions& options, ChildOutcome& outcome) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(options.timeout_s);
  PassTerminationOn pass_on;
  int status = 0, interrupted = 0;
  auto pause = std::chrono::milliseconds(1);
  for (;;) {
    pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (done < 0 && errno != EINTR) {
      outcome.error = fmt::format("waiting for the child: {}", std::strerror(errno));
      return;
    }
    if (int signal = received_signal.exchange(0); signal && !interrupted) {
      interrupted = signal;
      kill(-pid, SIGKILL);
    }
    if (options.timeout_s > 0 && std::chrono::steady_clock::now() > deadline && !outcome.timed_out) {
      kill(-pid, SIGKILL);
      outcome.timed_out = true;
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(20));
  }
  if (outcome.timed_out) kill(-pid, SIGKILL);  // what the group's leader left behind
  if (interrupted) {
    pass_on.restore();
    std::raise(interrupted);
  }
  if (WIFEXITED(status)) outcome.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) outcome.signal = WTERMSIG(status);
}

}  // namespace

std::string ChildOutcome::describe(const std::string& program) const {
  if (!error.empty()) return error;
  if (timed_out) return fmt::format("'{}' did not finish in time and was killed", program);
  if (signal) return fmt::format("'{}' ended by signal {} ({})", program, signal, strsignal(signal));
  if (exit_code && *exit_code != 0) return fmt::format("'{}' exited with status {}", program, *exit_code);
  return "";
}

ChildOutcome run_child(const std::vector<std::string>& argv, const ChildOptions& options) {
  ChildOutcome outcome;
  std::vector<std::string> env = child_environment(options);
  std::vector<char*> c_argv, c_env;
  for (const std::string& s : argv) c_argv.push_back(const_cast<char*>(s.c_str()));
  for (const std::string& s : env) c_env.push_back(const_cast<char*>(s.c_str()));
  c_argv.push_back(nullptr);
  c_env.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addchdir_np(&actions, options.folder.c_str());
  if (!options.stdout_file.empty())
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, options.stdout_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                     0644);
  if (!options.stderr_file.empty())
    posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, options.stderr_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                     0644);
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attributes, 0);  // a group of its own, led by the child
  pid_t pid = 0;
  int failed = posix_spawnp(&pid, c_argv[0], &actions, &attributes, c_argv.data(), c_env.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  if (failed) {
    outcome.error = fmt::format("cannot start '{}': {}", argv[0], std::strerror(failed));
    return outcome;
  }
  outcome.started = true;
  wait_for(pid, options, outcome);
  return outcome;
}

std::string last_lines(const std::string& file, size_t lines) {
  std::ifstream in(file);
  std::vector<std::string> kept;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    kept.push_back(line);
    if (kept.size() > lines) kept.erase(kept.begin());
  }
  std::string text;
  for (const std::string& line : kept) text += (text.empty() ? "" : " | ") + line;
  return text;
}

std::string self_executable() {
  std::error_code ec;
  return std::filesystem::read_symlink("/proc/self/exe", ec).string();
}

std::string package_python_path() {
  namespace fs = std::filesystem;
  const char* inherited = std::getenv("PYTHONPATH");
  std::string rest = inherited && *inherited ? std::string(":") + inherited : "";
  fs::path exe = self_executable();
  std::error_code ec;
  for (const fs::path& candidate : {exe.parent_path().parent_path() / "python", exe.parent_path() / "python"})
    if (fs::exists(candidate / "lazylab" / "torch" / "loop.py", ec)) return candidate.string() + rest;
  return rest.empty() ? "" : rest.substr(1);
}

}  // namespace lazylab
