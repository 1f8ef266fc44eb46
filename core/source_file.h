// Reading a file a user names (.lzir, experiment YAML): a folder, a missing
// or unreadable file is an error naming the path, never an empty text.
#pragma once

#include <string>
#include <string_view>

#include "expected.h"

namespace lazylab {

// `what` names the file's role in errors: "PATH: cannot open WHAT".
Expected<std::string> read_source_file(const std::string& path, std::string_view what);

}  // namespace lazylab
