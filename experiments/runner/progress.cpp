#include "progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cmath>
#include <ostream>

namespace lazylab {
namespace {

std::string clock_text(double seconds) {
  auto whole = static_cast<long long>(std::llround(std::max(0.0, seconds)));
  if (whole >= 3600) return fmt::format("{}:{:02}:{:02}", whole / 3600, whole / 60 % 60, whole % 60);
  return fmt::format("{}:{:02}", whole / 60, whole % 60);
}

}  // namespace

Progress::Progress(std::ostream& out, bool live, Clock clock)
    : out_(out), live_(live), clock_(std::move(clock)), started_(clock_()) {}

Progress::~Progress() { finish(); }

void Progress::start(size_t total_cells) {
  total_ = total_cells;
  done_ = 0;
  started_ = clock_();
}

std::string Progress::times() const {
  double elapsed = std::chrono::duration<double>(clock_() - started_).count();
  std::string text = clock_text(elapsed) + " elapsed";
  if (done_ > 0 && done_ < total_)
    text +=
        ", about " + clock_text(elapsed / static_cast<double>(done_) * static_cast<double>(total_ - done_)) + " left";
  return text;
}

void Progress::clear_live_line() {
  if (drawn_) out_ << "\r\x1b[K";
  drawn_ = false;
}

void Progress::redraw() {
  if (!live_) return;
  clear_live_line();
  std::string count = total_ ? fmt::format("[{}/{}] ", done_, total_) : "";
  out_ << count << current_ << (current_.empty() ? "" : " · ") << times() << std::flush;
  drawn_ = true;
}

void Progress::line(const std::string& text) {
  clear_live_line();
  out_ << text << "\n";
  redraw();
}

void Progress::working_on(const std::string& what) {
  current_ = what;
  redraw();
}

void Progress::cell_done(const std::string& cell, const std::string& outcome) {
  ++done_;
  std::string text = fmt::format("  [{}/{}] {}: {}", done_, total_, cell, outcome);
  if (!live_) text += fmt::format(" ({})", times());
  line(text);
}

void Progress::finish() {
  clear_live_line();
  out_ << std::flush;
}

bool stderr_is_terminal() { return ::isatty(STDERR_FILENO) == 1; }

}  // namespace lazylab
