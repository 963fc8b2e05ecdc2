// The test MLP of tests/support/mlp.hpp as device layers of the stream simulator: each layer enqueues
// the reference dense layer's own code on its stream, so a pipeline through the CUDA executor must
// give the sequential reference's bits.
#pragma once
#include "mlp.hpp"
#include "stream_sim.hpp"

#include <ctpipe/cuda/executor.hpp>
#include <ctpipe/cuda/tensor.hpp>

#include <array>
#include <cstring>
#include <span>
#include <vector>

namespace test::device {

// A host layer of tests/support/mlp.hpp or ctpipe/layers as a device layer of the simulator: its
// forward and backward enqueue the host layer's own code on host copies of the device tensors.
template <class HostLayer, class In, class Out>
struct sim_layer {
  using host_layer = HostLayer;
  using input_type = In;
  using output_type = Out;
  static constexpr double cost = host_layer::cost;

  host_layer host{};  // its parameters and gradients, if any, are the simulated device's memory

  void forward(const ctpipe::cuda::context& c, const input_type& x, output_type& y) {
    sim::launch(c, {x.data, y.data}, [this, x, y] {
      typename host_layer::input_type xm;
      typename host_layer::output_type ym;
      std::memcpy(xm.v.data(), x.data, input_type::bytes);
      host.forward(xm, ym);
      std::memcpy(y.data, ym.v.data(), output_type::bytes);
    });
  }
  void backward(const ctpipe::cuda::context& c, const input_type& x, const output_type& y, const output_type& dy,
                input_type& dx) {
    launch_backward(c, x, y, dy, &dx, [](host_layer& h, const auto& xm, const auto& ym, const auto& dym, auto& dxm) {
      h.backward(xm, ym, dym, dxm);
    });
  }

