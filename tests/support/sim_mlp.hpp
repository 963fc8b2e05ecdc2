// The test MLPs of tests/support/mlp.hpp as device layers of the stream simulator: each layer
// enqueues the reference layer's own code on its stream, so a pipeline through the CUDA executor
// must give the sequential reference's bits.
#pragma once
#include "mlp.hpp"
#include "stream_sim.hpp"

#include <ctpipe/cuda/executor.hpp>
#include <ctpipe/cuda/tensor.hpp>
#include <ctpipe/model/detail/call.hpp>

#include <array>
#include <cstddef>
#include <cstring>
#include <deque>
#include <span>
#include <type_traits>
#include <vector>

namespace test::device {

// The host context a kernel of the simulator makes from its device context: the step and the
// microbatch's extent read from device memory there, as a kernel would.
inline ctpipe::context host_context(const ctpipe::cuda::context& c) {
  return {c.rank, c.stage, c.layer, c.microbatch, c.op, *c.step, c.extent ? *c.extent : 0, c.training};
}

// A host matrix's device twin: a token_tensor where its rows are tokens (ctpipe/model/extent.hpp).
template <class M>
using device_matrix = std::conditional_t<ctpipe::token_major<M>, ctpipe::cuda::token_tensor<float, M::rows, M::cols>,
                                         ctpipe::cuda::tensor<float, M::rows, M::cols>>;

// A host layer's saved state on the simulated device: its bytes, in a device tensor.
template <class H>
struct sim_saved_of {
  using type = ctpipe::no_saved_state;
};
template <ctpipe::has_saved_state H>
struct sim_saved_of<H> {
  static_assert(std::is_trivially_copyable_v<ctpipe::saved_t<H>>);
  using type = ctpipe::cuda::tensor<std::byte, sizeof(ctpipe::saved_t<H>)>;
};
template <class H>
struct sim_saved {};
template <ctpipe::has_saved_state H>
struct sim_saved<H> {
  using saved_type = typename sim_saved_of<H>::type;
};
// The host layer's named parameter tensors, where it names them: a checkpoint of the device model
// then holds the host model's tensors.
template <class H>
struct sim_tensors {};
template <ctpipe::declares_parameter_tensors H>
struct sim_tensors<H> {
  static constexpr auto parameter_tensors = H::parameter_tensors;
};

// A host layer of tests/support/mlp.hpp or ctpipe/layers as a device layer of the simulator: each
// call enqueues the host layer's own call on host copies of the device tensors (its saved state
// too, where it has one), with a host context made from the device context when the kernel runs
// (the step read from device memory there, as a kernel would). Its parameters and gradients, if
// any, are the simulated device's memory. sim_split_layer splits its backward as the host layer does
// (a layer that does not split must not name backward_input at all: that would be a near miss).
template <class HostLayer, class In, class Out>
struct sim_layer : sim_saved<HostLayer>, sim_tensors<HostLayer> {
  using host_layer = HostLayer;
  using input_type = In;
  using output_type = Out;
  using device_saved = typename sim_saved_of<host_layer>::type;
  static constexpr double cost = host_layer::cost;
  static constexpr bool saves = ctpipe::has_saved_state<host_layer>;

  host_layer host{};

  std::span<float> parameters() requires ctpipe::has_parameters<host_layer> { return host.parameters(); }
  std::span<float> gradients() requires ctpipe::has_parameters<host_layer> { return host.gradients(); }
  // The bf16 copy a mixed-precision host layer computes with (ctpipe/model/compute_copy.hpp).
  auto compute_parameters() requires ctpipe::has_compute_copy<host_layer> { return host.compute_parameters(); }
  // What the host layer shares as a member of a group (ctpipe::shared_with), where it says.
  std::span<float> shared_parameters() requires ctpipe::declares_shared_parameters<host_layer> {
    return host.shared_parameters();
  }
  std::span<float> shared_gradients() requires ctpipe::declares_shared_parameters<host_layer> {
    return host.shared_gradients();
  }

