// lazy_text: a reference to a callable that writes a message, called only where an error needs
// the message (a timeout, a refused transfer). A function that takes one is compiled once, however
// many callers pass it lambdas of their own: a template parameter per caller's lambda had compiled
// the whole waiting loop again for every message route of every table.
#pragma once

#include <string>
#include <type_traits>

namespace ctpipe::detail {

class lazy_text;
// A callable that makes the message (other than a lazy_text itself, which is copied as it is).
template <class F>
concept makes_text = !std::is_same_v<std::remove_cvref_t<F>, lazy_text> && std::is_invocable_r_v<std::string, const F&>;

class lazy_text {
 public:
  /// Refers to f, which must outlive the call it is passed to (a lambda written in the call does).
  /// Implicit, on purpose: callers pass lambdas.
  template <makes_text F>
  lazy_text(const F& f) noexcept
      : object_(&f), call_([](const void* o) { return std::string((*static_cast<const F*>(o))()); }) {}

  std::string operator()() const { return call_(object_); }

 private:
  const void* object_;
  std::string (*call_)(const void*);
};

}  // namespace ctpipe::detail
