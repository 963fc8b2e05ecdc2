// The layer and loss concepts: what a functor type must provide to run in a ctpipe pipeline.
//
// A layer maps an input_type to an output_type. Its backward gets the stashed input and output,
// the gradient of the output, writes the gradient of the input and adds its weight gradients to
// whatever it holds (accumulation across microbatches is the layer's `+=`; the executor calls it in
// microbatch order). Its cost is a compile-time number used to balance stages.
#pragma once

#include <concepts>
#include <cstddef>
#include <span>
#include <type_traits>

#include <ctpipe/schedule/task.hpp>  // op_kind

struct CUstream_st;  // the CUDA runtime's stream (cudaStream_t is CUstream_st*); declared, not defined

namespace ctpipe {

/// What a device layer's forward and backward receive: the stream to launch on (a cudaStream_t),
/// the device it belongs to, and the task being run. Plain data: no CUDA header is needed to name it.
struct device_context {
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

/// Member types input_type and output_type.
template <class L>
concept has_layer_types = requires {
  typename L::input_type;
  typename L::output_type;
};

/// A declared cost, readable at compile time: `static constexpr double cost = ...;`
template <class L>
concept has_constant_cost = requires {
  { L::cost } -> std::convertible_to<double>;
  typename std::bool_constant<(static_cast<double>(L::cost) > 0.0)>;  // readable in a constant expression
};

/// forward(x, y): y = f(x).
template <class L>
concept has_forward = has_layer_types<L> &&
    requires(L& l, const typename L::input_type& x, typename L::output_type& y) {
  l.forward(x, y);
};

/// backward(x, y, dy, dx): dx = dL/dx, and weight gradients += dL/dw.
template <class L>
concept has_backward = has_layer_types<L> &&
    requires(L& l, const typename L::input_type& x, const typename L::output_type& y, const typename L::output_type& dy,
             typename L::input_type& dx) {
  l.backward(x, y, dy, dx);
};

/// A pipeline layer. Its tensors must be default-constructible and copy-assignable: the executor
/// allocates them once and copies them across ranks.
template <class L>
concept layer =
    has_layer_types<L> && has_constant_cost<L> && has_forward<L> && has_backward<L> && std::default_initializable<L> &&
    std::semiregular<typename L::input_type> && std::semiregular<typename L::output_type>;

/// A device layer: the tensors are device_tensor views; forward and backward receive a
/// device_context and enqueue their work on its stream (they must not synchronise). Weight
/// gradients accumulate with += in microbatch order, as on the host.
template <class L>
concept has_device_forward = has_layer_types<L> &&
    requires(L& l, const device_context& c, const typename L::input_type& x, typename L::output_type& y) {
  l.forward(c, x, y);
};
template <class L>
concept has_device_backward = has_layer_types<L> &&
    requires(L& l, const device_context& c, const typename L::input_type& x, const typename L::output_type& y,
             const typename L::output_type& dy, typename L::input_type& dx) {
  l.backward(c, x, y, dy, dx);
};
template <class L>
concept device_layer = has_layer_types<L> && has_constant_cost<L> && has_device_forward<L> && has_device_backward<L> &&
    std::default_initializable<L> && device_tensor<typename L::input_type> && device_tensor<typename L::output_type>;

/// A host layer or a device layer: what a model may hold.
template <class L>
concept any_layer = layer<L> || device_layer<L>;

/// A layer with parameters: parameters() and gradients() give spans of the same length and type.
template <class L>
concept has_parameters = requires(L& l) {
  { l.parameters() } -> std::convertible_to<std::span<typename decltype(l.parameters())::element_type>>;
  { l.gradients() } -> std::same_as<decltype(l.parameters())>;
};

/// A layer whose backward can be split into an input-gradient and a weight-gradient part (for the
/// zero-bubble schedules; the host executor runs plain B today).
template <class L>
concept splittable_layer = layer<L> && requires(L& l, const typename L::input_type& x, const typename L::output_type& y,
                                                const typename L::output_type& dy, typename L::input_type& dx) {
  l.backward_input(x, y, dy, dx);
  l.backward_weight(x, y, dy);
};

/// A device loss: `void operator()(const device_context&, const Output& y, const target_type& t,
/// Output& dy, double* loss)` enqueues the loss of one microbatch into *loss (device memory) and
/// its gradient with respect to y into dy.
template <class F, class Output>
concept device_loss_function = requires(F& f, const device_context& c, const Output& y,
                                        const typename F::target_type& t, Output& dy, double* out) {
  typename F::target_type;
  f(c, y, t, dy, out);
};

/// A loss: `double operator()(const Output& y, const target_type& t, Output& dy)` returns the loss of
/// one microbatch and writes its gradient with respect to y.
template <class F, class Output>
concept loss_function = requires(F& f, const Output& y, const typename F::target_type& t, Output& dy) {
  typename F::target_type;
  { f(y, t, dy) } -> std::convertible_to<double>;
};

}  // namespace ctpipe
