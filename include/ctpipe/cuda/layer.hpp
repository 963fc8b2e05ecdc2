// Device layers: what a layer functor provides to run on the CUDA executor. Its tensors are views of
// device memory (ctpipe::cuda::tensor), and its forward and backward receive a context with the
// stream to launch on. No CUDA header is needed to name any of it: this header compiles under g++,
// clang and nvcc alike.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include <ctpipe/config.hpp>         // CTPIPE_HOST_DEVICE
#include <ctpipe/model/context.hpp>  // counter_random
#include <ctpipe/model/layer.hpp>
#include <ctpipe/model/model.hpp>
#include <ctpipe/model/tensors.hpp>
#include <ctpipe/schedule/task.hpp>  // op_kind

struct CUstream_st;  // the CUDA runtime's stream (cudaStream_t is CUstream_st*); declared, not defined

namespace ctpipe::cuda {

/// What a device layer's calls receive: the stream to launch on (a cudaStream_t), the device it
/// belongs to, and the task being run. Plain data, which a kernel may take by value.
struct context {
  CUstream_st* stream = nullptr;  // the rank's stream: launch every kernel of the task on it
  int device = 0;                 // the CUDA device of that stream (the current device while the task runs)
  int rank = 0, stage = 0;
  int microbatch = 0;  // in the step's global batch: replica r's microbatch i is r * microbatches + i
  op_kind op = op_kind::forward;
  int layer = 0;  // the layer's index in the model (the loss: the model's size)
  // The steps the executor ran before this one, in device memory on `device`, written before each
  // step runs: a step replayed from a CUDA graph reads its own number. Read it in a kernel (*step),
  // never on the host (where it is not yet written when the task is issued).
  const std::uint64_t* step = nullptr;
  // Where the model has token-major tensors (ctpipe/model/extent.hpp): this microbatch's extent,
  // the tokens it uses (1 to the model's token_capacity), in device memory on `device`, written
  // before each step as the step's number is (a replayed graph reads its own step's extents). Read
  // it in a kernel (*extent). Null in a model of fixed shapes.
  const int* extent = nullptr;
  // The same extent on the host, where the host knows it when it issues the task: in an eager step
  // (size a library call by it, such as a cuBLAS product's rows). 0 while the step is captured into
  // a graph (a replay runs other extents: only *extent is right there), and in a model of fixed
  // shapes.
  int host_extent = 0;
  // false in a forward-only pass (an executor's evaluate() or predict()): a layer that acts
  // differently at inference (dropout) acts so there, as ctpipe::context::training says to a host
  // layer.
  bool training = true;

