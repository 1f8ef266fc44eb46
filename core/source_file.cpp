#include "core/source_file.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace lazylab {

Expected<std::string> read_source_file(const std::string& path, std::string_view what) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return make_error(fmt::format("{}: is a folder, not {}", path, what));
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(fmt::format("{}: cannot open {}", path, what));
  std::stringstream text;
  text << in.rdbuf();
  if (in.bad()) return make_error(fmt::format("{}: cannot read {}", path, what));
  return text.str();
}

}  // namespace lazylab
