// Runs a program as a child process and waits for it, with a time limit:
// peers, and cells isolated from the runner (a plugin that crashes ends its
// child, not the run).
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace lazylab {

struct ChildOptions {
  std::string folder = ".";                    // working directory
  std::vector<std::string> unset_environment;  // variable names removed
  std::vector<std::string> set_environment;    // "NAME=value", added
  double timeout_s = 0;                        // 0: none
  std::string stdout_file;                     // where its stdout goes; empty: inherited
  std::string stderr_file;                     // where its stderr goes; empty: inherited
};

struct ChildOutcome {
  bool started = false;
  std::optional<int> exit_code;  // set when it exited
  int signal = 0;                // the signal that ended it, or 0
  bool timed_out = false;        // killed (SIGKILL) at the time limit
  std::string error;             // why it could not start or be waited for

  bool succeeded() const { return exit_code && *exit_code == 0; }
  // "exited with status 3", "ended by signal 11 (Segmentation fault)",
  // "killed after 30 s", or the error.
  std::string describe(const std::string& program) const;
};

ChildOutcome run_child(const std::vector<std::string>& argv, const ChildOptions& options);

// The last `lines` non-empty lines of a file a child wrote (its stderr: why
// it failed, in its words), " | "-joined.
std::string last_lines(const std::string& file, size_t lines);

// The running executable's path, to start a copy of it as a child (empty
// where /proc cannot tell).
std::string self_executable();

// PYTHONPATH for a Python child that imports lazylab: the package beside the
// running CLI first (the build tree's python/ folder), then the inherited
// PYTHONPATH. An installed CLI's package is on the interpreter's own path.
std::string package_python_path();

}  // namespace lazylab