  /// The random stream of this task's (step, microbatch, layer) and `stream_id`: the numbers
  /// ctpipe::context::random gives a host layer, so a forward and its backward draw alike wherever
  /// they run. Call it in a kernel, with the step read there: `ctx.random(*ctx.step, 7)`.
  CTPIPE_HOST_DEVICE constexpr counter_random random(std::uint64_t step_number, std::uint32_t stream_id = 0) const {
    return counter_random::of(layer, microbatch, step_number, stream_id);
  }
};

/// A view of device memory with a shape known at compile time: value_type, a constant `bytes`, a
/// `data` pointer, and construction from that pointer (ctpipe::cuda::tensor is one). Executors
/// allocate `bytes` per buffer once and hand layers views into it.
template <class T>
concept device_tensor = std::semiregular<T> && requires(T t, typename T::value_type* p) {
  typename T::value_type;
  { T::bytes } -> std::convertible_to<std::size_t>;
  { t.data } -> std::convertible_to<typename T::value_type*>;
  T{p};
};

namespace detail {
template <class T>
struct device_parts : std::false_type {};
template <class... T>
struct device_parts<tensors<T...>> : std::bool_constant<(device_tensor<T> && ...)> {};
}  // namespace detail

/// A device tensor, or several (a ctpipe::tensors of device tensors: the input of a layer that takes
/// more than one, or the output of one that gives more than one; ctpipe/model/graph.hpp).
template <class T>
concept device_tensors = device_tensor<T> || detail::device_parts<T>::value;

namespace detail {

// Whether L takes Call(ctx, x, y, [s,] rest...), with its saved state s exactly where L has a
// saved_type (With: the form with s, whether or not L has one; for telling near misses apart).
template <class Call, class L, bool With, class Y, class S, class... Rest>
constexpr bool takes() {
  using X = const typename L::input_type&;
  if constexpr (With) return requires(L & l, const context& c, X x, Y y, S s, Rest... r) {
      Call::call(l, c, x, y, s, r...);
    };
  else
    return requires(L & l, const context& c, X x, Y y, Rest... r) { Call::call(l, c, x, y, r...); };
}

// The four calls of a device layer: forward(c, x, y[, s]), backward(c, x, y[, s], dy, dx),
// backward_input(c, x, y[, s], dy, dx), backward_weight(c, x, y[, s], dy), where s (the layer's
// saved state, a view) is const but for forward and backward_input (which may keep in it what its W
// needs). The one description of them: the concepts below and the engine's calls go through it.
template <class L, class Call, bool With = has_saved_state<L>>
constexpr bool device_form() {
  if constexpr (!has_layer_types<L>) {
    return false;
  } else {
    using Y = const typename L::output_type&;
    using DX = typename L::input_type&;
    using S = saved_t<L>;
    if constexpr (std::is_same_v<Call, ctpipe::detail::forward_call>)
      return takes<Call, L, With, typename L::output_type&, S&>();
    else if constexpr (std::is_same_v<Call, ctpipe::detail::backward_call>)
      return takes<Call, L, With, Y, const S&, Y, DX>();
    else if constexpr (std::is_same_v<Call, ctpipe::detail::backward_input_call>)
      return takes<Call, L, With, Y, S&, Y, DX>();
    else
      return takes<Call, L, With, Y, const S&, Y>();
  }
}

/// Call(l, c, x, y, [s,] rest...), as L takes it (s where L has a saved_type).
template <class Call, class L, class X, class Y, class S, class... Rest>
void call_device(L& l, const context& c, const X& x, Y& y, S& s, Rest&... rest) {
  if constexpr (has_saved_state<L>)
    Call::call(l, c, x, y, s, rest...);
  else
    Call::call(l, c, x, y, rest...);
}

}  // namespace detail

/// forward(ctx, x, y): enqueues y = f(x) on ctx.stream; with a saved_type, forward(ctx, x, y,
/// saved_type& s) also writes what the backward needs into s.
template <class L>
concept has_device_forward = detail::device_form<L, ctpipe::detail::forward_call>();
/// backward(ctx, x, y, dy, dx): enqueues dx = dL/dx and weight gradients += dL/dw on ctx.stream;
/// with a saved_type, backward(ctx, x, y, const saved_type& s, dy, dx).
template <class L>
concept has_device_backward = detail::device_form<L, ctpipe::detail::backward_call>();

/// A type that declares a device forward or backward, in either form (with saved state or
/// without): the model's rules hold it to the device layer's.
template <class L>
concept declares_device_calls = detail::device_form<L, ctpipe::detail::forward_call, false>() || detail::device_form<
    L, ctpipe::detail::forward_call, true>() || detail::device_form<L, ctpipe::detail::backward_call, false>() ||
    detail::device_form<L, ctpipe::detail::backward_call, true>();

/// A device layer: the tensors are device_tensor views; forward and backward receive a context and
/// enqueue their work on its stream (they must not synchronise). Weight gradients accumulate with +=
/// in microbatch order, as on the host. A layer may keep state for its backward (a member type
/// saved_type, a device_tensor): the executors hold one per microbatch in flight, in device memory,
/// from its forward to its last reader, and pass a view of it after y.
template <class L>
concept device_layer = has_layer_types<L> && has_constant_cost<L> && has_device_forward<L> && has_device_backward<L> &&
    std::default_initializable<L> && device_tensors<typename L::input_type> &&
    device_tensors<typename L::output_type> &&(!has_saved_state<L> || device_tensor<saved_t<L>>);

/// A device layer whose backward splits, for the schedules with split backward (I and W): on
/// ctx.stream, backward_input(ctx, x, y, [s,] dy, dx) enqueues dx = dL/dx (and may keep in s what
/// its W needs), and backward_weight(ctx, x, y, [s,] dy) enqueues weight gradients += dL/dw. Both
/// read the stash (x, y, s) and the output gradient dy that the I received, which the executor
/// keeps until the W. A device layer that does not split runs its whole backward at I, and nothing
/// at W.
template <class L>
concept device_splittable_layer = device_layer<L> && detail::device_form<L, ctpipe::detail::backward_input_call>() &&
    detail::device_form<L, ctpipe::detail::backward_weight_call>();

/// A device loss: `void operator()(const context&, const Output& y, const target_type& t, Output& dy,
/// double* loss)` enqueues the loss of one microbatch into *loss (device memory) and its gradient
/// with respect to y into dy.
template <class F, class Output>
concept device_loss_function = requires(F& f, const context& c, const Output& y, const typename F::target_type& t,
                                        Output& dy, double* out) {
  typename F::target_type;
  f(c, y, t, dy, out);
};

/// True when every layer of M is a device layer (a model for the CUDA executor).
template <model_type M>
inline constexpr bool is_device_model_v = []<std::size_t... K>(std::index_sequence<K...>) {
  return (device_layer<typename M::template layer_type<K>> && ...);
}
(std::make_index_sequence<M::size>{});

}  // namespace ctpipe::cuda