 protected:
  // Enqueues f(host, x, y, dy, dx) on host copies of the device tensors; dx, where given, receives
  // what f wrote. The backward, and the split layer's I and W, share it.
  template <class F>
  void launch_backward(const ctpipe::cuda::context& c, const input_type& x, const output_type& y, const output_type& dy,
                       input_type* dx, F f) {
    sim::launch(c, {x.data, y.data, dy.data, dx ? dx->data : nullptr},
                [this, x, y, dy, dx = dx ? *dx : input_type{}, f] {
                  typename host_layer::input_type xm, dxm;
                  typename host_layer::output_type ym, dym;
                  std::memcpy(xm.v.data(), x.data, input_type::bytes);
                  std::memcpy(ym.v.data(), y.data, output_type::bytes);
                  std::memcpy(dym.v.data(), dy.data, output_type::bytes);
                  f(host, xm, ym, dym, dxm);
                  if (dx.data) std::memcpy(dx.data, dxm.v.data(), input_type::bytes);
                });
  }
};

// The reference dense layer on the simulator, with its parameters.
template <std::size_t Batch, std::size_t In, std::size_t Out, activation Act = activation::relu>
struct sim_dense : sim_layer<dense<Batch, In, Out, Act>, ctpipe::cuda::tensor<float, Batch, In>,
                             ctpipe::cuda::tensor<float, Batch, Out>> {
  std::span<float> parameters() { return this->host.params; }
  std::span<float> gradients() { return this->host.grads; }
};

// As sim_dense, with its backward split (I and W) as the reference dense layer splits it.
template <std::size_t Batch, std::size_t In, std::size_t Out, activation Act = activation::relu>
struct sim_split_dense : sim_dense<Batch, In, Out, Act> {
  using base = sim_dense<Batch, In, Out, Act>;
  using typename base::host_layer;
  using typename base::input_type;
  using typename base::output_type;
  void backward_input(const ctpipe::cuda::context& c, const input_type& x, const output_type& y, const output_type& dy,
                      input_type& dx) {
    this->launch_backward(c, x, y, dy, &dx,
                          [](host_layer& h, const auto& xm, const auto& ym, const auto& dym, auto& dxm) {
                            h.backward_input(xm, ym, dym, dxm);
                          });
  }
  void backward_weight(const ctpipe::cuda::context& c, const input_type& x, const output_type& y,
                       const output_type& dy) {
    this->launch_backward(
        c, x, y, dy, nullptr,
        [](host_layer& h, const auto& xm, const auto& ym, const auto& dym, auto&) { h.backward_weight(xm, ym, dym); });
  }
};
static_assert(ctpipe::cuda::device_splittable_layer<sim_split_dense<2, 3, 4>>);
static_assert(!ctpipe::cuda::device_splittable_layer<sim_dense<2, 3, 4>>);

// layers::relu as a device layer of the simulator: no parameters, so the executors store, sum and
// update nothing for it.
template <std::size_t Batch, std::size_t Cols>
struct sim_relu : sim_layer<ctpipe::layers::relu<Batch, Cols>, ctpipe::cuda::tensor<float, Batch, Cols>,
                            ctpipe::cuda::tensor<float, Batch, Cols>> {};
static_assert(!ctpipe::has_parameters<sim_relu<2, 3>>);

struct sim_loss {
  using host_loss = ctpipe::layers::softmax_cross_entropy<batch, classes>;
  using target_type = ctpipe::cuda::tensor<int, batch>;
  using logits = ctpipe::cuda::tensor<float, batch, classes>;
  void operator()(const ctpipe::cuda::context& c, const logits& y, const target_type& t, logits& dy,
                  double* loss) const {
    sim::launch(c, {y.data, t.data, dy.data, loss}, [y, t, dy, loss] {
      ctpipe::layers::matrix<batch, classes> ym, dym;
      host_loss::target_type tm{};
      std::memcpy(ym.v.data(), y.data, logits::bytes);
      std::memcpy(tm.data(), t.data, target_type::bytes);
      *loss = host_loss{}(ym, tm, dym);
      std::memcpy(dy.data, dym.v.data(), logits::bytes);
    });
  }
};

using mlp = ctpipe::model<sim_dense<batch, features, hidden>, sim_dense<batch, hidden, hidden>,
                          sim_dense<batch, hidden, hidden>, sim_dense<batch, hidden, hidden>,
                          sim_dense<batch, hidden, hidden>, sim_dense<batch, hidden, hidden>,
                          sim_dense<batch, hidden, hidden>, sim_dense<batch, hidden, classes, activation::none>>;
static_assert(ctpipe::cuda::is_device_model_v<mlp>);
// Device layers join the model through the model layer's hook (ctpipe/cuda/layer.hpp).
static_assert(ctpipe::device_layer_traits<mlp::layer_type<0>>::claimed &&
              ctpipe::device_layer_traits<mlp::layer_type<0>>::valid);
static_assert(ctpipe::has_device_layer_v<mlp>);
static_assert(mlp::costs == test::mlp::costs, "the same declared costs: the same stage split");

// The MLP again, most layers splitting their backward (I and W) and two not (layers 2 and 5: their
// I runs the whole backward, their W nothing), for the schedules with split backward.
using split_mlp =
    ctpipe::model<sim_split_dense<batch, features, hidden>, sim_split_dense<batch, hidden, hidden>,
                  sim_dense<batch, hidden, hidden>, sim_split_dense<batch, hidden, hidden>,
                  sim_split_dense<batch, hidden, hidden>, sim_dense<batch, hidden, hidden>,
                  sim_split_dense<batch, hidden, hidden>, sim_split_dense<batch, hidden, classes, activation::none>>;
static_assert(split_mlp::costs == test::mlp::costs);

// test::relu_mlp on the simulated device: a layer without parameters (layer 3).
using relu_mlp =
    ctpipe::model<sim_dense<batch, features, hidden>, sim_dense<batch, hidden, hidden>,
                  sim_dense<batch, hidden, hidden, activation::none>, sim_relu<batch, hidden>,
                  sim_dense<batch, hidden, hidden>, sim_dense<batch, hidden, hidden>, sim_dense<batch, hidden, hidden>,
                  sim_dense<batch, hidden, hidden>, sim_dense<batch, hidden, classes, activation::none>>;

/// The host model a device model's layers compute (each layer's host_layer): its sequential reference.
template <class M, class = std::make_index_sequence<M::size>>
struct host_model;
template <class M, std::size_t... K>
struct host_model<M, std::index_sequence<K...>> {
  using type = ctpipe::model<typename M::template layer_type<K>::host_layer...>;
};
template <class M>
using host_model_t = typename host_model<M>::type;
static_assert(std::is_same_v<host_model_t<mlp>, test::mlp> && std::is_same_v<host_model_t<split_mlp>, test::mlp> &&
              std::is_same_v<host_model_t<relu_mlp>, test::relu_mlp>);

/// The same start as test::make_mlp.
template <class Model = mlp>
Model make_mlp(std::uint64_t seed = 1) {
  Model m;
  std::uint64_t k = seed;
  ctpipe::for_each_layer(m, [&](auto& l) {
    if constexpr (requires { l.host.init(k); }) l.host.init(k++);
  });
  return m;
}

/// The data set of test::make_data in simulated device memory: inputs on `input_device` (the
/// first stage's), targets on `target_device` (the last stage's, where the loss runs).
struct device_data {
  sim::buffer x, t;
  std::vector<mlp::input_type> inputs;
  std::vector<sim_loss::target_type> targets;
  device_data(const data_set& d, int input_device = 0, int target_device = 0)
      : x(d.inputs.size() * mlp::input_type::bytes, input_device),
        t(d.targets.size() * sim_loss::target_type::bytes, target_device) {
    for (std::size_t i = 0; i < d.inputs.size(); ++i) {
      float* xi = x.as<float>() + i * mlp::input_type::size;
      int* ti = t.as<int>() + i * sim_loss::target_type::size;
      std::memcpy(xi, d.inputs[i].v.data(), mlp::input_type::bytes);
      std::memcpy(ti, d.targets[i].data(), sim_loss::target_type::bytes);
      inputs.push_back({xi});
      targets.push_back({ti});
    }
  }
};

template <auto Table, auto Placement = 0, ctpipe::dispatch D = ctpipe::dispatch::automatic, class Model = mlp>
using sim_executor = ctpipe::cuda::basic_executor<Table, Model, ctpipe::partition<Model, Table.stages()>(), sim_loss,
                                                  Placement, D, sim::backend>;

}  // namespace test::device
