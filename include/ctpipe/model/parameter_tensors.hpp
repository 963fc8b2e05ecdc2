// A layer's parameters as named tensors. A layer's parameters() is one flat span; a layer may say
// how that span divides into tensors, each with a name and a shape, laid end to end in order:
//
//   static constexpr std::array parameter_tensors{ctpipe::parameter_tensor{"weight", {Out, In}},
//                                                 ctpipe::parameter_tensor{"bias", {Out}}};
//
// gradients() divides the same way. A layer that says nothing has one tensor, "parameters", of
// shape {parameters().size()}. Optimizers keep their state per tensor, and checkpoints name each
// tensor "layers.<index in the model>.<name>".
#pragma once

#include <algorithm>
#include <array>
#include <concepts>
#include <cstddef>
#include <initializer_list>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <ctpipe/model/layer.hpp>

namespace ctpipe {

/// One named tensor of a layer's parameters: its name (unique in the layer) and its shape, up to
/// four dimensions, outermost first.
struct parameter_tensor {
  std::string_view name;
  std::array<std::size_t, 4> shape{};
  std::size_t dims = 0;

  constexpr parameter_tensor() = default;
  constexpr parameter_tensor(std::string_view n, std::initializer_list<std::size_t> s) : name(n), dims(s.size()) {
    std::size_t i = 0;
    for (const std::size_t d : s)
      if (i < shape.size()) shape[i++] = d;
  }
  /// The number of values: the product of the shape.
  constexpr std::size_t size() const {
    std::size_t n = 1;
    for (std::size_t i = 0; i < dims && i < shape.size(); ++i) n *= shape[i];
    return n;
  }
};

namespace detail {
template <class A>
struct is_tensor_array : std::false_type {};
template <std::size_t N>
struct is_tensor_array<std::array<parameter_tensor, N>> : std::true_type {};
}  // namespace detail

/// A layer that names its parameter tensors: a `static constexpr std::array<parameter_tensor, N>
/// parameter_tensors`.
template <class L>
concept declares_parameter_tensors =
    has_parameters<L> && detail::is_tensor_array<std::remove_cvref_t<decltype(L::parameter_tensors)>>::value;

/// The rules a layer's parameter_tensors keep, one message each (the model checks them).
template <class L>
constexpr bool parameter_tensors_valid() {
  if constexpr (declares_parameter_tensors<L>) {
    constexpr auto& t = L::parameter_tensors;
    constexpr bool shapes = [] {
      for (const parameter_tensor& p : L::parameter_tensors)
        if (p.dims == 0 || p.dims > 4 || p.size() == 0) return false;
      return true;
    }();
    constexpr bool names = [] {
      for (std::size_t i = 0; i < L::parameter_tensors.size(); ++i) {
        const std::string_view n = L::parameter_tensors[i].name;
        if (n.empty() || n.find_first_of(". \"\\") != std::string_view::npos) return false;
        for (std::size_t j = 0; j < i; ++j)
          if (L::parameter_tensors[j].name == n) return false;
      }
      return true;
    }();
    static_assert(shapes, "ctpipe: a layer's parameter_tensors each need one to four dimensions, none of them 0");
    static_assert(names,
                  "ctpipe: a layer's parameter_tensors need names that are distinct, not empty, and without '.', "
                  "spaces, quotes or backslashes (a checkpoint names each tensor layers.<index>.<name>)");
    return t.size() > 0 && shapes && names;
  } else {
    return true;
  }
}

/// One tensor of one layer as it lies in the layer's flat span: its description and first index.
struct tensor_slice {
  parameter_tensor tensor;
  std::size_t offset = 0;
  std::size_t size() const { return tensor.size(); }
};

/// The tensors of layer `l` (the model's layer `index`, for the message), in order, with where
/// each starts in parameters(). Throws std::invalid_argument where the declared tensors do not
/// cover parameters() exactly, or where parameters() and gradients() differ in length.
template <class L>
std::vector<tensor_slice> tensor_slices(L& l, std::size_t index) {
  std::vector<tensor_slice> out;
  if constexpr (has_parameters<L>) {
    const std::size_t n = l.parameters().size();
    if (l.gradients().size() != n)
      throw std::invalid_argument("ctpipe: layer " + std::to_string(index) + " has " + std::to_string(n) +
                                  " parameters but " + std::to_string(l.gradients().size()) + " gradients");
    if constexpr (declares_parameter_tensors<L>) {
      std::size_t at = 0;
      for (const parameter_tensor& t : L::parameter_tensors) {
        out.push_back({t, at});
        at += t.size();
      }
      if (at != n)
        throw std::invalid_argument("ctpipe: layer " + std::to_string(index) + "'s parameter_tensors hold " +
                                    std::to_string(at) + " values, its parameters() " + std::to_string(n));
    } else {
      out.push_back({parameter_tensor{"parameters", {n}}, 0});
    }
  }
  return out;
}

}  // namespace ctpipe
