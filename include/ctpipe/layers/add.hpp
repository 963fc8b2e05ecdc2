// A reference residual join for the CPU: the sum of two tensors of one shape, y = a + b, whose
// backward hands dy to both. With ctpipe::node it closes a residual connection around other layers
// (ctpipe/model/graph.hpp).
#pragma once

#include <cstddef>
#include <tuple>

#include <ctpipe/layers/dense.hpp>  // matrix
#include <ctpipe/model/tensors.hpp>

namespace ctpipe::layers {

/// y = a + b for Rows x Cols matrices a and b (its input_type's two parts).
template <std::size_t Rows, std::size_t Cols>
struct add {
  using input_type = tensors<matrix<Rows, Cols>, matrix<Rows, Cols>>;
  using output_type = matrix<Rows, Cols>;
  static constexpr double cost = static_cast<double>(Rows * Cols);

  void forward(const input_type& x, output_type& y) const {
    const auto& [a, b] = x;
    for (std::size_t i = 0; i < Rows * Cols; ++i) y.v[i] = a.v[i] + b.v[i];
  }
  void backward(const input_type&, const output_type&, const output_type& dy, input_type& dx) const {
    std::get<0>(dx) = dy;
    std::get<1>(dx) = dy;
  }
};

}  // namespace ctpipe::layers
