// lazy_text: a reference to a callable that writes a message, called only where an error needs
// the message (a timeout, a refused transfer). A function that takes one is compiled once, however
// many callers pass it lambdas of their own: a template parameter per caller's lambda had compiled
// the whole waiting loop again for every message route of every table.
#pragma once

#include <string>
#include <type_traits>

namespace ctpipe::detail {

class lazy_text {
 public:
  /// Refers to f, which must outlive the call it is passed to (a lambda written in the call does).
  template <class F>
  requires(!std::is_same_v<std::remove_cvref_t<F>, lazy_text> && std::is_invocable_r_v<std::string, const F&>)
      lazy_text(const F& f)
  noexcept  // NOLINT(google-explicit-constructor): callers pass lambdas
      : object_(&f), call_([](const void* o) { return std::string((*static_cast<const F*>(o))()); }) {}

  std::string operator()() const { return call_(object_); }

 private:
  const void* object_;
  std::string (*call_)(const void*);
};

}  // namespace ctpipe::detail
