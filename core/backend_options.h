// The options a backend plugin declares (ABI 3.11's lazylab_option_spec):
// the host checks a user's "name=value,..." once against them, with "did you
// mean", and gives create() every option spelled out, so a plugin never
// parses what a user typed and two spellings of one configuration are one
// cache identity.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "expected.h"
#include "lazylab/backend_abi.h"

namespace lazylab {

// What the plugin declares; empty for one that declares none or was built
// before 3.11.
std::span<const lazylab_option_spec> declared_options(const lazylab_backend_api& api);

// An error naming the plugin's first malformed declaration (a NULL string,
// an unknown kind, a default that is not a value of its kind).
Status check_declared_options(const lazylab_backend_api& api);

// `text` checked against the declarations and spelled out: every declared
// option in declaration order, given or default. A plugin that declares none
// gets `text` as written.
Expected<std::string> canonical_options(const lazylab_backend_api& api, const std::string& text);

// One line an option, for `lazylab backends`: "name=default  kind  summary".
std::vector<std::string> describe_options(const lazylab_backend_api& api);

}  // namespace lazylab
