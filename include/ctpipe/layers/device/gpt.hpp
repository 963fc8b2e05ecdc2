// ctpipe::layers::gpt on a device: the same model (GPT-2's pre-norm blocks, a head tied to the
// token embedding), of the device layers over Ops (ctpipe/cuda/ops.hpp), with the device
// cross-entropy as its loss. Its layers, names and initialisation are the host GPT's (one
// description: ctpipe::layers::detail::gpt_of), so a device GPT and a host GPT of one shape start
// from the same parameters and checkpoints of either load into the other.
//
//   using net = ctpipe::layers::device::gpt<ctpipe::cuda::gpu_ops, {.vocab = 96, .tokens = 64, .batch = 4,
//                                                                  .width = 128, .heads = 4, .blocks = 4}>;
//   net::model model;            // parameters on the current device
//   net::init(model, seed);      // the host GPT's initial values
//
// ctpipe::layers::device::gpt<Ops, G, precision::bf16> computes its products in bf16.
#pragma once

#include <cstddef>

#include <ctpipe/layers/device/add.hpp>
#include <ctpipe/layers/device/attention.hpp>
#include <ctpipe/layers/device/cross_entropy.hpp>
#include <ctpipe/layers/device/dropout.hpp>
#include <ctpipe/layers/device/embedding.hpp>
#include <ctpipe/layers/device/gelu.hpp>
#include <ctpipe/layers/device/layer_norm.hpp>
#include <ctpipe/layers/device/linear.hpp>
#include <ctpipe/layers/gpt.hpp>

namespace ctpipe::layers::device {

namespace detail {
/// The device layers over Ops, their products of precision P, for ctpipe::layers::detail::gpt_of.
template <device_ops Ops, precision P>
struct layers_of {
  template <std::size_t T, std::size_t B, std::size_t V, std::size_t W, rows R>
  using embedding = device::embedding<Ops, T, B, V, W, R>;
  template <std::size_t Rows, std::size_t Cols, unsigned PerMille, rows R>
  using dropout = device::dropout<Ops, Rows, Cols, PerMille, R>;
  template <std::size_t Rows, std::size_t Cols, rows R>
  using layer_norm = device::layer_norm<Ops, Rows, Cols, R>;
  template <std::size_t Rows, std::size_t In, std::size_t Out, bias B, rows R>
  using linear = device::linear<Ops, Rows, In, Out, B, R, P>;
  template <std::size_t T, std::size_t B, std::size_t W, std::size_t H, rows R>
  using causal_attention_qkv = device::causal_attention_qkv<Ops, T, B, W, H, R, P>;
  template <std::size_t Rows, std::size_t Cols, rows R>
  using add = device::add<Ops, Rows, Cols, R>;
  template <std::size_t Rows, std::size_t Cols, rows R>
  using gelu = device::gelu<Ops, Rows, Cols, R>;
  template <std::size_t Rows, std::size_t Classes, rows R>
  using softmax_cross_entropy = device::softmax_cross_entropy<Ops, Rows, Classes, R>;
  /// The head's copy of the embedding's table, made equal to it (device to device; an executor
  /// does it again at construction, wherever the two are), and its compute copy rewritten.
  template <class M>
  static void tie(M& m) {
    const auto from = m.template layer<0>().shared_parameters();
    auto& head = m.template layer<M::size - 1>();
    Ops::copy(head.shared_parameters().data(), from.data(), from.size_bytes());
    head.write_compute_copy();
  }
};
}  // namespace detail

/// A GPT of shape G on a device: model, loss, init(model, seed), layer_name(k), set_dropout, as
/// ctpipe::layers::gpt<G>'s, its layers and loss the device twins. P: what its products read
/// (precision::bf16: its linear layers' weights a bf16 copy of their float parameters, and every
/// product's operands rounded to bf16; all else float, as in PyTorch's bf16 autocast).
template <device_ops Ops, gpt_shape G, precision P = precision::f32>
struct gpt : ctpipe::layers::detail::gpt_of<detail::layers_of<Ops, P>, G> {
  using host = ctpipe::layers::gpt<G>;
  using model = typename ctpipe::layers::detail::gpt_of<detail::layers_of<Ops, P>, G>::model;

  /// Every layer's parameters from the host GPT of the same shape (`h`), device by device (and
  /// the compute copies rewritten).
  static void load(model& m, typename host::model& h) {
    each(m, h, [](auto& device, auto& on_host) {
      const auto from = on_host.parameters();
      Ops::upload(device.parameters().data(), from.data(), from.size_bytes());
      if constexpr (requires { device.write_compute_copy(); }) device.write_compute_copy();
    });
  }
  /// And into it.
  static void store(model& m, typename host::model& h) {
    each(m, h, [](auto& device, auto& on_host) {
      const auto to = on_host.parameters();
      Ops::download(to.data(), device.parameters().data(), to.size_bytes());
    });
  }

 private:
  template <class F>
  static void each(model& m, typename host::model& h, F f) {
    [&]<std::size_t... K>(std::index_sequence<K...>) {
      (
          [&] {
            auto& d = m.template layer<K>();
            if constexpr (requires { d.parameters(); }) f(d, h.template layer<K>());
          }(),
          ...);
    }
    (std::make_index_sequence<model::size>{});
  }
};

}  // namespace ctpipe::layers::device
