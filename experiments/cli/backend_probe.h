// A backend plugin loaded and created in a child process (this binary,
// `backends --probe FILE`), so that one that crashes or hangs while it is
// loaded or created is reported instead of ending lazylab: `lazylab
// backends` lists every plugin this way, and `lazylab run` so meets every
// plugin it does not ship before running its cells in children too.
#pragma once

#include <string>

#include "runner/runner.h"

namespace lazylab::cli {

// The child's half: loads `path`, creates it with `options`, measures its
// device ceilings when asked, and prints what it found as one JSON object.
int probe_in_this_process(const std::string& path, const std::string& options, bool ceilings);

// Starts the child and reads what it printed; a child that dies or hangs
// leaves BackendProbe::crash saying how.
BackendProbe probe_in_child(const std::string& path, const std::string& options, bool ceilings);

}  // namespace lazylab::cli
