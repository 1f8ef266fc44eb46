#include "pipeline_sweep.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cctype>

namespace lazylab {
namespace {

// One "OPTION={a,b}" in the text: [begin, end) is what a choice replaces.
struct OptionList {
  size_t begin = 0, end = 0;
  std::string option;
  std::vector<std::string> values;
};

bool is_option_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-'; }

std::string trimmed(std::string_view text) {
  size_t first = text.find_first_not_of(" \t"), last = text.find_last_not_of(" \t");
  return first == std::string_view::npos ? "" : std::string(text.substr(first, last - first + 1));
}

// Lists whose braces hold no '{', '}' or '=' (an option's own braces are
// not lists); one linear scan, left to right.
std::vector<OptionList> find_option_lists(const std::string& text) {
  std::vector<OptionList> lists;
  for (size_t at = text.find("={"); at != std::string::npos; at = text.find("={", at + 1)) {
    size_t close = text.find_first_of("{}=", at + 2);
    if (close == std::string::npos || text[close] != '}') continue;
    size_t begin = at;
    while (begin > 0 && is_option_char(text[begin - 1])) --begin;
    if (begin == at) continue;
    OptionList list{begin, close + 1, text.substr(begin, at - begin), {}};
    std::string_view inside = std::string_view(text).substr(at + 2, close - at - 2);
    for (size_t start = 0; start <= inside.size();) {
      size_t comma = std::min(inside.find(',', start), inside.size());
      std::string value = trimmed(inside.substr(start, comma - start));
      if (!value.empty()) list.values.push_back(std::move(value));
      start = comma + 1;
    }
    lists.push_back(std::move(list));
    at = close;
  }
  return lists;
}

}  // namespace

Expected<std::vector<ExpandedPipeline>> expand_pipeline_sweep(const std::string& name, const std::string& text) {
  std::vector<OptionList> lists = find_option_lists(text);
  if (lists.empty()) return std::vector<ExpandedPipeline>{{name, text}};
  int64_t combinations = 1;
  for (const OptionList& list : lists) {
    if (list.values.empty()) return make_error(fmt::format("'{}={{}}' lists no values to sweep", list.option));
    combinations *= static_cast<int64_t>(list.values.size());
    if (combinations > kMaxSweepEntries)
      return make_error(fmt::format("the sweep expands to more than {} pipelines", kMaxSweepEntries));
  }
  std::vector<ExpandedPipeline> expanded;
  std::vector<size_t> choice(lists.size(), 0);  // an odometer: the last list turns fastest
  for (int64_t n = 0; n < combinations; ++n) {
    std::string chosen_text, names;
    size_t copied = 0;
    for (size_t i = 0; i < lists.size(); ++i) {
      std::string chosen = lists[i].option + "=" + lists[i].values[choice[i]];
      chosen_text += text.substr(copied, lists[i].begin - copied) + chosen;
      copied = lists[i].end;
      names += (i ? "," : "") + chosen;
    }
    chosen_text += text.substr(copied);
    expanded.push_back({fmt::format("{}[{}]", name, names), std::move(chosen_text)});
    for (size_t i = lists.size(); i-- > 0;) {
      if (++choice[i] < lists[i].values.size()) break;
      choice[i] = 0;
    }
  }
  return expanded;
}

}  // namespace lazylab
