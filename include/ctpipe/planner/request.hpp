// What the planner is asked: a model described layer by layer (costs per sample, memory), the
// devices and links it runs on, the global batch, and which plans to consider; and one plan, the
// choice it answers with. Plain constexpr types (no strings, no vectors): a request can be written
// in a static_assert.
#pragma once

#include <array>
#include <cstddef>
#include <span>
#include <string_view>

#include <ctpipe/schedule/detail/synthesis_greedy.hpp>  // synthesis_costs

namespace ctpipe {

/// A layer's times measured at one microbatch size: one whole call of each op, its fixed costs
/// included.
struct op_timing {
  double samples = 0.0;          // the microbatch's size
  double forward = 0.0;          // one forward call
  double backward_input = 0.0;   // one input-gradient call (I)
  double backward_weight = 0.0;  // one weight-gradient call (W)
};
inline constexpr int max_op_timings = 8;  // sizes a layer_profile holds

/// One layer's figures. Times are per sample (a microbatch of b samples costs b times as much, plus
/// `overhead` per op), or measured at several microbatch sizes (`timings`); bytes are per sample
/// except the parameters'.
struct layer_profile {
  double forward = 0.0;           // forward time per sample
  double backward_input = 0.0;    // input-gradient time per sample (I)
  double backward_weight = 0.0;   // weight-gradient time per sample (W); a full backward B = I + W
  double overhead = 0.0;          // a fixed time per op (F, B, I or W) of this layer: launches, small-batch loss
  double activation_bytes = 0.0;  // kept per sample from its forward to its backward
  double output_bytes = 0.0;      // its output per sample: what crosses a stage boundary after it
  double parameter_bytes = 0.0;   // its weights
  // Its op times measured at 1 to max_op_timings microbatch sizes, in increasing order of samples
  // (the first `timed` entries). When given, they stand for the per-sample times and the overhead
  // above: a size between two measured ones takes the line through them; beyond them, the line
  // through the nearest two goes on (one size: time in proportion to samples), never below 0.
  std::array<op_timing, max_op_timings> timings{};
  int timed = 0;
  // Its parameters are layer `shares_with`'s (an earlier layer: a head tied to the embedding); -1:
  // its own. A rank that holds both holds them once; two ranks that hold one each sum the shared
  // gradient (an all-reduce of two) before the replicas' all-reduce. Its parameter_bytes are the
  // shared ones.
  int shares_with = -1;
  // It also reads the output of the layer `skip` places before it (a residual: at least 2; the
  // model's input where that is before the first layer); 0: none. A tensor crosses from the stage
  // that makes it to the last stage that reads it: its bytes join the message of the stage that
  // makes it (the skip message goes out beside it), and their gradient the reader's.
  int skip = 0;
};

/// The devices and the links between them.
struct cluster_profile {
  int devices = 1;                    // pipeline ranks x data-parallel replicas must use all of them
  double memory_bytes = 0.0;          // per device; 0: unlimited
  double latency = 0.0;               // per message, pipeline and all-reduce alike
  double activation_bandwidth = 0.0;  // bytes per unit of time between pipeline neighbours; 0: free
  double allreduce_bandwidth = 0.0;   // bytes per unit of time of the data-parallel all-reduce; 0: free
  double reserved_bytes = 0.0;        // per device, kept out of the planner's reach (workspaces, fragmentation)
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
  dualpipe,     // two pipelines over mirrored copies of the ranks' stages (chunks: 1, the model's p stages)
  v_min,        // controllable memory (V placement): about a third of 1F1B's activations
  v_half,       // and a half
  synthesised,  // the Zero Bubble paper's heuristic for the plan's own stage costs and memory (one stage a rank)
};
inline constexpr int planned_schedule_count = 13;

/// The schedule's name as the explorer spells it.
constexpr std::string_view schedule_name_of(planned_schedule s) {
  constexpr std::array<std::string_view, planned_schedule_count> names{
      "gpipe", "1f1b",       "interleaved", "looped_bfs", "zb_h1",  "zb_h2",      "interleaved_zero_bubble",
      "zb_v",  "dualpipe_v", "dualpipe",    "v_min",      "v_half", "synthesised"};
  return names[static_cast<std::size_t>(s)];
}
/// Does the schedule take a chunk count (several loop-placed stages per rank)?
constexpr bool takes_chunks(planned_schedule s) {
  return s == planned_schedule::interleaved || s == planned_schedule::looped_bfs ||
         s == planned_schedule::interleaved_zero_bubble;
}
/// Does it place two stages on each rank in a V (rank r: stages r and 2p-1-r; chunks 2)?
constexpr bool v_placed(planned_schedule s) {
  return s == planned_schedule::zb_v || s == planned_schedule::dualpipe_v || s == planned_schedule::v_min ||
         s == planned_schedule::v_half;
}
/// Does it split the backward into I and W?
constexpr bool splits_backward(planned_schedule s) {
  return s == planned_schedule::zb_h1 || s == planned_schedule::zb_h2 ||
         s == planned_schedule::interleaved_zero_bubble || v_placed(s) || s == planned_schedule::dualpipe ||
         s == planned_schedule::synthesised;
}

/// A set of planned schedules.
struct schedule_set {
  unsigned bits = (1u << planned_schedule_count) - 1;  // all of them
  constexpr bool has(planned_schedule s) const { return (bits >> static_cast<int>(s)) & 1u; }
  constexpr schedule_set with(planned_schedule s) const { return {bits | (1u << static_cast<int>(s))}; }
  static constexpr schedule_set none() { return {0}; }
};

/// On one rank every schedule runs the microbatches one after the other: the same plan. The one
/// the planner forms there: 1F1B (it keeps one microbatch alive at a time) where the set has it,
/// else the set's first.
constexpr planned_schedule one_rank_schedule(schedule_set set) {
  if (set.has(planned_schedule::one_f_one_b)) return planned_schedule::one_f_one_b;
  for (int k = 0; k < planned_schedule_count; ++k)
    if (set.has(static_cast<planned_schedule>(k))) return static_cast<planned_schedule>(k);
  return planned_schedule::one_f_one_b;
}

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
  int ranks = 0;                          // only plans of this pipeline depth (0: every depth)
  int microbatches = 0;                   // only plans of this many microbatches per replica (0: every count)
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
  // A synthesised plan's inputs (planned_schedule::synthesised; the search fills them in from the
  // plan's stage costs and the devices' memory: with_synthesis_inputs): each stage's op costs in
  // whole units, and the activations a rank may hold.
  synthesis_costs costs{};
  int memory_limit = 0;
  friend constexpr bool operator==(const plan_choice&, const plan_choice&) = default;
};

}  // namespace ctpipe
