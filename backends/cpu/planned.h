// What a plan builder makes of a kernel, as XLA's FusionDecision carries
// its reason: a plan; or, for a kernel of the kind the builder covers, why
// it declines it; or nothing, for a kernel of another kind. The backend
// tries its builders in turn, and the reasons of those that declined say
// why a kernel runs on the reference kernels: in `strict`'s error and in
// the executable's notes, which reports show.
#pragma once

#include <memory>
#include <string>
#include <utility>

namespace lazylab::cpu {

// A builder declining a kernel of its kind, and why.
struct Decline {
  std::string reason;
};

inline Decline decline(std::string reason) { return {std::move(reason)}; }

template <class Plan>
class Planned {
 public:
  Planned(std::nullptr_t = nullptr) {}  // a kernel of another kind
  Planned(Decline declined) : reason_(std::move(declined.reason)) {}
  template <class P>
  Planned(std::unique_ptr<P> plan) : plan_(std::move(plan)) {}
  template <class P>
  Planned(Planned<P>&& other) : plan_(other.take()), reason_(other.reason()) {}

  explicit operator bool() const { return plan_ != nullptr; }
  Plan* operator->() const { return plan_.get(); }
  std::unique_ptr<Plan> take() { return std::move(plan_); }
  // Why the builder declined; empty when it made a plan or the kernel is
  // not of its kind.
  const std::string& reason() const { return reason_; }

 private:
  std::unique_ptr<Plan> plan_;
  std::string reason_;
};

}  // namespace lazylab::cpu
