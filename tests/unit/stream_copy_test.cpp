#include "runner/stream_copy.h"

#include <doctest/doctest.h>

#include <numeric>
#include <vector>

TEST_CASE("stream_copy copies every float, whatever the target's alignment and the length") {
  std::vector<float> source(300), target(320);
  std::iota(source.begin(), source.end(), 1.0f);
  for (size_t offset : {0, 1, 3, 5, 15})
    for (size_t n : {0, 1, 7, 16, 17, 64, 255, 300}) {
      std::fill(target.begin(), target.end(), -1.0f);
      lazylab::stream_copy(target.data() + offset, source.data(), n);
      for (size_t i = 0; i < target.size(); ++i) {
        bool copied = i >= offset && i < offset + n;
        CHECK_MESSAGE(target[i] == (copied ? source[i - offset] : -1.0f), "offset ", offset, " n ", n, " i ", i);
      }
    }
}