  void forward(const ctpipe::cuda::context& c, const input_type& x, output_type& y) requires(!saves) {
    forward_on(c, x, y, device_saved{});
  }
  void forward(const ctpipe::cuda::context& c, const input_type& x, output_type& y, device_saved& s) requires saves {
    forward_on(c, x, y, s);
  }
  void backward(const ctpipe::cuda::context& c, const input_type& x, const output_type& y, const output_type& dy,
                input_type& dx) requires(!saves) {
    backward_on<false>(c, x, y, device_saved{}, dy, dx);
  }
  void backward(const ctpipe::cuda::context& c, const input_type& x, const output_type& y, const device_saved& s,
                const output_type& dy, input_type& dx) requires saves {
    backward_on<false>(c, x, y, s, dy, dx);
  }

 protected:
  struct host_tensors {
    typename host_layer::input_type x{}, dx{};
    typename host_layer::output_type y{}, dy{};
    ctpipe::saved_t<host_layer> s{};
  };
  static const void* data_of(const device_saved& s) {
    if constexpr (saves)
      return s.data;
    else
      return nullptr;
  }
  // Enqueues f(host layer, context maker, host copies) on the context's stream: x, y (unless Out),
  // the saved state and dy (where given) copied in; y (Out), the saved state (WriteS) and dx (where
  // given) copied back.
  template <bool OutY, bool WriteS, class F>
  void enqueue(const ctpipe::cuda::context& c, const input_type& x, const output_type& y, const device_saved& s,
               const output_type* dy, input_type* dx, F f) {
    sim::launch(c, {x.data, y.data, data_of(s), dy ? dy->data : nullptr, dx ? dx->data : nullptr, c.step, c.extent},
                [this, c, x, y, s, dy = dy ? *dy : output_type{}, dx = dx ? *dx : input_type{}, f] {
                  static_cast<void>(s);  // (a layer without saved state has none to copy)
                  if (c.host_extent != 0 && c.host_extent != *c.extent)
                    sim::world::get().wrong_device_work.push_back("the context's host_extent is not its extent");
                  host_tensors h;
                  std::memcpy(h.x.v.data(), x.data, input_type::bytes);
                  if constexpr (!OutY) std::memcpy(h.y.v.data(), y.data, output_type::bytes);
                  if constexpr (saves) std::memcpy(&h.s, s.data, sizeof h.s);
                  if (dy.data) std::memcpy(h.dy.v.data(), dy.data, output_type::bytes);
                  const ctpipe::context hc = host_context(c);
                  f(
                      host, [&hc] { return hc; }, h);
                  if constexpr (OutY) std::memcpy(y.data, h.y.v.data(), output_type::bytes);
                  if constexpr (saves && WriteS) std::memcpy(s.data, &h.s, sizeof h.s);
                  if (dx.data) std::memcpy(dx.data, h.dx.v.data(), input_type::bytes);
                });
  }
  void forward_on(const ctpipe::cuda::context& c, const input_type& x, const output_type& y, const device_saved& s) {
    enqueue<true, true>(c, x, y, s, nullptr, nullptr, [](host_layer& l, const auto& ctx, host_tensors& h) {
      ctpipe::detail::call_forward(l, ctx, h.x, h.y, h.s);
    });
  }
  template <bool Input>
  void backward_on(const ctpipe::cuda::context& c, const input_type& x, const output_type& y, const device_saved& s,
                   const output_type& dy, input_type& dx) {
    enqueue<false, Input>(c, x, y, s, &dy, &dx, [](host_layer& l, const auto& ctx, host_tensors& h) {
      ctpipe::detail::call_backward<Input>(l, ctx, h.x, h.y, h.s, h.dy, h.dx);
    });
  }
  void weight_on(const ctpipe::cuda::context& c, const input_type& x, const output_type& y, const device_saved& s,
                 const output_type& dy) {
    enqueue<false, false>(c, x, y, s, &dy, nullptr, [](host_layer& l, const auto& ctx, host_tensors& h) {
      ctpipe::detail::call_backward_weight(l, ctx, h.x, h.y, h.s, h.dy);
    });
  }
};

template <class HostLayer, class In, class Out>
struct sim_split_layer : sim_layer<HostLayer, In, Out> {
  using base = sim_layer<HostLayer, In, Out>;
  using typename base::device_saved;
  using typename base::input_type;
  using typename base::output_type;
  static_assert(ctpipe::splittable_layer<HostLayer>);

