// Several tensors in one type: the input_type of a layer that takes more than one tensor, or the
// output_type of one that gives more than one. Each part is a tensor of its own: it may come from a
// different layer (a skip connection: ctpipe/model/graph.hpp) and go to several.
#pragma once

#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>

namespace ctpipe {

/// The parts T... of a layer's input or output, in order: a std::tuple (std::get<I>, structured
/// bindings) of host tensors or device views.
template <class... T>
struct tensors : std::tuple<T...> {
  static_assert(sizeof...(T) > 0, "ctpipe::tensors: give at least one tensor type");
  using std::tuple<T...>::tuple;
  constexpr tensors() = default;
};

namespace detail {
template <class T>
struct parts_of {
  using type = std::tuple<T>;
};
template <class... T>
struct parts_of<tensors<T...>> {
  using type = std::tuple<T...>;
};
}  // namespace detail

/// The parts of a tensor type, as a std::tuple: its own for a ctpipe::tensors, else the type alone.
template <class T>
using parts_t = typename detail::parts_of<T>::type;
/// How many tensors a tensor type holds (1 but for a ctpipe::tensors).
template <class T>
inline constexpr std::size_t parts_v = std::tuple_size_v<parts_t<T>>;
/// The type of part I of T.
template <class T, std::size_t I>
using part_t = std::tuple_element_t<I, parts_t<T>>;

/// True for a ctpipe::tensors.
template <class T>
inline constexpr bool is_tensors_v = false;
template <class... T>
inline constexpr bool is_tensors_v<tensors<T...>> = true;

/// Part I of t: std::get<I>(t) for a ctpipe::tensors, t itself (I = 0) for one tensor.
template <std::size_t I, class T>
constexpr auto& part(T& t) noexcept {
  if constexpr (is_tensors_v<std::remove_const_t<T>>) {
    return std::get<I>(t);
  } else {
    static_assert(I == 0, "ctpipe::part: a tensor that is not a ctpipe::tensors has one part, 0");
    return t;
  }
}

}  // namespace ctpipe

template <class... T>
struct std::tuple_size<ctpipe::tensors<T...>> : std::integral_constant<std::size_t, sizeof...(T)> {};
template <std::size_t I, class... T>
struct std::tuple_element<I, ctpipe::tensors<T...>> : std::tuple_element<I, std::tuple<T...>> {};
