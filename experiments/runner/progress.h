// What a run says while it goes: cells done of the total, the current
// cell, the time spent and an estimate of the time left. On a terminal, a
// live status line rewritten in place under the plain lines; in a pipe or a
// CI log, plain lines only, each finished cell with its count and times.
#pragma once

#include <chrono>
#include <functional>
#include <iosfwd>
#include <string>

namespace lazylab {

class Progress {
 public:
  using Clock = std::function<std::chrono::steady_clock::time_point()>;

  // `live`: `out` is a terminal (see stderr_is_terminal()).
  Progress(std::ostream& out, bool live, Clock clock = std::chrono::steady_clock::now);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  void start(size_t total_cells);
  // A line that stays (ceilings, a workload starting, a peer's outcome).
  void line(const std::string& text);
  // What runs now; shown on the live line only.
  void working_on(const std::string& what);
  // A finished cell: "[3/8] softmax / fused / cpu: 0.1234 ms ok".
  void cell_done(const std::string& cell, const std::string& outcome);
  // Removes the live line (before the report is printed).
  void finish();

  // "1:05 elapsed, about 2:10 left" (no estimate before the first cell).
  std::string times() const;

 private:
  void redraw();
  void clear_live_line();

  std::ostream& out_;
  bool live_;
  Clock clock_;
  std::chrono::steady_clock::time_point started_;
  size_t total_ = 0, done_ = 0;
  std::string current_;
  bool drawn_ = false;
};

bool stderr_is_terminal();

}  // namespace lazylab