  void backward_input(const ctpipe::cuda::context& c, const input_type& x, const output_type& y, const output_type& dy,
                      input_type& dx) requires(!base::saves) {
    this->template backward_on<true>(c, x, y, device_saved{}, dy, dx);
  }
  void backward_input(const ctpipe::cuda::context& c, const input_type& x, const output_type& y, device_saved& s,
                      const output_type& dy, input_type& dx) requires base::saves {
    this->template backward_on<true>(c, x, y, s, dy, dx);
  }
  void backward_weight(const ctpipe::cuda::context& c, const input_type& x, const output_type& y,
                       const output_type& dy) requires(!base::saves) {
    this->weight_on(c, x, y, device_saved{}, dy);
  }
  void backward_weight(const ctpipe::cuda::context& c, const input_type& x, const output_type& y, const device_saved& s,
                       const output_type& dy) requires base::saves {
    this->weight_on(c, x, y, s, dy);
  }
};

// A host layer of matrices (Rows x Cols in, Rows x Out out) on the simulator.
template <class H, bool Split = false>
using sim_of = std::conditional_t<
    Split, sim_split_layer<H, device_matrix<typename H::input_type>, device_matrix<typename H::output_type>>,
    sim_layer<H, device_matrix<typename H::input_type>, device_matrix<typename H::output_type>>>;

// The reference dense layer on the simulator, with its parameters; as a whole (sim_dense) or with
// its backward split (I and W) as the reference dense layer splits it.
template <std::size_t Batch, std::size_t In, std::size_t Out, activation Act = activation::relu>
struct sim_dense : sim_of<dense<Batch, In, Out, Act>> {};
template <std::size_t Batch, std::size_t In, std::size_t Out, activation Act = activation::relu>
struct sim_split_dense : sim_of<dense<Batch, In, Out, Act>, true> {};
static_assert(ctpipe::cuda::device_splittable_layer<sim_split_dense<2, 3, 4>>);
static_assert(!ctpipe::cuda::device_splittable_layer<sim_dense<2, 3, 4>>);

// layers::relu as a device layer of the simulator: no parameters, so the executors store, sum and
// update nothing for it.
template <std::size_t Batch, std::size_t Cols>
struct sim_relu : sim_of<ctpipe::layers::relu<Batch, Cols>> {};
static_assert(!ctpipe::has_parameters<sim_relu<2, 3>>);

// A host loss (test::loss, or test::token_loss: the sum over the microbatch's extent) on the
// simulator, through the call the executors make (ctpipe::detail::call_loss).
template <class HostLoss>
struct sim_loss_of {
  using host_loss = HostLoss;
  using target_type = ctpipe::cuda::tensor<int, batch>;
  using logits = device_matrix<typename host_loss::logits_type>;
  void operator()(const ctpipe::cuda::context& c, const logits& y, const target_type& t, logits& dy,
                  double* loss) const {
    // A device loss checks its targets where it can say which are bad: the simulator's targets lie
    // in host memory, so it checks them as it is issued (an eager step; a graph's replay issues
    // nothing), as a device loss would on a host copy of its targets. (Over tokens, the extent is
    // device data a kernel reads: the kernel checks.)
    if constexpr (!ctpipe::token_major<typename host_loss::logits_type>) {
      typename host_loss::target_type tm{};
      std::memcpy(tm.data(), t.data, target_type::bytes);
      host_loss::check_targets(ctpipe::context{.rank = c.rank, .stage = c.stage, .microbatch = c.microbatch}, tm);
    }
    sim::launch(c, {y.data, t.data, dy.data, loss, c.step, c.extent}, [c, y, t, dy, loss] {
      typename host_loss::logits_type ym, dym;
      typename host_loss::target_type tm{};
      std::memcpy(ym.v.data(), y.data, logits::bytes);
      std::memcpy(tm.data(), t.data, target_type::bytes);
      host_loss h;
      const ctpipe::context hc = host_context(c);
      *loss = ctpipe::detail::call_loss(
          h, [&hc] { return hc; }, ym, tm, dym);
      std::memcpy(dy.data, dym.v.data(), logits::bytes);
    });
  }
};
using sim_loss = sim_loss_of<ctpipe::layers::softmax_cross_entropy<batch, classes>>;
using sim_token_loss = sim_loss_of<test::token_loss>;

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

// test::stateful_mlp on the simulated device: a layer norm and an attention layer that keep their
// state for the backward (device memory the executor holds per microbatch), and a dropout layer
// that draws from its context (the step read in the kernel); the numerics sweeps train it.
using stateful_mlp =
    ctpipe::model<sim_dense<batch, features, hidden>, sim_of<ctpipe::layers::layer_norm<batch, hidden>>,
                  sim_dense<batch, hidden, hidden>, sim_of<ctpipe::layers::causal_attention<batch, hidden>>,
                  sim_dense<batch, hidden, hidden>, sim_of<ctpipe::layers::dropout<batch, hidden, 100>>,
                  sim_dense<batch, hidden, hidden>, sim_dense<batch, hidden, classes, activation::none>>;
static_assert(ctpipe::cuda::is_device_model_v<stateful_mlp> && ctpipe::has_saved_state_v<stateful_mlp>);
// The same with split backward: the layer norm and the attention layer split (their W reads what
// their F saved and their I kept), and so do the dense layers but two (layers 2 and 6: their I runs
// the whole backward, their W nothing); dropout does not split.
using split_stateful_mlp =
    ctpipe::model<sim_split_dense<batch, features, hidden>, sim_of<ctpipe::layers::layer_norm<batch, hidden>, true>,
                  sim_dense<batch, hidden, hidden>, sim_of<ctpipe::layers::causal_attention<batch, hidden>, true>,
                  sim_split_dense<batch, hidden, hidden>, sim_of<ctpipe::layers::dropout<batch, hidden, 100>>,
                  sim_dense<batch, hidden, hidden>, sim_split_dense<batch, hidden, classes, activation::none>>;
static_assert(ctpipe::cuda::device_splittable_layer<split_stateful_mlp::layer_type<1>> &&
              ctpipe::cuda::device_splittable_layer<split_stateful_mlp::layer_type<3>>);

// layers::add as a device layer of the simulator: two input parts (a residual join), the host
// layer's own arithmetic.
template <std::size_t Rows, std::size_t Cols, ctpipe::layers::rows R = ctpipe::layers::rows::fixed>
struct sim_add {
  using host_layer = ctpipe::layers::add<Rows, Cols, R>;
  using part = device_matrix<ctpipe::layers::matrix<Rows, Cols, R>>;
  using input_type = ctpipe::tensors<part, part>;
  using output_type = part;
  static constexpr double cost = host_layer::cost;

