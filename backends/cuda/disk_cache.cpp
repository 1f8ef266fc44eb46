#include "disk_cache.h"

#include <fmt/format.h>
#include <unistd.h>
#include <xxhash.h>

#include <cstring>
#include <filesystem>
#include <fstream>

namespace lazylab::cuda {
namespace {

namespace fs = std::filesystem;

struct Header {
  char magic[8];
  uint64_t size;
  uint64_t checksum;
};

}  // namespace

std::string read_cache_entry(const std::string& path, const char (&magic)[8], std::string& why) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    why = "not cached";
    return "";
  }
  Header header{};
  in.read(reinterpret_cast<char*>(&header), sizeof header);
  if (!in || std::memcmp(header.magic, magic, sizeof magic) != 0) {
    why = "corrupt cache entry (bad header)";
    return "";
  }
  std::string payload(header.size, '\0');
  in.read(payload.data(), static_cast<std::streamsize>(payload.size()));
  if (!in || in.peek() != std::char_traits<char>::eof()) {
    why = "corrupt cache entry (wrong length)";
    return "";
  }
  if (XXH3_64bits(payload.data(), payload.size()) != header.checksum) {
    why = "corrupt cache entry (checksum)";
    return "";
  }
  return payload;
}

void write_cache_entry(const std::string& path, const char (&magic)[8], const std::string& payload) {
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  fs::path temporary = path;
  temporary += fmt::format(".tmp.{}", getpid());
  Header header{};
  std::memcpy(header.magic, magic, sizeof magic);
  header.size = payload.size();
  header.checksum = XXH3_64bits(payload.data(), payload.size());
  {
    std::ofstream out(temporary, std::ios::binary);
    out.write(reinterpret_cast<const char*>(&header), sizeof header);
    out.write(payload.data(), static_cast<std::streamsize>(payload.size()));
    if (!out.flush()) {
      fs::remove(temporary, ec);
      return;
    }
  }
  fs::rename(temporary, path, ec);
  if (ec) fs::remove(temporary, ec);
}

}  // namespace lazylab::cuda
