// Device layers: what a layer functor provides to run on the CUDA executor. Its tensors are views of
// device memory (ctpipe::cuda::tensor), and its forward and backward receive a context with the
// stream to launch on. No CUDA header is needed to name any of it: this header compiles under g++,
// clang and nvcc alike.
#pragma once

#include <concepts>
#include <cstddef>
#include <type_traits>
#include <utility>

#include <ctpipe/model/layer.hpp>
#include <ctpipe/model/model.hpp>
#include <ctpipe/schedule/task.hpp>  // op_kind

struct CUstream_st;  // the CUDA runtime's stream (cudaStream_t is CUstream_st*); declared, not defined

namespace ctpipe::cuda {

/// What a device layer's forward and backward receive: the stream to launch on (a cudaStream_t),
/// the device it belongs to, and the task being run. Plain data.
struct context {
  CUstream_st* stream = nullptr;  // the rank's stream: launch every kernel of the task on it
  int device = 0;                 // the CUDA device of that stream (the current device while the task runs)
  int rank = 0, stage = 0, microbatch = 0;
  op_kind op = op_kind::forward;
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

/// forward(ctx, x, y): enqueues y = f(x) on ctx.stream.
template <class L>
concept has_device_forward = has_layer_types<L> &&
    requires(L& l, const context& c, const typename L::input_type& x, typename L::output_type& y) {
  l.forward(c, x, y);
};
/// backward(ctx, x, y, dy, dx): enqueues dx = dL/dx and weight gradients += dL/dw on ctx.stream.
template <class L>
concept has_device_backward = has_layer_types<L> &&
    requires(L& l, const context& c, const typename L::input_type& x, const typename L::output_type& y,
             const typename L::output_type& dy, typename L::input_type& dx) {
  l.backward(c, x, y, dy, dx);
};

/// A device layer: the tensors are device_tensor views; forward and backward receive a context and
/// enqueue their work on its stream (they must not synchronise). Weight gradients accumulate with +=
/// in microbatch order, as on the host.
template <class L>
concept device_layer = has_layer_types<L> && has_constant_cost<L> && has_device_forward<L> && has_device_backward<L> &&
    std::default_initializable<L> && device_tensor<typename L::input_type> && device_tensor<typename L::output_type>;

/// A device layer whose backward splits, for the schedules with split backward (I and W): on
/// ctx.stream, backward_input(ctx, x, y, dy, dx) enqueues dx = dL/dx, and backward_weight(ctx, x, y,
/// dy) enqueues weight gradients += dL/dw. Both read the stash (x, y) and the output gradient dy
/// that the I received, which the executor keeps until the W. A device layer that does not split
/// runs its whole backward at I, and nothing at W.
template <class L>
concept device_splittable_layer = device_layer<L> &&
    requires(L& l, const context& c, const typename L::input_type& x, const typename L::output_type& y,
             const typename L::output_type& dy, typename L::input_type& dx) {
  l.backward_input(c, x, y, dy, dx);
  l.backward_weight(c, x, y, dy);
};

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
requires(cuda::has_device_forward<L> || cuda::has_device_backward<L>) struct device_layer_traits<L> {
  static_assert(
      cuda::has_device_forward<L> && cuda::has_device_backward<L>,
      "ctpipe::model: this device layer needs both forward(const ctpipe::cuda::context&, const input_type& x, output_type& y) and backward(const ctpipe::cuda::context&, const input_type& x, const output_type& y, const output_type& dy, input_type& dx)");
  static_assert(
      cuda::device_tensor<typename L::input_type> && cuda::device_tensor<typename L::output_type>,
      "ctpipe::model: a device layer's input_type and output_type must be device tensors (value_type, a constant bytes, a data pointer; ctpipe::cuda::tensor<T, extents...>)");
  static_assert(
      !cuda::device_layer<L> || !declares_split_backward<L> || cuda::device_splittable_layer<L>,
      "ctpipe::model: this device layer declares backward_input or backward_weight, so it splits its backward, and it needs both, as void backward_input(const ctpipe::cuda::context&, const input_type& x, const output_type& y, const output_type& dy, input_type& dx) and void backward_weight(const ctpipe::cuda::context&, const input_type& x, const output_type& y, const output_type& dy)");
  static_assert(!has_saved_state<L>,
                "ctpipe::model: a device layer cannot have a saved_type yet: the device executors (CUDA, NCCL, the "
                "MPI device path) do not stash saved state; only host layers keep it so far");
  static constexpr bool claimed = true;
  static constexpr bool valid =
      cuda::device_layer<L> && !has_saved_state<L> && (!declares_split_backward<L> || cuda::device_splittable_layer<L>);
};

/// Device losses join the executors' rules through the model layer's hook.
template <class F, class Output>
requires cuda::device_loss_function<F, Output>
struct device_loss_traits<F, Output> {
  static constexpr bool valid = true;
};

}  // namespace ctpipe
