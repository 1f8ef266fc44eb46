// grad: the joint forward-backward graph of a scalar root with respect to
// parameters (core/autodiff.h): the graph's roots, then one gradient per
// parameter of `wrt` in order. Composites are differentiated through their
// decomposition, so `decompose` comes first: `decompose,grad{wrt=1:2}`.
#include <fmt/format.h>

#include <charconv>

#include "core/autodiff.h"
#include "core/pass.h"

namespace lazylab {
namespace {

// "1:3" as ordinals (a pipeline's options are split at commas); empty for
// every float parameter.
Expected<std::vector<int64_t>> parse_ordinals(const std::string& text) {
  std::vector<int64_t> ordinals;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find(':', start);
    if (end == std::string::npos) end = text.size();
    std::string item = text.substr(start, end - start);
    int64_t ordinal = -1;
    auto [rest, error] = std::from_chars(item.data(), item.data() + item.size(), ordinal);
    if (item.empty() || error != std::errc() || rest != item.data() + item.size() || ordinal < 0)
      return make_error(fmt::format("grad: wrt '{}': '{}' is not a parameter ordinal", text, item));
    ordinals.push_back(ordinal);
    start = end + 1;
  }
  return ordinals;
}

class Grad : public Pass {
 public:
  Grad(size_t of, std::string wrt) : of_(of), wrt_(std::move(wrt)) {}

  Expected<bool> run(Module& module) override {
    auto ordinals = parse_ordinals(wrt_);
    if (!ordinals) return ordinals.error();
    auto joint = differentiate(module.graph, GradRequest{of_, std::move(*ordinals)});
    if (!joint) return joint.error();
    replace_graph(module, std::move(*joint));
    return true;
  }

 private:
  size_t of_;
  std::string wrt_;
};

LAZYLAB_REGISTER_PASS(PassInfo{"grad",
                               "Append the gradients of a scalar root with respect to parameters (reverse mode)",
                               {{"of", OptionKind::Int, "0", "the root to differentiate, a float scalar", {}, {}, 0},
                                {"wrt",
                                 OptionKind::String,
                                 "",
                                 "parameter ordinals, colon-separated: 1:3 (empty: every float parameter)",
                                 {},
                                 {}}},
                               [](const PassOptions& options) -> std::unique_ptr<Pass> {
                                 return std::make_unique<Grad>(static_cast<size_t>(options.get_int("of")),
                                                               options.get("wrt"));
                               }});

}  // namespace
}  // namespace lazylab
