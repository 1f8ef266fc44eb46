// What this liblazylab is: its version, the ABI versions it speaks and how it
// was built. Programs and reports quote it so a result names what made it.
#pragma once

#include <cstdint>
#include <string>

namespace lazylab {

struct VersionInfo {
  std::string version;       // the project version, e.g. "0.2.0"
  std::string git_revision;  // `git describe` of the source tree, or "no-git"
  std::string build_type;    // meson's buildtype
  std::string compiler;
  uint32_t backend_abi_major = 0;  // the backend plugin ABI this library loads
  uint32_t backend_abi_minor = 0;
};

const VersionInfo& version_info();

// One line: "lazylab 0.2.0 (v0.1-42-gabc), release build, compiler 12.2.0".
std::string build_description();

}  // namespace lazylab