  void forward(const ctpipe::cuda::context& c, const input_type& x, output_type& y) const {
    const part a = std::get<0>(x), b = std::get<1>(x);
    sim::launch(c, {a.data, b.data, y.data}, [a, b, y] {
      for (std::size_t i = 0; i < part::size; ++i) y.data[i] = a.data[i] + b.data[i];
    });
  }
  void backward(const ctpipe::cuda::context& c, const input_type&, const output_type&, const output_type& dy,
                input_type& dx) const {
    const part da = std::get<0>(dx), db = std::get<1>(dx);
    sim::launch(c, {dy.data, da.data, db.data}, [dy, da, db] {
      std::memcpy(da.data, dy.data, part::bytes);
      std::memcpy(db.data, dy.data, part::bytes);
    });
  }
};
static_assert(ctpipe::cuda::device_layer<sim_add<2, 3>>);

// test::block_mlp's tied head on the simulated device: layer 0's weights, transposed.
template <bool Split, ctpipe::layers::rows R>
using sim_tied_head =
    ctpipe::shared_with<0,
                        sim_of<ctpipe::layers::dense_transposed<batch, hidden, features, activation::none, R>, Split>>;
template <bool Split, ctpipe::layers::rows R>
using sim_class_head = sim_of<dense<batch, hidden, classes, activation::none, R>, Split>;

// test::block_mlp (Tied) or test::untied_block_mlp (with rows of fixed size: test::fixed_block_mlp) on the simulated
// device (a residual around the layer norm and attention, one around the MLP, and a head tied to layer 0 or not):
// what the CUDA executor's numerics sweeps train; and its split form.
template <bool Split, ctpipe::layers::rows R = ctpipe::layers::rows::fixed, bool Tied = false, bool Mixed = false>
using sim_block_of =
    ctpipe::model<sim_of<dense<batch, features, hidden, activation::relu, R>, Split>,           // 0
                  sim_of<ctpipe::layers::layer_norm<batch, hidden, R>, Split>,                  // 1
                  sim_of<ctpipe::layers::causal_attention<batch, hidden, batch, 1, R>, Split>,  // 2
                  ctpipe::node<sim_add<batch, hidden, R>, ctpipe::back<1>, ctpipe::back<3>>,    // 3: 2 + 0
                  sim_of<ctpipe::layers::layer_norm<batch, hidden, R>>,                         // 4
                  sim_of<dense<batch, hidden, hidden, activation::relu, R>, Split>,             // 5
                  sim_of<ctpipe::layers::dropout<batch, hidden, 100, R>>,                       // 6
                  sim_of<std::conditional_t<Mixed, mixed<dense<batch, hidden, hidden, activation::none, R>>,
                                            dense<batch, hidden, hidden, activation::none, R>>>,  // 7
                  ctpipe::node<sim_add<batch, hidden, R>, ctpipe::back<1>, ctpipe::back<5>>,      // 8: 7 + 3
                  std::conditional_t<Tied, sim_tied_head<Split, R>, sim_class_head<Split, R>>>;   // 9
using block_mlp = sim_block_of<false>;
using split_block_mlp = sim_block_of<true>;
static_assert(!block_mlp::is_chain && ctpipe::cuda::is_device_model_v<block_mlp>);
static_assert(block_mlp::costs == test::untied_block_mlp::costs);
// The same over tokens, with the tied head (test::block_mlp, the host sweeps' model): each microbatch uses its own
// extent of them, which the layers read from their context (device data); what the CUDA executor's numerics sweeps
// train. Untied (test::untied_block_mlp): the NCCL executor's and the MPI device path's.
// Its layer 7 computes in bf16 (test::mixed: float master weights, a bf16 copy, float gradients).
using token_block_mlp = sim_block_of<false, ctpipe::layers::rows::tokens, true, true>;
using split_token_block_mlp = sim_block_of<true, ctpipe::layers::rows::tokens, true, true>;
using untied_token_block_mlp = sim_block_of<false, ctpipe::layers::rows::tokens>;
using split_untied_token_block_mlp = sim_block_of<true, ctpipe::layers::rows::tokens>;
static_assert(token_block_mlp::token_capacity == batch && split_token_block_mlp::token_capacity == batch);
static_assert(ctpipe::has_compute_copy<token_block_mlp::layer_type<7>>);
static_assert(token_block_mlp::shares[9] == 0 && !ctpipe::has_shared_parameters_v<untied_token_block_mlp>);
// test::token_mlp on the simulated device: a chain over tokens (its hand-offs copy the extent's rows).
using token_mlp = ctpipe::model<sim_of<dense<batch, features, hidden, activation::relu, tokens>, true>,
                                sim_of<ctpipe::layers::layer_norm<batch, hidden, tokens>, true>,
                                sim_of<dense<batch, hidden, hidden, activation::relu, tokens>>,
                                sim_of<ctpipe::layers::causal_attention<batch, hidden, batch, 1, tokens>, true>,
                                sim_of<dense<batch, hidden, hidden, activation::relu, tokens>, true>,
                                sim_of<ctpipe::layers::dropout<batch, hidden, 100, tokens>>,
                                sim_of<dense<batch, hidden, hidden, activation::relu, tokens>, true>,
                                sim_of<dense<batch, hidden, classes, activation::none, tokens>, true>>;
static_assert(token_mlp::is_chain && token_mlp::token_capacity == batch);

/// The host model a device model's layers compute (each layer's host_layer): its sequential reference.
template <class M, class = std::make_index_sequence<M::size>>
struct host_model;
template <class M, std::size_t... K>
struct host_model<M, std::index_sequence<K...>> {
  using type = ctpipe::model<typename M::template layer_type<K>::host_layer...>;
};
// The block MLPs' host twins (their node entries have no host_layer of their own).
template <class H>
struct host_is {
  using type = H;
};
template <>
struct host_model<block_mlp> : host_is<test::fixed_block_mlp> {};
template <>
struct host_model<split_block_mlp> : host_is<test::fixed_block_mlp> {};
template <>
struct host_model<token_block_mlp> : host_is<test::mixed_block_mlp> {};
template <>
struct host_model<split_token_block_mlp> : host_is<test::mixed_block_mlp> {};
template <>
struct host_model<untied_token_block_mlp> : host_is<test::untied_block_mlp> {};
template <>
struct host_model<split_untied_token_block_mlp> : host_is<test::untied_block_mlp> {};
template <class M>
using host_model_t = typename host_model<M>::type;
/// The simulated loss a device model trains with (as test::loss_for: over its output's columns, 4 classes or the tied
/// head's 16 logits).
template <class Model>
using sim_loss_for = sim_loss_of<
    ctpipe::layers::softmax_cross_entropy<batch, Model::output_type::bytes / (sizeof(float) * batch),
                                          (Model::token_capacity > 0) ? tokens : ctpipe::layers::rows::fixed>>;
static_assert(std::is_same_v<host_model_t<mlp>, test::mlp> && std::is_same_v<host_model_t<split_mlp>, test::mlp> &&
              std::is_same_v<host_model_t<relu_mlp>, test::relu_mlp> &&
              std::is_same_v<host_model_t<stateful_mlp>, test::stateful_mlp> &&
              std::is_same_v<host_model_t<split_stateful_mlp>, test::stateful_mlp>);

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
/// first stage's), targets on `target_device` (the last stage's, where the loss runs). A
/// bidirectional table's two pipelines each take half of the microbatches: the second half's
/// inputs and targets go on devices of their own (its pipeline's first and last stages').
/// (Input: the device model's input type; a data set of the host twin's.)
template <class Input = mlp::input_type>
struct basic_device_data {
  std::deque<sim::buffer> buffers;  // per pipeline: its inputs, its targets
  std::vector<Input> inputs;
  std::vector<sim_loss::target_type> targets;
  template <class DataSet>
  explicit basic_device_data(const DataSet& d, int input_device = 0, int target_device = 0)
      : basic_device_data(d, std::vector<int>{input_device}, std::vector<int>{target_device}) {}
  template <class DataSet>
  basic_device_data(const DataSet& d, std::vector<int> input_devices, std::vector<int> target_devices) {
    using target = sim_loss::target_type;
    const std::size_t chains = input_devices.size(), per = d.inputs.size() / chains;
    for (std::size_t c = 0; c < chains; ++c) {
      const sim::buffer& x = buffers.emplace_back(per * Input::bytes, input_devices[c]);
      const sim::buffer& t = buffers.emplace_back(per * target::bytes, target_devices[c]);
      for (std::size_t k = 0; k < per; ++k) {
        const std::size_t i = c * per + k;
        float* xi = x.as<float>() + k * Input::size;
        int* ti = t.as<int>() + k * target::size;
        std::memcpy(xi, d.inputs[i].v.data(), Input::bytes);
        std::memcpy(ti, d.targets[i].data(), target::bytes);
        inputs.push_back({xi});
        targets.push_back({ti});
      }
    }
  }
};
using device_data = basic_device_data<>;

/// The stage plan the simulated sweeps split Model by for schedule Sched: by cost for a chain; for
/// a graph, in equal layer counts (test::even_stages), whose residuals then cross stages. (A
/// bidirectional table's: one of its two pipelines'.)
template <auto Sched, class Model>
consteval auto sweep_stages() {
  constexpr int stages = Sched.stages() / Sched.info().directions;  // (one pipeline's)
  if constexpr (Model::is_chain)
    return ctpipe::partition<Model, stages>();
  else
    return test::even_stages<Model, stages>();
}
/// Sched's table, with Model's crossings under sweep_stages.
template <auto Sched, class Model>
consteval auto sweep_table() {
  if constexpr (Model::is_chain)
    return ctpipe::make_table<Sched>();
  else
    return test::table_for<Sched, Model, sweep_stages<Sched, Model>()>();
}

template <auto Table, auto Placement = 0, ctpipe::dispatch D = ctpipe::dispatch::automatic, class Model = mlp,
          auto Stages = ctpipe::partition<Model, Table.stages()>()>
using sim_executor =
    ctpipe::cuda::basic_executor<Table, Model, Stages, sim_loss_for<Model>, Placement, D, sim::backend>;

}  // namespace test::device
