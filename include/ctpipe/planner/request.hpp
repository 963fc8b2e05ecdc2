// What the planner is asked: a model described layer by layer (costs per sample, memory), the
// devices and links it runs on, the global batch, and which plans to consider; and one plan, the
// choice it answers with. Plain constexpr types (no strings, no vectors): a request can be written
// in a static_assert.
#pragma once

#include <array>
#include <cstddef>
#include <span>
#include <string_view>

namespace ctpipe {

/// One layer's figures. Times are per sample (a microbatch of b samples costs b times as much, plus
/// `overhead` per op); bytes are per sample except the parameters'.
struct layer_profile {
  double forward = 0.0;           // forward time per sample
  double backward_input = 0.0;    // input-gradient time per sample (I)
  double backward_weight = 0.0;   // weight-gradient time per sample (W); a full backward B = I + W
  double overhead = 0.0;          // a fixed time per op (F, B, I or W) of this layer: launches, small-batch loss
  double activation_bytes = 0.0;  // kept per sample from its forward to its backward
  double output_bytes = 0.0;      // its output per sample: what crosses a stage boundary after it
  double parameter_bytes = 0.0;   // its weights
};

/// The devices and the links between them.
struct cluster_profile {
  int devices = 1;                    // pipeline ranks x data-parallel replicas must use all of them
  double memory_bytes = 0.0;          // per device; 0: unlimited
  double latency = 0.0;               // per message, pipeline and all-reduce alike
  double activation_bandwidth = 0.0;  // bytes per unit of time between pipeline neighbours; 0: free
  double allreduce_bandwidth = 0.0;   // bytes per unit of time of the data-parallel all-reduce; 0: free
};

/// The schedules the planner chooses among (every built-in schedule an executor runs; naive is
/// never better than gpipe).
enum class planned_schedule : int {
  gpipe,
  one_f_one_b,
  interleaved,
  looped_bfs,
  zb_h1,
  zb_h2,
  interleaved_zero_bubble,
  zb_v,
  dualpipe_v,
  dualpipe,  // two pipelines over mirrored copies of the ranks' stages (chunks: 1, the model's p stages)
};
inline constexpr int planned_schedule_count = 10;

/// The schedule's name as the explorer spells it.
constexpr std::string_view schedule_name_of(planned_schedule s) {
  constexpr std::array<std::string_view, planned_schedule_count> names{
      "gpipe", "1f1b",       "interleaved", "looped_bfs", "zb_h1", "zb_h2", "interleaved_zero_bubble",
      "zb_v",  "dualpipe_v", "dualpipe"};
  return names[static_cast<std::size_t>(s)];
}
/// Does the schedule take a chunk count (several loop-placed stages per rank)?
constexpr bool takes_chunks(planned_schedule s) {
  return s == planned_schedule::interleaved || s == planned_schedule::looped_bfs ||
         s == planned_schedule::interleaved_zero_bubble;
}
/// Does it split the backward into I and W?
constexpr bool splits_backward(planned_schedule s) {
  return s == planned_schedule::zb_h1 || s == planned_schedule::zb_h2 ||
         s == planned_schedule::interleaved_zero_bubble || s == planned_schedule::zb_v ||
         s == planned_schedule::dualpipe_v || s == planned_schedule::dualpipe;
}

/// A set of planned schedules.
struct schedule_set {
  unsigned bits = (1u << planned_schedule_count) - 1;  // all of them
  constexpr bool has(planned_schedule s) const { return (bits >> static_cast<int>(s)) & 1u; }
  constexpr schedule_set with(planned_schedule s) const { return {bits | (1u << static_cast<int>(s))}; }
  static constexpr schedule_set none() { return {0}; }
};

/// The question.
struct plan_request {
  std::span<const layer_profile> layers;
  cluster_profile cluster;
  int global_batch = 1;      // samples per step, over all replicas
  double input_bytes = 0.0;  // per sample, the model's input (what a recomputing first stage keeps)
  // Bytes a device holds per byte of its parameters: weights, gradients and optimizer state
  // (4: weights, gradients and Adam's two moments at one precision).
  double state_factor = 4.0;
  // Work that differs per microbatch: microbatch i's compute costs factor[i % size] times the
  // figures above (empty: all alike).
  std::span<const double> microbatch_factors{};
  schedule_set schedules{};
  int max_microbatches = 256;             // per replica and step
  int max_chunks = 4;                     // for the schedules that take chunks
  long long max_table_tasks = 1LL << 24;  // plans with larger tables are counted, not simulated
  bool recompute = true;                  // also consider recomputing activations (schedules without split backward)
  int keep = 5;                           // plans to list, at most plan_list_size
};

/// One plan: the schedule and its sizes. The stage split is not a free choice: the layers are
/// balanced over the ranks x chunks stages by time per microbatch (stage_split).
struct plan_choice {
  planned_schedule schedule = planned_schedule::one_f_one_b;
  int ranks = 1;         // pipeline depth
  int replicas = 1;      // data-parallel width
  int microbatches = 1;  // per replica and step
  int chunks = 1;        // stages per rank
  bool recompute = false;
  friend constexpr bool operator==(const plan_choice&, const plan_choice&) = default;
};

}  // namespace ctpipe
