// A reference residual join for the CPU: the sum of two tensors of one shape, y = a + b, whose
// backward hands dy to both. With ctpipe::node it closes a residual connection around other layers
// (ctpipe/model/graph.hpp).
#pragma once

#include <cstddef>
#include <tuple>

#include <ctpipe/layers/dense.hpp>  // matrix
#include <ctpipe/model/tensors.hpp>

namespace ctpipe::layers {

/// y = a + b for Rows x Cols matrices a and b (its input_type's two parts; with rows::tokens, over
/// the microbatch's extent).
template <std::size_t Rows, std::size_t Cols, rows R = rows::fixed>
struct add {
  using input_type = tensors<matrix<Rows, Cols, R>, matrix<Rows, Cols, R>>;
  using output_type = matrix<Rows, Cols, R>;
  static constexpr double cost = static_cast<double>(Rows * Cols);

  void forward(const input_type& x, output_type& y) const requires(R == rows::fixed) { sum(Rows, x, y); }
  void backward(const input_type&, const output_type&, const output_type& dy, input_type& dx) const
      requires(R == rows::fixed) {
    std::get<0>(dx) = dy;
    std::get<1>(dx) = dy;
  }
  void forward(const context& c, const input_type& x, output_type& y) const requires(R == rows::tokens) {
    sum(used_rows<R, Rows>(c), x, y);
  }
  void backward(const context& c, const input_type&, const output_type&, const output_type& dy, input_type& dx) const
      requires(R == rows::tokens) {
    const std::size_t n = used_rows<R, Rows>(c) * Cols;
    for (std::size_t i = 0; i < n; ++i) std::get<0>(dx).v[i] = std::get<1>(dx).v[i] = dy.v[i];
  }

 private:
  static void sum(std::size_t rows_used, const input_type& x, output_type& y) {
    const auto& [a, b] = x;
    for (std::size_t i = 0; i < rows_used * Cols; ++i) y.v[i] = a.v[i] + b.v[i];
  }
};

}  // namespace ctpipe::layers
