// Errors travel as values through library code; the CLI turns them into
// messages and exit codes.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace lazylab {

struct Error {
  std::string message;
};

inline Error make_error(std::string message) { return Error{std::move(message)}; }

template <class T>
class [[nodiscard]] Expected {
 public:
  Expected(T value) : state_(std::move(value)) {}
  Expected(Error error) : state_(std::move(error)) {}

  bool ok() const { return state_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & { return std::get<0>(state_); }
  const T& value() const& { return std::get<0>(state_); }
  T&& value() && { return std::get<0>(std::move(state_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  const Error& error() const { return std::get<1>(state_); }

 private:
  std::variant<T, Error> state_;
};

// Success-or-error with no value.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error error) : error_(std::move(error)), failed_(true) {}
  static Status success() { return {}; }

  bool ok() const { return !failed_; }
  explicit operator bool() const { return ok(); }
  const Error& error() const { return error_; }

 private:
  Error error_;
  bool failed_ = false;
};

}  // namespace lazylab

// Early-return helpers keep call sites flat; they hide no control flow beyond
// "propagate the error".
#define LAZYLAB_TRY(status_expr)                                       \
  do {                                                                 \
    auto lazylab_try_status_ = (status_expr);                          \
    if (!lazylab_try_status_.ok()) return lazylab_try_status_.error(); \
  } while (0)
