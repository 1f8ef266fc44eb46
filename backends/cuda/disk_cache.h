// One entry of the cuda backend's disk cache (compiled kernels, cuBLASLt
// choices): a header with a magic, the payload's size and its checksum,
// then the payload. Written atomically (a temporary file, then rename), so a
// reader sees the old entry or the new one; one that is corrupt, truncated
// or of another kind reads as absent, with the reason, and is never trusted.
#pragma once

#include <string>

namespace lazylab::cuda {

// The payload, or empty with `why` set ("not cached", "corrupt cache entry
// (checksum)", ...). `magic`: 8 characters naming the kind of entry.
std::string read_cache_entry(const std::string& path, const char (&magic)[8], std::string& why);

// Creates the folder as needed; an unwritable cache is not an error (the
// next process computes the entry again).
void write_cache_entry(const std::string& path, const char (&magic)[8], const std::string& payload);

}  // namespace lazylab::cuda
