#include "statistics.h"

#include <algorithm>
#include <cmath>
#include <random>

namespace lazylab {
namespace {

double median_in_place(std::vector<double>& values) {
  size_t n = values.size(), half = n / 2;
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(half), values.end());
  double upper = values[half];
  if (n % 2) return upper;
  return (*std::max_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(half)) + upper) / 2;
}

// One bootstrap replicate: the median of n draws with replacement.
double resampled_median(const std::vector<double>& samples, std::mt19937_64& rng, std::vector<double>& scratch) {
  std::uniform_int_distribution<size_t> pick(0, samples.size() - 1);
  scratch.resize(samples.size());
  for (double& x : scratch) x = samples[pick(rng)];
  return median_in_place(scratch);
}

// The 2.5th and 97.5th percentiles of the replicates.
Estimate interval(double value, std::vector<double>& replicates) {
  std::sort(replicates.begin(), replicates.end());
  auto at = [&](double q) {
    double position = q * static_cast<double>(replicates.size() - 1);
    size_t below = static_cast<size_t>(std::floor(position));
    size_t above = std::min(below + 1, replicates.size() - 1);
    double t = position - static_cast<double>(below);
    return replicates[below] * (1 - t) + replicates[above] * t;
  };
  return {value, std::min(value, at(0.025)), std::max(value, at(0.975))};
}

}  // namespace

Spread spread_of(std::vector<double> samples) {
  if (samples.empty()) return {};
  std::sort(samples.begin(), samples.end());
  size_t n = samples.size();
  double median = n % 2 ? samples[n / 2] : (samples[n / 2 - 1] + samples[n / 2]) / 2;
  return {median, samples.front(), samples.back()};
}

Estimate bootstrap_median(const std::vector<double>& samples, uint64_t seed) {
  if (samples.empty()) return {};
  std::vector<double> scratch = samples;
  double value = median_in_place(scratch);
  std::mt19937_64 rng(seed);
  std::vector<double> replicates(kBootstrapResamples);
  for (double& r : replicates) r = resampled_median(samples, rng, scratch);
  return interval(value, replicates);
}

Estimate bootstrap_ratio(const std::vector<double>& numerator, const std::vector<double>& denominator, uint64_t seed) {
  if (numerator.empty() || denominator.empty()) return {};
  std::vector<double> scratch = numerator;
  double top = median_in_place(scratch);
  scratch = denominator;
  double bottom = median_in_place(scratch);
  if (!(bottom > 0)) return {};
  std::mt19937_64 rng(seed);
  std::vector<double> replicates(kBootstrapResamples);
  for (double& r : replicates) {
    double a = resampled_median(numerator, rng, scratch), b = resampled_median(denominator, rng, scratch);
    r = b > 0 ? a / b : 0;
  }
  return interval(top / bottom, replicates);
}

Verdict verdict_of(const Estimate& ratio) {
  if (ratio.contains(1.0)) return Verdict::NoSignificantDifference;
  return ratio.value > 1.0 ? Verdict::Higher : Verdict::Lower;
}

const char* verdict_name(Verdict verdict) {
  switch (verdict) {
    case Verdict::Lower: return "lower";
    case Verdict::Higher: return "higher";
    case Verdict::NoSignificantDifference: return "no significant difference";
  }
  return "";
}

}  // namespace lazylab
