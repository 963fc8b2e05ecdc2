// What every executor requires of its table, model and stage plan, checked at compile time in one
// place with one wording. The executor that was instantiated is the first template argument of
// executor_requirements in the compiler's "required from" lines.
#pragma once

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include <ctpipe/analysis/check.hpp>
#include <ctpipe/detail/index.hpp>              // ix
#include <ctpipe/exec/detail/graph_stages.hpp>  // graph_stage_types
#include <ctpipe/exec/detail/stages.hpp>        // stage_types
#include <ctpipe/exec/plan.hpp>
#include <ctpipe/model/crossings.hpp>  // model_crossings
#include <ctpipe/model/layer.hpp>
#include <ctpipe/model/model.hpp>
#include <ctpipe/model/partition.hpp>  // stage_plan
#include <ctpipe/model/shared_parameters.hpp>

namespace ctpipe::detail {

/// The kind of layers an executor runs: host layers (forward(x, y) on host tensors), or device
/// layers (forward(const ctpipe::cuda::context&, x, y) on device tensors: ctpipe/cuda/layer.hpp).
enum class layer_kind : unsigned char { host, device };

/// What an executor tells the rules below about itself. Each executor defines such a type (its tag;
/// the rules know none of them), whose name shows in the compiler's "required from" lines:
///   static constexpr std::string_view name;  the first words of its run-time messages
///   static constexpr layer_kind layers;      the layers it runs
///   static constexpr bool frozen_prefix;     it runs a stage plan that starts past layer 0
///   static constexpr bool recompute;         it runs stages that recompute their forward
///   static constexpr bool copies_layers;     it keeps copies of its layers (one per weight version)
///   static constexpr bool sends_bytes;       it sends the tensors that cross a stage boundary as bytes
///   static constexpr bool graphs;            it runs models that are not chains (and tables with crossings)
///   static constexpr bool shared_parameters; it runs models whose layers share parameters (ctpipe::shared_with)
///   static constexpr bool bidirectional;     it runs bidirectional tables (dualpipe: two pipelines over mirrored
///                                            copies of the stages)
///   static constexpr bool mirror_copies;     for those, it keeps a copy of the layers (the mirrors share a process)
template <class Tag>
concept executor_tag = requires {
  { Tag::name } -> std::convertible_to<std::string_view>;
  { Tag::layers } -> std::convertible_to<layer_kind>;
  { Tag::frozen_prefix } -> std::convertible_to<bool>;
  { Tag::recompute } -> std::convertible_to<bool>;
  { Tag::copies_layers } -> std::convertible_to<bool>;
  { Tag::sends_bytes } -> std::convertible_to<bool>;
  { Tag::graphs } -> std::convertible_to<bool>;
  { Tag::shared_parameters } -> std::convertible_to<bool>;
  { Tag::bidirectional } -> std::convertible_to<bool>;
  { Tag::mirror_copies } -> std::convertible_to<bool>;
};

template <auto Table>
consteval bool has_comm_ops() {
  for (int r = 0; r < Table.ranks(); ++r)
    for (const task& x : Table.program(r))
      if (comm_op[static_cast<int>(x.op)]) return true;
  return false;
}
// The plan verifies the compute order (it lowers the table anew); a table that brings its own sends
// and receives must place them correctly too: a wrong one is still a bug.
template <auto Table>
consteval bool check_comm() {
  if constexpr (has_comm_ops<Table>())
    return check<Table>();
  else
    return true;
}

// The stage plan's rules, each once: its stage count is the table's; it covers the model's layers
// from its first stage's first layer to the last layer; no stage is empty.
template <class Model, int StageCount, auto Stages>
consteval bool stage_count_fits() {
  return Stages.stages() == StageCount;
}
// The stage count rule with its two numbers alone as arguments, so that the compiler's message
// shows them (and not the whole table, as it does for executor_requirements).
template <int PlanStages, int TableStages>
struct stage_counts {
  static_assert(PlanStages == TableStages,
                "ctpipe executor: the stage plan must have as many stages as the table's pipeline (ranks x chunks; "
                "dualpipe: ranks, which its two pipelines run in mirrored order): stage_counts<the plan's stages, the "
                "table's> says how many each has");
  static constexpr bool value = true;  // (the assert above has spoken)
};
template <class Model, auto Stages>
consteval bool stages_cover() {
  return Stages.first[0] >= 0 && Stages.first[detail::ix(Stages.stages())] == static_cast<int>(Model::size);
}
template <auto Stages>
consteval bool stages_not_empty() {
  for (int s = 0; s < Stages.stages(); ++s)
    if (Stages.layers(s) < 1) return false;
  return true;
}
template <class Model, int StageCount, auto Stages>
consteval bool stages_fit() {
  return stage_count_fits<Model, StageCount, Stages>() && stages_cover<Model, Stages>() && stages_not_empty<Stages>();
}

/// The stage plan an executor builds on: Stages itself where it keeps the rules above, else a
/// stand-in of the table's stage count that the engines can build, so that a plan refused by
/// executor_requirements (or by partition) stops at its rule's message and no cascade follows.
template <class Model, int StageCount, auto Stages>
consteval stage_plan<detail::ix(StageCount)> usable_stages() {
  stage_plan<detail::ix(StageCount)> p{};
  if constexpr (stages_fit<Model, StageCount, Stages>()) {
    p.first = Stages.first;
    p.recompute = Stages.recompute;
    p.cost = Stages.cost;
    p.max_stage_cost = Stages.max_stage_cost;
    p.frozen_cost = Stages.frozen_cost;
  } else {
    const int layers = static_cast<int>(Model::size);
    for (int s = 0; s < StageCount; ++s) p.first[detail::ix(s)] = s < layers ? s : layers;
    p.first[detail::ix(StageCount)] = layers;
  }
  return p;
}

// The table's crossings are the model's under the stage plan (from and to; the bytes are the
// analysis's business).
template <class Model, auto Stages, int StageCount, auto Table>
consteval bool crossings_fit() {
  if constexpr (!stages_fit<Model, StageCount, Stages>()) {
    return true;
  } else {
    constexpr auto want = model_crossings<Model, Stages>();
    constexpr auto have = listed_crossings<Table>();
    if constexpr (want.size() != have.size()) {
      return false;
    } else {
      std::size_t k = 0;
      for (const crossing& c : want) {
        if (c.from != have[k].from || c.to != have[k].to) return false;
        ++k;
      }
      return true;
    }
  }
}

/// True where every stage of an execution plan runs its backward ops in microbatch order.
template <class ExecutionPlan>
constexpr bool backward_in_order(const ExecutionPlan& plan) {
  return std::ranges::all_of(plan.backward_in_order, [](bool b) { return b; });
}

template <class Model, template <class> class Test>
consteval bool every_layer() {
  return []<std::size_t... K>(std::index_sequence<K...>) {
    return (Test<typename Model::template layer_type<K>>::value && ...);
  }
  (std::make_index_sequence<Model::size>{});
}
template <class L>
struct is_host_layer : std::bool_constant<layer<L>> {};
template <class L>
struct is_device_layer : std::bool_constant<device_layer_traits<L>::valid> {};
template <class L>
struct is_copyable_layer : std::bool_constant<std::copyable<L>> {};

// (Where the stage plan or a layer breaks its rule, these say nothing more: that rule's message is
// the one error.)
// What crosses a stage boundary: a chain's boundary tensors; a graph's messages between any two
// stages, each way (each a bundle of the tensors it carries).
template <class Model, auto Stages, int StageCount>
consteval bool boundaries_trivially_copyable() {
  if constexpr (!stages_fit<Model, StageCount, Stages>()) {
    return true;
  } else if constexpr (Model::is_chain || StageCount < 2) {
    return []<std::size_t... B>(std::index_sequence<B...>) {
      return (std::is_trivially_copyable_v<
                  typename stage_types<Model, Stages>::template boundary_tensor<static_cast<int>(B)>> &&
              ...);
    }
    (std::make_index_sequence<detail::ix(StageCount > 1 ? StageCount - 1 : 0)>{});
  } else {
    using g = graph_stage_types<Model, Stages>;
    constexpr int n = StageCount;
    return []<std::size_t... P>(std::index_sequence<P...>) {
      // Pair P = a x n + b, for every a < b.
      constexpr auto fits = []<std::size_t Q>(std::integral_constant<std::size_t, Q>) {
        constexpr int a = static_cast<int>(Q) / n, b = static_cast<int>(Q) % n;
        if constexpr (a >= b)
          return true;
        else
          return std::is_trivially_copyable_v<typename g::template message_t<a, b>> &&
                 std::is_trivially_copyable_v<typename g::template gradient_t<b, a>>;
      };
      return (fits(std::integral_constant<std::size_t, P>{}) && ...);
    }
    (std::make_index_sequence<detail::ix(n * n)>{});
  }
}
template <class Model, class Loss>
consteval bool views_trivially_copyable() {
  if constexpr (requires { typename Loss::target_type; })
    return std::is_trivially_copyable_v<typename Model::input_type> &&
           std::is_trivially_copyable_v<typename Loss::target_type>;
  else
    return true;
}

/// Whether every layer of Model takes and gives one tensor (no ctpipe::tensors of several parts):
/// what the device executors need of a bidirectional table's model.
template <class Model>
consteval bool one_tensor_each() {
  return []<std::size_t... K>(std::index_sequence<K...>) {
    return parts_v<typename Model::input_type> == 1 &&
           ((parts_v<typename Model::template layer_type<K>::input_type> == 1 &&
             parts_v<typename Model::template layer_type<K>::output_type> == 1) &&
            ...);
  }
  (std::make_index_sequence<Model::size>{});
}

/// Whether an executor runs a bidirectional Table's two chains as such (dualpipe). Where a rule
/// below refuses it, the executor builds as if the table were one chain over a stand-in stage plan,
/// so that the rule's message is the only one.
template <class Tag, auto Table, class Model, auto Stages>
consteval bool runs_chains() {
  if constexpr (directions_of(Table) != 2)
    return false;
  else
    return Tag::bidirectional && Model::is_chain && !has_shared_parameters_v<Model> && Stages.first[0] == 0 &&
           (!Tag::mirror_copies || every_layer<Model, is_copyable_layer>()) &&
           (Tag::layers == layer_kind::host || one_tensor_each<Model>());
}

/// Instantiated by every executor: Tag says what it is (executor_tag), Stages is the stage plan of
/// Model (Stages itself, as the user gave it), Loss the loss after the last layer; StageCount and
/// InOrder come from make_execution_plan<Table>() (the stages of one of its chains: all its stages,
/// or half of a bidirectional table's, and backward_in_order of it). Each rule is written here
/// once, for every executor. The execution plan itself is no argument: the compiler would print
/// all of it with each message.
template <executor_tag Tag, auto Table, class Model, auto Stages, int StageCount, bool InOrder, class Loss>
struct executor_requirements {
  static constexpr int stage_count = StageCount;
  static constexpr bool host = Tag::layers == layer_kind::host;
  static constexpr bool mirrored = directions_of(Table) == 2;
  static_assert(check_comm<Table>(), "ctpipe executor: the table does not verify (see the error above)");
  static_assert(!forward_only_of(Table),
                "ctpipe executor: the table is forward only (schedule_info::forward_only): an executor trains with a "
                "training table, and its evaluate() and predict() run that table's forward-only table");
  static_assert(!mirrored || Tag::bidirectional,
                "ctpipe executor: this executor does not run bidirectional tables (dualpipe): run them on "
                "ctpipe::host_executor, ctpipe::mpi::executor (host or device layers), ctpipe::cuda::executor or "
                "ctpipe::nccl::executor, or run dualpipe_v");
  static_assert(!mirrored || !Tag::bidirectional || Model::is_chain,
                "ctpipe executor: a bidirectional table (dualpipe) runs models that are chains so far (no "
                "ctpipe::node with sources)");
  static_assert(!mirrored || !Tag::bidirectional || !has_shared_parameters_v<Model>,
                "ctpipe executor: a bidirectional table (dualpipe) does not run a model whose layers share "
                "parameters (ctpipe::shared_with) yet");
  static constexpr bool mirrors_fit = !mirrored || !Tag::bidirectional || host || !Model::is_chain ||
                                      one_tensor_each<Model>();  // (one name: a short note from the compiler)
  static_assert(mirrors_fit,
                "ctpipe executor: a bidirectional table (dualpipe) runs on the device executors models whose layers "
                "each take and give one tensor so far (no ctpipe::tensors)");
  static_assert(!mirrored || !Tag::bidirectional || !Tag::mirror_copies || every_layer<Model, is_copyable_layer>(),
                "ctpipe executor: every layer must be copyable to run a bidirectional table (dualpipe) on threads: "
                "the executor keeps a copy of the layers for the second pipeline");
  static constexpr bool refused_mirror = mirrored && !runs_chains<Tag, Table, Model, Stages>();
  static_assert(stage_counts < refused_mirror ? 0 : Stages.stages(), refused_mirror ? 0 : stage_count > ::value);
  static_assert(!stage_count_fits<Model, stage_count, Stages>() || stages_cover<Model, Stages>(),
                "ctpipe executor: the stage plan must cover the model's layers, from its first stage's first layer to "
                "the number of layers");
  static_assert(Stages.refused || !stage_count_fits<Model, stage_count, Stages>() || !stages_cover<Model, Stages>() ||
                    stages_not_empty<Stages>(),
                "ctpipe executor: every stage of the stage plan must hold at least one layer");
  static_assert(Stages.first[0] == 0 || !mirrored,
                "ctpipe executor: a bidirectional table (dualpipe) cannot freeze a prefix of layers (freeze_partition) "
                "yet");
  static_assert(Stages.first[0] == 0 || Tag::frozen_prefix,
                "ctpipe executor: a stage plan that starts past layer 0 (a frozen prefix: freeze_partition) runs on "
                "the executors of host layers only (host_executor, async_executor, mpi::executor)");
  static_assert(Tag::recompute || std::ranges::none_of(Stages.recompute, [](bool b) { return b; }),
                "ctpipe executor: Stages: recomputation is not supported by the device executors yet");
  static_assert(InOrder,
                "ctpipe executor: every stage must run its backward ops in microbatch order, so that gradients "
                "accumulate in microbatch order and a step is deterministic");
  static_assert(Model::is_chain || Tag::graphs,
                "ctpipe executor: the model is not a chain (a node reads other than the previous layer's whole output: "
                "a skip connection or several sources); this executor runs chains so far: ctpipe::host_executor, "
                "ctpipe::async_executor, ctpipe::mpi::executor, ctpipe::cuda::executor and ctpipe::sequential_step "
                "run any model");
  static_assert(Model::is_chain || !Tag::graphs || Stages.first[0] == 0,
                "ctpipe executor: a model that is not a chain cannot freeze a prefix of layers (freeze_partition) yet");
  static_assert(!Tag::graphs || !stage_count_fits<Model, stage_count, Stages>() ||
                    crossings_fit<Model, Stages, stage_count, Table>(),
                "ctpipe executor: the table's crossings must be the model's under the stage plan: build the table "
                "with make_table<schedule, ctpipe::model_crossings<Model, Stages>()>() (a table without them has no "
                "skip messages for the tensors that skip stages)");
  static_assert(Tag::graphs || listed_crossings<Table>().empty(),
                "ctpipe executor: tables with crossings (skip messages between stages that are not neighbours) run on "
                "the executors of graph models so far (host, asynchronous, MPI of host layers, CUDA)");
  static_assert(!has_shared_parameters_v<Model> || Tag::shared_parameters,
                "ctpipe executor: the model's layers share parameters (ctpipe::shared_with), which the asynchronous "
                "executor does not run: its stages update at different times, so the members' gradients of one update "
                "never meet (every other executor, and ctpipe::sequential_step, runs them)");
  static_assert(!has_shared_parameters_v<Model> || Stages.first[0] == 0,
                "ctpipe executor: a model whose layers share parameters (ctpipe::shared_with) cannot freeze a prefix "
                "of layers (freeze_partition) yet");
  // (A model that broke one of its own rules has said so, once, and holds stand-ins for its layers:
  // no layer rule here speaks of it again.)
  static constexpr bool layers_fit =
      Model::checked && (host ? every_layer<Model, is_host_layer>() : every_layer<Model, is_device_layer>());
  static_assert(!Model::checked || !host || layers_fit,
                "ctpipe executor: every layer must be a host layer (forward(x, y), backward(x, y, dy, dx)) on this "
                "executor; device layers run on ctpipe::cuda::executor, ctpipe::nccl::executor and "
                "ctpipe::mpi::device_executor");
  static_assert(!Model::checked || host || layers_fit,
                "ctpipe executor: every layer must be a device layer (forward(const ctpipe::cuda::context&, x, y) on "
                "device tensors) on this executor; host layers run on ctpipe::host_executor, ctpipe::async_executor "
                "and ctpipe::mpi::executor");
  static_assert(!layers_fit || !Tag::copies_layers || every_layer<Model, is_copyable_layer>(),
                "ctpipe executor: every layer must be copyable: this executor keeps copies of its layers, one per "
                "weight version");
  static_assert(!layers_fit || !host || loss_function<Loss, typename Model::output_type>,
                "ctpipe executor: Loss must have a target_type and double operator()(const output_type& y, const "
                "target_type& t, output_type& dy) (a const ctpipe::context& may come first)");
  static_assert(!layers_fit || host || device_loss_traits<Loss, typename Model::output_type>::valid,
                "ctpipe executor: Loss must have a target_type and void operator()(const ctpipe::cuda::context&, const "
                "output_type& y, const target_type& t, output_type& dy, double* loss)");
  static_assert(!layers_fit || host || views_trivially_copyable<Model, Loss>(),
                "ctpipe executor: input_type and target_type must be trivially copyable views of device memory");
  static_assert(!layers_fit || !Tag::sends_bytes || boundaries_trivially_copyable<Model, Stages, stage_count>(),
                "ctpipe executor: a tensor that crosses a stage boundary must be trivially copyable (it is sent as "
                "bytes)");
  static constexpr bool value = true;
};

/// The run-time check of a step's arguments, with one wording: `call` is "ctpipe::host_executor::step".
/// `second`: what the call names its other span (targets; predict's outputs).
inline void check_microbatches(std::string_view call, std::size_t inputs, std::size_t targets, int microbatches,
                               std::string_view second = "targets") {
  if (inputs != detail::ix(microbatches) || targets != detail::ix(microbatches))
    throw std::invalid_argument(std::string(call) + ": inputs (" + std::to_string(inputs) + ") and " +
                                std::string(second) + " (" + std::to_string(targets) + ") must each hold " +
                                std::to_string(microbatches) + " microbatches, as the table does");
}

}  // namespace ctpipe::detail
