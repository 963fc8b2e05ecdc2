// What a user calls on every executor, written once: step, evaluate and predict, each with and
// without run-time extents, and, on an executor that launches on devices, enqueue and a launch
// mode. An executor derives from executor_face and gives it its primitives (private; the face is
// its friend):
//
//   token_losses run_step(const char* who, inputs, targets, extents[, launch how]);
//   token_losses run_forward(const char* who, inputs, targets, outputs, extents[, launch how]);
//   void run_enqueue(const char* who, inputs, targets, extents, launch how);   // launching ones
//
// `who` names the executor and the call ("ctpipe::host_executor::evaluate"), for its messages;
// an empty extents span is a step of full-length microbatches; an empty outputs span is an
// evaluate, an empty targets span a predict. An executor that declares a step of its own (the
// elastic trainers) hides the face's, whose bodies are then never compiled.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <span>
#include <type_traits>

#include <ctpipe/model/extent.hpp>  // token_losses

namespace ctpipe::detail {

/// An executor's name, known at compile time ("ctpipe::host_executor").
template <std::size_t N>
struct face_name {
  char text[N]{};
  consteval face_name(const char (&s)[N]) { std::copy_n(s, N, text); }
};

/// `Name` then `Call` ("::evaluate"), one constant string.
template <face_name Name, face_name Call>
inline constexpr auto qualified_name = [] {
  std::array<char, sizeof(Name.text) + sizeof(Call.text) - 1> s{};
  std::copy_n(Name.text, sizeof(Name.text) - 1, s.data());
  std::copy_n(Call.text, sizeof(Call.text), s.data() + sizeof(Name.text) - 1);
  return s;
}();

/// What sets one executor's face apart: its launch modes (none: no_launch), whether evaluate and
/// predict take one too (forward_launch), whether it takes run-time extents, whether predict() writes into views
/// (device tensors: std::span<const T>) or into the outputs (std::span<T>), and the rule predict() asks of the model's
/// output.
struct no_launch {};
struct host_face {
  using launch = no_launch;
  static constexpr bool forward_launch = false, extents = true, output_views = false;
  template <class Output>
  static constexpr void predict_rule() noexcept {}
};

/// The elastic trainers': forward-only calls of full-length microbatches (each replica's share
/// through its executor), their own step.
struct trainer_face : host_face {
  static constexpr bool extents = false;
};

template <class Derived, face_name Name, class Model, class Loss, class Traits = host_face>
class executor_face {
  using launch = typename Traits::launch;
  static constexpr bool launches = !std::is_same_v<launch, no_launch>;
  static constexpr bool forward_launches = launches && Traits::forward_launch;
  static constexpr bool takes_extents = Traits::extents;
  using inputs_t = std::span<const typename Model::input_type>;
  using targets_t = std::span<const typename Loss::target_type>;
  using output_t = typename Model::output_type;
  using outputs_t = std::span<std::conditional_t<Traits::output_views, const output_t, output_t>>;
  using extents_t = std::span<const int>;
  static constexpr const char* step_who = qualified_name<Name, "::step">.data();
  static constexpr const char* enqueue_who = qualified_name<Name, "::enqueue">.data();
  static constexpr const char* evaluate_who = qualified_name<Name, "::evaluate">.data();
  static constexpr const char* predict_who = qualified_name<Name, "::predict">.data();
  Derived& self() noexcept { return static_cast<Derived&>(*this); }
  static constexpr void predict_rule() { Traits::template predict_rule<output_t>(); }

