#include "core/version.h"

#include <fmt/format.h>

#include "build_info.h"
#include "lazylab/backend_abi.h"

#ifndef LAZYLAB_VERSION
#define LAZYLAB_VERSION "unknown"
#endif
#ifndef LAZYLAB_BUILD_TYPE
#define LAZYLAB_BUILD_TYPE "unknown"
#endif

namespace lazylab {

const VersionInfo& version_info() {
  static const VersionInfo kInfo{LAZYLAB_VERSION, LAZYLAB_GIT_REVISION, LAZYLAB_BUILD_TYPE,
                                 __VERSION__,     LAZYLAB_ABI_MAJOR,    LAZYLAB_ABI_MINOR};
  return kInfo;
}

std::string build_description() {
  const VersionInfo& info = version_info();
  return fmt::format("lazylab {} ({}), {} build, compiler {}", info.version, info.git_revision, info.build_type,
                     info.compiler);
}

}  // namespace lazylab
