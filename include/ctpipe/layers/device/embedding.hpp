// ctpipe::layers::embedding on a device: token and learned position embeddings for Batch sequences
// laid out token-major. The forward a thread per element of the rows in use; the weight gradient a
// thread per column, adding the rows in row order to their token's and position's vectors (the host
// layer's order, so the same bits). A token id outside the vocabulary is found in a kernel: its
// row is NaN, and report() (which the CUDA executor calls once the step is done) throws
// std::out_of_range naming the rank, stage, microbatch, row and id. Parameters wte then wpe, laid
// out and named as the host layer's; a tied head shares wte.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>

#include <ctpipe/cuda/tensor.hpp>
#include <ctpipe/layers/device/fault.hpp>
#include <ctpipe/layers/device/memory.hpp>
#include <ctpipe/layers/embedding.hpp>  // the host layer: its initialisation and its message

namespace ctpipe::layers::device {

namespace detail {
struct embedding_forward {
  const std::int32_t* ids;
  const float* params;
  float* y;
  std::size_t width, batch, vocab, rows;
  const int* extent;
  CTPIPE_HOST_DEVICE void operator()(std::size_t i) const {
    const std::size_t r = i / width, k = i % width;
    if (r >= rows_in_use(extent, rows)) return;
    const std::int32_t id = ids[r];
    y[i] = id < 0 || static_cast<std::size_t>(id) >= vocab
               ? __builtin_nanf("")
               : params[static_cast<std::size_t>(id) * width + k] + params[(vocab + r / batch) * width + k];
  }
};
struct embedding_weight {
  const std::int32_t* ids;
  const float* dy;
  float* grads;
  std::size_t width, batch, vocab, rows;
  const int* extent;
  CTPIPE_HOST_DEVICE void operator()(std::size_t k) const {
    const std::size_t n = rows_in_use(extent, rows);
    for (std::size_t r = 0; r < n; ++r) {
      const std::int32_t id = ids[r];
      if (id < 0 || static_cast<std::size_t>(id) >= vocab) continue;  // (reported; its row was NaN)
      grads[static_cast<std::size_t>(id) * width + k] += dy[r * width + k];
      grads[(vocab + r / batch) * width + k] += dy[r * width + k];
    }
  }
};
}  // namespace detail

/// The token ids of a device embedding: Rows of them, token-major with rows::tokens.
template <std::size_t Rows, rows R = rows::fixed>
using token_ids = std::conditional_t<R == rows::tokens, ctpipe::cuda::token_tensor<std::int32_t, Rows>,
                                     ctpipe::cuda::tensor<std::int32_t, Rows>>;

/// y[t * Batch + b] = wte[id[t * Batch + b]] + wpe[t] on a device, as ctpipe::layers::embedding.
template <device_ops Ops, std::size_t Tokens, std::size_t Batch, std::size_t Vocab, std::size_t Width,
          rows R = rows::fixed>
struct embedding {
  using host_layer = ctpipe::layers::embedding<Tokens, Batch, Vocab, Width, R>;
  static constexpr std::size_t row_count = Tokens * Batch;
  using input_type = token_ids<row_count, R>;
  using output_type = matrix<row_count, Width, R>;
  static constexpr double cost = host_layer::cost;
  static constexpr auto parameter_tensors = host_layer::parameter_tensors;
  static constexpr std::size_t shared_parameter_count = Vocab * Width;

  array<Ops> params{(Vocab + Tokens) * Width}, grads{(Vocab + Tokens) * Width};

  std::span<float> parameters() { return params.span(); }
  std::span<float> gradients() { return grads.span(); }
  /// The token table: what a tied output head shares.
  std::span<float> shared_parameters() { return params.span().first(Vocab * Width); }
  std::span<float> shared_gradients() { return grads.span().first(Vocab * Width); }

  /// The host layer's initialisation (ctpipe::layers::embedding::init), uploaded.
  void init(std::uint64_t seed, float stddev = 0.02f) {
    const auto h = std::make_unique<host_layer>();  // (its arrays inline: not on the stack)
    h->init(seed, stddev);
    params.upload(h->params);
  }
  /// Moves the layer's memory to device d (ctpipe::layers::device::place).
  void place(int d) {
    params.place(d);
    grads.place(d);
    faults_.place(d);
  }

  void forward(const ctpipe::cuda::context& c, const input_type& x, output_type& y) const {
    check_extent(c);
    faults_.check(c, x.data, row_count, extent_of<R>(c), static_cast<int>(Vocab));
    Ops::for_each(
        c, row_count * Width,
        detail::embedding_forward{x.data, params.data(), y.data, Width, Batch, Vocab, row_count, extent_of<R>(c)});
  }
  void backward(const ctpipe::cuda::context& c, const input_type& x, const output_type& y, const output_type& dy,
                input_type& dx) {
    backward_weight(c, x, y, dy);
    backward_input(c, x, y, dy, dx);
  }
  /// Split backward, I: token ids have no gradient; nothing to do.
  void backward_input(const ctpipe::cuda::context&, const input_type&, const output_type&, const output_type&,
                      input_type&) const {}
  /// Split backward, W: each row's gradient added to its token's and its position's vector.
  void backward_weight(const ctpipe::cuda::context& c, const input_type& x, const output_type&, const output_type& dy) {
    Ops::for_each(
        c, Width,
        detail::embedding_weight{x.data, dy.data, grads.data(), Width, Batch, Vocab, row_count, extent_of<R>(c)});
  }
  /// Throws what a kernel found in the steps since the last call (a token id outside the
  /// vocabulary): std::out_of_range, the host layer's message after the rank and stage.
  void report() {
    fault f;
    if (!faults_.take(f)) return;
    try {
      ctpipe::layers::detail::bad_token(f.microbatch, static_cast<std::size_t>(f.row), f.value, Vocab);
    } catch (const std::out_of_range& e) {
      throw std::out_of_range(fault_record<Ops>::where(f) + e.what());
    }
  }

 private:
  // An extent that is not a whole number of tokens per sequence, refused where the host knows it
  // (an eager step; a graph step's extents are device data).
  static void check_extent(const ctpipe::cuda::context& c) {
    if (R == rows::tokens && c.host_extent > 0)
      (void)ctpipe::layers::detail::sequence_rows<R, row_count, Batch>(
          ctpipe::context{.microbatch = c.microbatch, .extent = c.host_extent}, "device::embedding");
  }
  mutable fault_record<Ops> faults_;
};

}  // namespace ctpipe::layers::device
