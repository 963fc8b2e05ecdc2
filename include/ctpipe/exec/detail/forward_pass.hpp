// The forward-only pass of the host-thread executors (evaluate, predict): a forward-only table's
// own plan, buffers and rank threads, made at the first pass, computing with the model's layers as
// they are. The training engine's buffers and channels are sized for the training table; a
// forward-only order may hold more messages in flight (an interleaved rank runs ahead through all
// its first chunk's microbatches), so the pass has its own, proved for its table.
#pragma once

#include <algorithm>
#include <memory>
#include <span>

#include <ctpipe/config.hpp>        // CTPIPE_NTTP_TYPE
#include <ctpipe/detail/index.hpp>  // ix
#include <ctpipe/exec/core.hpp>
#include <ctpipe/exec/detail/host_engine.hpp>
#include <ctpipe/exec/detail/rank_threads.hpp>
#include <ctpipe/model/extent.hpp>

namespace ctpipe::detail {

// ForwardTable: a forward-only table (make_forward_table) over Model split by Stages (of
// ModelStages stages: one chain's), run as Tag's executor runs its rank programs.
template <class Tag, auto ForwardTable, model_type Model, auto Stages, class Loss, int ModelStages, dispatch Dispatch>
class forward_pass {
  static_assert(ForwardTable.params.forward_only, "ctpipe: a forward pass runs a forward-only table");
  static constexpr auto plan = make_execution_plan<ForwardTable>();
  static constexpr int ranks = static_cast<int>(CTPIPE_NTTP_TYPE(plan.table)::static_ranks);
  using engine_t = engine<Tag, Model, Stages, Loss, stage_layout_of(plan, ModelStages)>;
  static constexpr dispatch strategy =
      resolve_dispatch(Dispatch, detail::ix(*std::ranges::max_element(plan.table.length)), automatic_unroll_limit);
  template <int R>
  static constexpr auto program = make_rank_program<plan, R>();

 public:
  using input_type = typename Model::input_type;
  using output_type = typename Model::output_type;
  using target_type = typename Loss::target_type;

  // One pass over `inputs`, with the layers' context at `origin`: evaluation where `targets` is
  // not empty (the losses), prediction where it is (each output into `outputs`, zeroed first).
  // `who` names the call in its errors. Rank 0 runs on the calling thread.
  token_losses run(Model& model, Loss& loss, const char* who, std::span<const input_type> inputs,
                   std::span<const target_type> targets, std::span<output_type> outputs, std::span<const int> extents,
                   step_origin origin) {
    const bool predicting = targets.empty();
    check_microbatches(who, inputs.size(), predicting ? outputs.size() : targets.size(), plan.table.microbatches(),
                       predicting ? "outputs" : "targets");
    check_extents(who, extents, inputs.size(), Model::token_capacity);
    if (!en_) {
      en_ = std::make_unique<running_t>(model, loss);
      en_->start([this]<int R>() { this->template run_rank<R>(); });
    }
    engine_t& en = **en_;
    en.set_context_origin(origin);
    std::fill(outputs.begin(), outputs.end(), output_type{});
    en.set_outputs(predicting ? outputs.data() : nullptr);
    en.begin_step(inputs, targets, true, true, extents.empty() ? nullptr : extents.data());
    run_rank<0>();
    const std::span<const double> losses = en.end_step();
    return {losses, en.tokens()};
  }

 private:
  template <int R>
  struct runner {
    engine_t& en;
    template <task_code C, class A>
    void run(const A& a, std::size_t) {
      en.template run_task<R, C.op, C.stage, C.other>(a);
    }
  };
  template <int R>
  void run_rank() noexcept {
    try {
      engine_t& en = **en_;
      en.template begin_rank<R>();
      run_program<program<R>, strategy>(runner<R>{en});
    } catch (const aborted&) {
    }
  }

  using running_t = running_engine<engine_t, ranks>;
  std::unique_ptr<running_t> en_;
};

}  // namespace ctpipe::detail
