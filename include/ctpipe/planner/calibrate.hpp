// A model's layer times calibrated by a pipelined step that ran: each layer measured alone (one
// rank's full pass, measure_layers) misses what its stage costs in the pipeline, where a rank holds
// only its own layers' weights and activations and its caches see another sequence of calls. A
// step recorded with some split (record_steps, then stage_times) says what each of its stages
// really took; calibrate() scales every layer of a stage so that the stage's predicted forward and
// backward at the run's microbatch size are the measured ones, and the planner then balances the
// calibrated layers (docs/planner.md, "Calibrating by a recorded step").
//
//   const int first[] = {0, 15};                            // the run's stages' first layers
//   const auto times = ctpipe::stage_times(table, exec.recorded_step());
//   ctpipe::calibrate(layers, {first, times, 4.0});         // 4 samples a microbatch in that run
#pragma once

#include <cstddef>
#include <span>
#include <stdexcept>
#include <string>

#include <ctpipe/analysis/measured.hpp>  // stage_time
#include <ctpipe/planner/predict.hpp>    // detail::op_time
#include <ctpipe/planner/request.hpp>

namespace ctpipe {

/// A run the layers are calibrated by: each of its stages' first layer (the first 0, increasing,
/// each below the layer count; a stage runs up to the next one's first), each stage's measured
/// compute per microbatch (stage_times), and the run's microbatch size in samples.
struct calibration {
  std::span<const int> first;
  std::span<const stage_time> stages;
  double samples = 0.0;
};

#define CTPIPE_CALIBRATION_RULES(X)                                                              \
  X(ok, "")                                                                                      \
  X(samples, "a calibration's microbatch size must be more than 0 samples, and less than 1e18")  \
  X(stage_count, "a calibration needs one measured time for each stage, and at least one stage") \
  X(first_layers,                                                                                \
    "a calibration's stages' first layers must start at 0 and grow, each below the model's "     \
    "layer count")                                                                               \
  X(times, "a calibration's measured times must be numbers from 0 to 1e18 seconds")              \
  X(scale, "a calibration may scale a stage's layers by at most 1e18")

enum class calibration_rule {
#define CTPIPE_X(name, message) name,
  CTPIPE_CALIBRATION_RULES(CTPIPE_X)
#undef CTPIPE_X
};

/// The rule's words (what a tool prints, what calibrate() throws).
constexpr const char* calibration_message(calibration_rule r) {
  switch (r) {
#define CTPIPE_X(name, message) \
  case calibration_rule::name:  \
    return message;
    CTPIPE_CALIBRATION_RULES(CTPIPE_X)
#undef CTPIPE_X
  }
  return "";
}

/// The first rule of a calibration for `layer_count` layers that `c` breaks (ok: none).
constexpr calibration_rule check_calibration(std::size_t layer_count, const calibration& c) {
  if (!(c.samples > 0.0 && c.samples < 1e18)) return calibration_rule::samples;
  if (c.stages.empty() || c.stages.size() != c.first.size()) return calibration_rule::stage_count;
  for (std::size_t s = 0; s < c.first.size(); ++s)
    if ((s == 0 && c.first[0] != 0) || (s > 0 && c.first[s] <= c.first[s - 1]) ||
        static_cast<std::size_t>(c.first[s]) >= layer_count)
      return calibration_rule::first_layers;
  for (const stage_time& t : c.stages)
    if (!(t.forward >= 0.0 && t.forward < 1e18) || !(t.backward >= 0.0 && t.backward < 1e18))
      return calibration_rule::times;
  return calibration_rule::ok;
}

/// Scales each layer of each of `c`'s stages so that, at c.samples a microbatch, the stage's
/// forward (the sum of its layers' F) and its backward (the sum of their I and W) are the measured
/// ones: every op time of a layer, at every microbatch size, by its stage's factor (forward and
/// backward apart). A layer given by per-sample times and an overhead is first written as the same
/// line measured at c.samples and twice that (its B then counts its overhead in I and in W, as a
/// measured layer's does). A stage predicted at 0 for an op keeps it. Throws std::invalid_argument
/// (calibration_message), changing nothing, where `c` breaks a rule or would scale a stage by more
/// than 1e18.
constexpr void calibrate(std::span<layer_profile> layers, const calibration& c) {
  if (const calibration_rule r = check_calibration(layers.size(), c); r != calibration_rule::ok)
    throw std::invalid_argument(std::string("ctpipe::calibrate: ") + calibration_message(r));
  const double n = c.samples;
  const auto end_of = [&](std::size_t s) {
    return s + 1 < c.first.size() ? static_cast<std::size_t>(c.first[s + 1]) : layers.size();
  };
  // Each stage's factors first, so that a refused calibration changes nothing.
  for (std::size_t s = 0; s < c.first.size(); ++s) {
    double forward = 0.0, backward = 0.0;
    for (std::size_t k = static_cast<std::size_t>(c.first[s]); k < end_of(s); ++k) {
      forward += detail::op_time(layers[k], 0, n);
      backward += detail::op_time(layers[k], 1, n) + detail::op_time(layers[k], 2, n);
    }
    if (!(c.stages[s].forward <= 1e18 * forward || forward == 0.0) ||
        !(c.stages[s].backward <= 1e18 * backward || backward == 0.0))
      throw std::invalid_argument(std::string("ctpipe::calibrate: ") + calibration_message(calibration_rule::scale));
  }
  for (std::size_t s = 0; s < c.first.size(); ++s) {
    double forward = 0.0, backward = 0.0;
    for (std::size_t k = static_cast<std::size_t>(c.first[s]); k < end_of(s); ++k) {
      layer_profile& l = layers[k];
      if (l.timed <= 0) {  // the same line, at n and 2n (exact at n: the factors above hold)
        for (int j = 0; j < 2; ++j) {
          const double at = n * (j + 1);
          l.timings[static_cast<std::size_t>(j)] = {at, detail::op_time(l, 0, at), detail::op_time(l, 1, at),
                                                    detail::op_time(l, 2, at)};
        }
        l.timed = 2;
      }
      forward += detail::op_time(l, 0, n);
      backward += detail::op_time(l, 1, n) + detail::op_time(l, 2, n);
    }
    const double f = forward > 0.0 ? c.stages[s].forward / forward : 1.0;
    const double b = backward > 0.0 ? c.stages[s].backward / backward : 1.0;
    for (std::size_t k = static_cast<std::size_t>(c.first[s]); k < end_of(s); ++k)
      for (int j = 0; j < layers[k].timed; ++j) {
        op_timing& t = layers[k].timings[static_cast<std::size_t>(j)];
        t.forward *= f;
        t.backward_input *= b;
        t.backward_weight *= b;
      }
  }
}

}  // namespace ctpipe
