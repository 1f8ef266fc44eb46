// Statistics that separate signal from noise on a shared machine: medians
// with 95% bootstrap confidence intervals, for one cell's samples and for the
// ratio of two cells' medians.
#pragma once

#include <cstdint>
#include <vector>

namespace lazylab {

struct Spread {
  double median = 0, min = 0, max = 0;
};
Spread spread_of(std::vector<double> samples);

// A median and its 95% percentile-bootstrap interval [low, high].
struct Estimate {
  double value = 0, low = 0, high = 0;
  // (high - low) / value: the interval's width relative to the estimate.
  double relative_width() const { return value > 0 ? (high - low) / value : 0; }
  bool contains(double x) const { return low <= x && x <= high; }
};

inline constexpr int kBootstrapResamples = 2000;

// The median of `samples` with its interval; resampling is seeded, so the
// same samples give the same interval.
Estimate bootstrap_median(const std::vector<double>& samples, uint64_t seed);

// median(numerator) / median(denominator) with its interval, each side
// resampled independently (the two were measured independently).
Estimate bootstrap_ratio(const std::vector<double>& numerator, const std::vector<double>& denominator, uint64_t seed);

// How a ratio's interval reads: above 1 with 1 outside the interval is a
// significant increase; an interval holding 1 is no significant difference.
enum class Verdict { Lower, Higher, NoSignificantDifference };
Verdict verdict_of(const Estimate& ratio);
const char* verdict_name(Verdict verdict);

}  // namespace lazylab
