// The run's progress output on a terminal (a live line rewritten in place)
// and in a pipe (plain lines with counts and times), on a fake clock.
#include <sstream>

#include "runner/progress.h"
#include "support.h"

using namespace lazylab;

namespace {

struct FakeClock {
  std::chrono::steady_clock::time_point now{};
  void advance(int seconds) { now += std::chrono::seconds(seconds); }
  Progress::Clock clock() {
    return [this] { return now; };
  }
};

}  // namespace

TEST_CASE("in a pipe, each finished cell is a plain line with its count, time spent and time left") {
  std::ostringstream out;
  FakeClock time;
  Progress progress(out, false, time.clock());
  progress.line("  ceilings: copy 20 GB/s");
  progress.start(4);
  progress.working_on("softmax, round 3 of 13");  // nothing in a pipe
  time.advance(30);
  progress.cell_done("softmax / fused / cpu", "0.1234 ms ok");
  time.advance(30);
  progress.cell_done("softmax / eager / cpu", "FAILED: no kernel");
  time.advance(65);
  progress.cell_done("mlp / fused / cpu", "1.0 ms ok");
  progress.cell_done("mlp / eager / cpu", "1.1 ms ok");
  progress.finish();
  CHECK(out.str() ==
        "  ceilings: copy 20 GB/s\n"
        "  [1/4] softmax / fused / cpu: 0.1234 ms ok (0:30 elapsed, about 1:30 left)\n"
        "  [2/4] softmax / eager / cpu: FAILED: no kernel (1:00 elapsed, about 1:00 left)\n"
        "  [3/4] mlp / fused / cpu: 1.0 ms ok (2:05 elapsed, about 0:42 left)\n"
        "  [4/4] mlp / eager / cpu: 1.1 ms ok (2:05 elapsed)\n");
  CHECK(out.str().find('\r') == std::string::npos);
}

TEST_CASE("on a terminal, a live line stays under the plain lines and is cleared at the end") {
  std::ostringstream out;
  FakeClock time;
  Progress progress(out, true, time.clock());
  progress.start(2);
  progress.working_on("softmax, round 2 of 13");
  time.advance(3725);
  progress.cell_done("softmax / fused / cpu", "0.1 ms ok");
  progress.working_on("mlp");
  progress.finish();
  const std::string clear = "\r\x1b[K";
  CHECK(out.str() == "[0/2] softmax, round 2 of 13 · 0:00 elapsed" + clear +
                         "  [1/2] softmax / fused / cpu: 0.1 ms ok\n"
                         "[1/2] softmax, round 2 of 13 · 1:02:05 elapsed, about 1:02:05 left" +
                         clear + "[1/2] mlp · 1:02:05 elapsed, about 1:02:05 left" + clear);
}

TEST_CASE("a line printed on a terminal does not leave the live line behind") {
  std::ostringstream out;
  FakeClock time;
  Progress progress(out, true, time.clock());
  progress.start(1);
  progress.working_on("peer torch");
  progress.line("  peer torch: failed: exited with status 1");
  progress.finish();
  std::string text = out.str();
  size_t line = text.find("  peer torch: failed");
  REQUIRE(line != std::string::npos);
  CHECK(text.substr(line - 4, 4) == "\r\x1b[K");  // the live line was cleared first
  CHECK(text.ends_with("\r\x1b[K"));
}
