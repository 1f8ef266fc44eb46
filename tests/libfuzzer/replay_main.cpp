// Replays a libFuzzer corpus without libFuzzer: every file named, or every
// file in every folder named, goes once through LLVMFuzzerTestOneInput. This
// is how the normal and sanitizer builds (GCC) keep the corpus passing.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

bool replay(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return false;
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  long count = 0;
  for (int i = 1; i < argc; ++i) {
    fs::path arg = argv[i];
    std::vector<fs::path> files;
    if (fs::is_directory(arg)) {
      for (const auto& entry : fs::recursive_directory_iterator(arg))
        if (entry.is_regular_file()) files.push_back(entry.path());
    } else {
      files.push_back(arg);
    }
    if (files.empty()) {
      std::fprintf(stderr, "replay: %s: no inputs\n", argv[i]);
      return 2;
    }
    for (const fs::path& file : files) {
      if (!replay(file)) {
        std::fprintf(stderr, "replay: %s: cannot read\n", file.c_str());
        return 2;
      }
      ++count;
    }
  }
  std::printf("replayed %ld inputs\n", count);
  return count > 0 ? 0 : 2;
}
