#include "algo_choice.h"

#include <fmt/format.h>
#include <xxhash.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "disk_cache.h"

namespace lazylab::cuda {
namespace {

constexpr char kMagic[8] = {'L', 'Z', 'C', 'B', 'L', 'T', 'A', '1'};
constexpr size_t kWords = sizeof(cublasLtMatmulAlgo_t) / sizeof(uint64_t);
constexpr size_t kListedCandidates = 8;  // a description lists every time up to this many

const char* source_text(AlgoChoice::Source source) {
  switch (source) {
    case AlgoChoice::Source::Timed: return "timed at compile";
    case AlgoChoice::Source::Disk: return "from the disk cache";
    case AlgoChoice::Source::Process: return "chosen earlier in this process";
    case AlgoChoice::Source::Heuristic: return "not timed: operands too large, or no candidate ran";
  }
  return "";
}

// Rounded for a reader, or exact (the shortest text that reads back as the
// same float) for the disk.
std::string times_text(const std::vector<float>& ms, bool exact = false) {
  std::string text;
  for (float t : ms) text += t < 0 ? " failed" : exact ? fmt::format(" {}", t) : fmt::format(" {:.4f}", t);
  return text;
}

}  // namespace

std::string describe(const AlgoChoice& choice) {
  size_t count = choice.candidate_ms.size();
  if (count == 0 || choice.chosen < 0 || static_cast<size_t>(choice.chosen) >= count)
    return fmt::format("the heuristic's first ({})", source_text(choice.source));
  std::string times = "all:" + times_text(choice.candidate_ms);
  if (count > kListedCandidates) {
    std::vector<float> fastest;
    for (float t : choice.candidate_ms)
      if (t >= 0) fastest.push_back(t);
    std::sort(fastest.begin(), fastest.end());
    fastest.resize(std::min<size_t>(fastest.size(), 5));
    times = fmt::format("fastest:{} ms; the heuristic's first:{}", times_text(fastest),
                        times_text({choice.candidate_ms[0]}));
  }
  std::string source = source_text(choice.source);
  if (choice.source == AlgoChoice::Source::Timed && choice.search_ms >= 0)
    source += fmt::format(" in {:.1f} ms", choice.search_ms);
  if (choice.source == AlgoChoice::Source::Timed && choice.timed_alone > 0)
    source += fmt::format(", {} of them alone: their shared graph failed", choice.timed_alone);
  return fmt::format("candidate {} of {}, {:.4f} ms ({}; {} ms)", choice.chosen + 1, count,
                     choice.candidate_ms[choice.chosen], source, times);
}

std::string serialize(const AlgoChoice& choice) {
  uint64_t words[kWords];
  std::memcpy(words, &choice.algo, sizeof words);
  std::string text = "algo";
  for (uint64_t w : words) text += fmt::format(" {:016x}", w);
  text += fmt::format("\nchosen {}\nms{}\n", choice.chosen, times_text(choice.candidate_ms, true));
  return text;
}

std::optional<AlgoChoice> parse_algo_choice(const std::string& payload) {
  std::istringstream in(payload);
  std::string word;
  AlgoChoice choice;
  uint64_t words[kWords];
  if (!(in >> word) || word != "algo") return std::nullopt;
  for (uint64_t& w : words)
    if (!(in >> std::hex >> w)) return std::nullopt;
  std::memcpy(&choice.algo, words, sizeof words);
  if (!(in >> std::dec >> word) || word != "chosen" || !(in >> choice.chosen)) return std::nullopt;
  if (!(in >> word) || word != "ms") return std::nullopt;
  for (std::string t; in >> t;) {
    if (t == "failed") {
      choice.candidate_ms.push_back(-1);
      continue;
    }
    try {
      choice.candidate_ms.push_back(std::stof(t));
    } catch (const std::exception&) {
      return std::nullopt;
    }
  }
  if (choice.chosen < 0 || static_cast<size_t>(choice.chosen) >= choice.candidate_ms.size()) return std::nullopt;
  choice.source = AlgoChoice::Source::Disk;
  return choice;
}

std::string algo_choice_path(const std::string& cache_dir, const std::string& identity) {
  return (std::filesystem::path(cache_dir) /
          fmt::format("{:016x}.cublaslt", XXH3_64bits(identity.data(), identity.size())))
      .string();
}

std::optional<AlgoChoice> load_algo_choice(const std::string& path, std::string& why) {
  std::string payload = read_cache_entry(path, kMagic, why);
  if (payload.empty()) return std::nullopt;
  auto choice = parse_algo_choice(payload);
  if (!choice) why = "corrupt cache entry (not a cuBLASLt choice)";
  return choice;
}

void store_algo_choice(const std::string& path, const AlgoChoice& choice) {
  write_cache_entry(path, kMagic, serialize(choice));
}

}  // namespace lazylab::cuda