 public:
  /// One training step over the executor's microbatches: zeroes the gradients, runs the table,
  /// returns each microbatch's loss; the gradients are in the model's layers, summed over
  /// microbatches in microbatch order. A failing task ends it with task_failure naming the rank,
  /// stage and microbatch; the executor stays usable.
  std::span<const double> step(inputs_t inputs, targets_t targets) requires(!launches) {
    return self().run_step(step_who, inputs, targets, {}).losses;
  }
  /// The same over microbatches of different lengths (a model with token-major tensors:
  /// ctpipe/model/extent.hpp): microbatch i uses its first extents[i] tokens, and only those cross
  /// between ranks. Each loss with its tokens.
  token_losses step(inputs_t inputs, targets_t targets, extents_t extents) requires(!launches && takes_extents) {
    return self().run_step(step_who, inputs, targets, extents);
  }
  /// Forward only, under the parameters as they are, through the forward-only table (each rank's
  /// F ops, the same stages on the same ranks): each microbatch's loss, with no gradient zeroed or
  /// computed and the layers' context saying it is no training step. Equal to the sequential
  /// forward pass to the bit. Between steps.
  std::span<const double> evaluate(inputs_t inputs, targets_t targets) requires(!forward_launches) {
    return self().run_forward(evaluate_who, inputs, targets, {}, {}).losses;
  }
  /// The same over microbatches of different lengths: each loss with its tokens.
  token_losses evaluate(inputs_t inputs, targets_t targets,
                        extents_t extents) requires(!forward_launches && takes_extents) {
    return self().run_forward(evaluate_who, inputs, targets, {}, extents);
  }
  /// Forward only, as evaluate: each microbatch's output (the last layer's) into outputs[i].
  /// Equal to the sequential prediction to the bit.
  void predict(inputs_t inputs, outputs_t outputs) requires(!forward_launches) {
    predict_rule();
    self().run_forward(predict_who, inputs, {}, outputs, {});
  }
  /// The same over microbatches of different lengths: outputs[i] holds microbatch i's used
  /// tokens, and zeros past them.
  void predict(inputs_t inputs, outputs_t outputs, extents_t extents) requires(!forward_launches && takes_extents) {
    predict_rule();
    self().run_forward(predict_who, inputs, {}, outputs, extents);
  }

  // The same on an executor that launches on devices, each with its launch mode (eager: each
  // task's work issued as it comes; graph: the step captured once and replayed), and enqueue,
  // which issues a step and returns; wait() (the executor's own) returns its losses.
  void enqueue(inputs_t inputs, targets_t targets, launch how = launch{}) requires(launches) {
    self().run_enqueue(enqueue_who, inputs, targets, {}, how);
  }
  void enqueue(inputs_t inputs, targets_t targets, extents_t extents,
               launch how = launch{}) requires(launches&& takes_extents) {
    self().run_enqueue(enqueue_who, inputs, targets, extents, how);
  }
  std::span<const double> step(inputs_t inputs, targets_t targets, launch how = launch{}) requires(launches) {
    return self().run_step(step_who, inputs, targets, {}, how).losses;
  }
  token_losses step(inputs_t inputs, targets_t targets, extents_t extents,
                    launch how = launch{}) requires(launches&& takes_extents) {
    return self().run_step(step_who, inputs, targets, extents, how);
  }
  std::span<const double> evaluate(inputs_t inputs, targets_t targets,
                                   launch how = launch{}) requires(forward_launches) {
    return self().run_forward(evaluate_who, inputs, targets, {}, {}, how).losses;
  }
  token_losses evaluate(inputs_t inputs, targets_t targets, extents_t extents,
                        launch how = launch{}) requires(forward_launches&& takes_extents) {
    return self().run_forward(evaluate_who, inputs, targets, {}, extents, how);
  }
  void predict(inputs_t inputs, outputs_t outputs, launch how = launch{}) requires(forward_launches) {
    predict_rule();
    self().run_forward(predict_who, inputs, {}, outputs, {}, how);
  }
  void predict(inputs_t inputs, outputs_t outputs, extents_t extents,
               launch how = launch{}) requires(forward_launches&& takes_extents) {
    predict_rule();
    self().run_forward(predict_who, inputs, {}, outputs, extents, how);
  }
};

}  // namespace ctpipe::detail