namespace ctpipe {

/// Device layers join models through the model layer's hook. A type with a device forward or
/// backward is claimed as a device layer and checked by these rules; an error here names the broken
/// rule, and the model's layer_check<Index, L> in the lines below names the layer.
template <class L>
requires cuda::declares_device_calls<L>
struct device_layer_traits<L> {
  static constexpr bool saves = has_saved_state<L>;
  static constexpr bool claimed = true;
  static constexpr bool valid =
      cuda::device_layer<L> && (!declares_split_backward<L> || cuda::device_splittable_layer<L>);
  // The rules, one message each; the model's layer_check calls this (a function, so that a broken
  // rule is reported alone, not again at every use of `valid`).
  static constexpr bool test() {
    static_assert(
        saves || (cuda::has_device_forward<L> && cuda::has_device_backward<L>),
        "ctpipe::model: this device layer needs both forward(const ctpipe::cuda::context&, const input_type& x, output_type& y) and backward(const ctpipe::cuda::context&, const input_type& x, const output_type& y, const output_type& dy, input_type& dx)");
    static_assert(
        !saves || (cuda::has_device_forward<L> && cuda::has_device_backward<L>),
        "ctpipe::model: this device layer has a saved_type, so it needs forward(const ctpipe::cuda::context&, const input_type& x, output_type& y, saved_type& s) and backward(const ctpipe::cuda::context&, const input_type& x, const output_type& y, const saved_type& s, const output_type& dy, input_type& dx)");
    static_assert(
        cuda::device_tensors<typename L::input_type> && cuda::device_tensors<typename L::output_type>,
        "ctpipe::model: a device layer's input_type and output_type must be device tensors (value_type, a constant bytes, a data pointer; ctpipe::cuda::tensor<T, extents...>), or a ctpipe::tensors of them");
    static_assert(
        !saves || cuda::device_tensor<saved_t<L>>,
        "ctpipe::model: a device layer's saved_type must be a device tensor (value_type, a constant bytes, a data pointer; ctpipe::cuda::tensor<T, extents...>): the executors allocate its bytes in device memory per microbatch in flight");
    static_assert(
        saves || !cuda::device_layer<L> || !declares_split_backward<L> || cuda::device_splittable_layer<L>,
        "ctpipe::model: this device layer declares backward_input or backward_weight, so it splits its backward, and it needs both, as void backward_input(const ctpipe::cuda::context&, const input_type& x, const output_type& y, const output_type& dy, input_type& dx) and void backward_weight(const ctpipe::cuda::context&, const input_type& x, const output_type& y, const output_type& dy)");
    static_assert(
        !saves || !cuda::device_layer<L> || !declares_split_backward<L> || cuda::device_splittable_layer<L>,
        "ctpipe::model: this device layer declares backward_input or backward_weight, so it splits its backward, and it needs both, as void backward_input(const ctpipe::cuda::context&, const input_type& x, const output_type& y, saved_type& s, const output_type& dy, input_type& dx) and void backward_weight(const ctpipe::cuda::context&, const input_type& x, const output_type& y, const saved_type& s, const output_type& dy)");
    return valid;
  }
};

/// Device losses join the executors' rules through the model layer's hook.
template <class F, class Output>
requires cuda::device_loss_function<F, Output>
struct device_loss_traits<F, Output> {
  static constexpr bool valid = true;
};

}  // namespace ctpipe
