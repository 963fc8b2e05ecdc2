// PipeTransformer over MPI: the elastic trainer (ctpipe/elastic/trainer.hpp) with one process per
// device. At each freeze point of its elastic_plan the job runs that point's precomputed MPI
// executor (ctpipe/mpi/executor.hpp): process p runs pipeline rank p / D of replica p % D, with D =
// devices / the point's pipeline length. A switch moves the parameters to their new owners as
// messages: every layer still training is broadcast from the process that owned it (its rank's
// replica 0) to every process, with its ctpipe::optimizer state and update count, then the new
// point's executor is built (collective). (A stateful optimizer of the user's own keeps its state
// where it was: the new owner does not have it.)
//
//   using plan = ctpipe::elastic_plan<net, 4, 4, 8, std::array{0, 4, 6}>;   // mpirun -np 4
//   ctpipe::optimizer opt(model, ctpipe::sgd_momentum{.lr = 0.02});          // state moves with its layer
//   ctpipe::mpi::elastic_trainer<plan, loss, decltype(opt)> train(model, l, opt);
//   train.step(inputs, targets);   // every process passes the whole step's microbatches
//   train.end_epoch(ctpipe::geometric_freezing{0.3});
#pragma once

#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <ctpipe/detail/index.hpp>  // ix
#include <ctpipe/elastic/detail/trainer_state.hpp>
#include <ctpipe/elastic/plan.hpp>
#include <ctpipe/elastic/policy.hpp>
#include <ctpipe/exec/detail/face.hpp>
#include <ctpipe/exec/detail/run.hpp>            // with_index
#include <ctpipe/exec/detail/version_store.hpp>  // optimizes_layer
#include <ctpipe/format/measured.hpp>            // measured_trace
#include <ctpipe/make_table.hpp>
#include <ctpipe/mpi/errors.hpp>
#include <ctpipe/mpi/executor.hpp>
#include <ctpipe/mpi/grid.hpp>

namespace ctpipe::mpi {

/// The elastic trainer of ElasticPlan (an elastic_plan) over the processes of `comm`, which must number
/// ElasticPlan::devices. Guarantee (bitwise; tests/mpi/elastic.cpp): as ctpipe::elastic_trainer's — every
/// step equals a sequential run of each replica's microbatches on the step's weights, the replicas'
/// gradients summed in replica order (options::ordered_sums, always on here), and the layers not
/// frozen updated. The frozen prefix's output is not cached over MPI.
template <class ElasticPlan, class Loss, class Optimizer>
class elastic_trainer
    : public ctpipe::detail::trainer_state<ElasticPlan>,
      public ctpipe::detail::executor_face<elastic_trainer<ElasticPlan, Loss, Optimizer>,
                                           "ctpipe::mpi::elastic_trainer", typename ElasticPlan::model_t, Loss,
                                           ctpipe::detail::trainer_face> {
  using state = ctpipe::detail::trainer_state<ElasticPlan>;
  using state::model_, state::current_, state::record_, state::steps_;
  friend ctpipe::detail::executor_face<elastic_trainer, "ctpipe::mpi::elastic_trainer", typename ElasticPlan::model_t,
                                       Loss, ctpipe::detail::trainer_face>;

 public:
  using model_t = typename state::model_t;
  using input_type = typename state::input_type;
  using target_type = typename Loss::target_type;
  using output_type = typename model_t::output_type;
  using state::microbatches, state::layers, state::points, state::frozen;

  static_assert(ctpipe::detail::optimizer_requirements<model_t, Optimizer>::value);

  /// Collective. Refuses (launch_error, on every process) a communicator whose size is not the
  /// plan's devices: its freeze points' pipelines and replicas could not be formed.
  elastic_trainer(model_t& model, Loss& loss, Optimizer& opt, MPI_Comm comm = MPI_COMM_WORLD, options o = {})
      : state(model), loss_(loss), opt_(opt), comm_(comm), options_(o) {
    int n = 0;
    MPI_Comm_size(comm, &n);
    if (n != ElasticPlan::devices)
      throw launch_error("ctpipe::mpi::elastic_trainer: the elastic plan runs on " +
                         std::to_string(ElasticPlan::devices) + " processes (its devices), but the communicator has " +
                         std::to_string(n) + ": its pipelines and replicas cannot be formed on another process count");
    options_.ordered_sums = true;
    options_.replicas = 0;
    switch_to<0>(false);
  }
  elastic_trainer(const elastic_trainer&) = delete;
  elastic_trainer& operator=(const elastic_trainer&) = delete;

  // step, evaluate and predict (full-length microbatches): detail::executor_face, each
  // collective. Every process passes the whole step's `microbatches` inputs and targets (each
  // reads its replica's share) and gets the losses in microbatch order. evaluate runs forward
  // only, on the parameters as they are (each process's own stages'; mpi::executor::evaluate of
  // the current point); predict gives every microbatch's output on every process (each replica
  // predicts its share; one all-reduce of the outputs' bytes gives every process all).

  /// Collective: as ctpipe::elastic_trainer::freeze; a switch broadcasts the layers still training
  /// from their owners, then builds the new point's executor.
  void freeze(int count) {
    record_.check("ctpipe::mpi::elastic_trainer::freeze", count, frozen());
    const std::size_t k = ElasticPlan::point_for(count);
    if (k == current_) return;
    ctpipe::detail::with_index<ElasticPlan::count>(k, [&](auto i) { switch_to<decltype(i)::value>(true); });
  }

  /// Collective: as ctpipe::elastic_trainer::end_epoch; the gradient norms are summed over the
  /// processes first, so that every process asks its policy the same question.
  template <class Policy>
  int end_epoch(Policy&& policy) {
    MPI_Allreduce(MPI_IN_PLACE, record_.norms().data(), layers, MPI_DOUBLE, MPI_SUM, comm_);
    freeze(record_.ask(policy, frozen()));
    return frozen();
  }

  /// Collective: every process's model gets every layer's newest parameters (from its owner).
  void synchronize() { broadcast_active(); }

  /// Collective: records every task of the steps that follow on every process, at the current
  /// freeze point and the points it moves to, until record_steps(false), which keeps the last
  /// step's recording (mpi::executor::record_steps: gathered on process 0, on its clock).
  void record_steps(bool on) {
    recording_ = on;
    ctpipe::detail::with_index<ElasticPlan::count>(
        current_, [&](auto i) { std::get<decltype(i)::value>(execs_)->record_steps(on); });
  }
  /// On process 0: replica `replica`'s pipeline in the last recorded step of the current point,
  /// per rank, per position of the point's table (its 1F1B); empty elsewhere.
  const measured_step& recorded_step(int replica = 0) const {
    const measured_step* m = nullptr;
    ctpipe::detail::with_index<ElasticPlan::count>(
        current_, [&](auto i) { m = &std::get<decltype(i)::value>(execs_)->recorded_step(replica); });
    return *m;
  }
  /// On process 0: how far two processes' times in that recording may be off one another.
  double recorded_alignment_error() const {
    double e = 0.0;
    ctpipe::detail::with_index<ElasticPlan::count>(
        current_, [&](auto i) { e = std::get<decltype(i)::value>(execs_)->recorded_alignment_error(); });
    return e;
  }
  /// On process 0: compare_measured of that recording against the current point's table.
  step_comparison recorded_comparison(int replica = 0) const {
    step_comparison c;
    ctpipe::detail::with_index<ElasticPlan::count>(current_, [&](auto i) {
      c = compare_measured(point_executor<decltype(i)::value>::table, recorded_step(replica));
    });
    return c;
  }
  /// On process 0: every replica's recorded pipeline and its replay, as one Perfetto trace.
  std::string recorded_trace() const {
    std::string t;
    ctpipe::detail::with_index<ElasticPlan::count>(current_, [&](auto i) {
      constexpr std::size_t I = decltype(i)::value;
      std::vector<measured_step> all;
      for (int d = 0; d < point_executor<I>::pt.replicas; ++d) all.push_back(recorded_step(d));
      t = measured_trace(point_executor<I>::table, std::span<const measured_step>(all));
    });
    return t;
  }

 private:
  template <std::size_t I>
  struct point_executor {
    static constexpr elastic_point pt = ElasticPlan::points[I];
    static constexpr auto table = make_table<one_f_one_b(pt.ranks, pt.microbatches)>();
    static constexpr auto stages = ElasticPlan::template stages<I>;
    using type = executor<table, model_t, stages, Loss>;
  };
  template <class Seq>
  struct execs_of;
  template <std::size_t... I>
  struct execs_of<std::index_sequence<I...>> {
    using type = std::tuple<std::unique_ptr<typename point_executor<I>::type>...>;
  };
  using execs_t = typename execs_of<std::make_index_sequence<ElasticPlan::count>>::type;

  // Each layer still training goes from its owner at the current point (its rank's replica 0) to
  // every process. Frozen layers are the same everywhere already (broadcast when they froze).
  void broadcast_active() {
    ctpipe::detail::with_index<ElasticPlan::count>(current_, [&](auto i) {
      constexpr std::size_t I = decltype(i)::value;
      // (static: g++ 12 at -O0 gives a generic lambda that captures a constexpr local by reference
      // an uninitialised copy of it)
      static constexpr auto stages = ElasticPlan::template stages<I>;
      static constexpr elastic_point pt = ElasticPlan::points[I];
      [&]<std::size_t... K>(std::index_sequence<K...>) {
        (broadcast_layer<K>(static_cast<int>(K) < pt.frozen
                                ? -1
                                : process_of(stages.stage_of_layer(static_cast<int>(K)), 0, pt.replicas)),
         ...);
      }
      (std::make_index_sequence<model_t::size>{});
    });
  }
  // A layer's parameters and, for a ctpipe::optimizer, its state and update count: the new owner
  // goes on from where the old one stood.
  template <std::size_t K>
  void broadcast_layer(int root) {
    if constexpr (has_parameters<typename model_t::template layer_type<K>>) {
      if (root < 0) return;
      auto w = model_.template layer<K>().parameters();
      using T = typename decltype(w)::element_type;
      detail::check(MPI_Bcast(w.data(), static_cast<int>(w.size()), detail::datatype_of<T>(), root, comm_),
                    "MPI_Bcast");
      if constexpr (requires { opt_.template layer_state<K>(); }) {
        auto s = opt_.template layer_state<K>();
        using S = typename decltype(s)::element_type;
        detail::check(MPI_Bcast(s.data(), static_cast<int>(s.size()), detail::datatype_of<S>(), root, comm_),
                      "MPI_Bcast");
        std::uint64_t n = opt_.layer_updates(K);
        detail::check(MPI_Bcast(&n, 1, MPI_UINT64_T, root, comm_), "MPI_Bcast");
        opt_.set_layer_updates(K, n);
      }
    }
  }

  template <std::size_t I>
  void switch_to(bool move_parameters) {
    if (move_parameters) broadcast_active();  // from the old point's owners
    std::apply([](auto&... e) { (e.reset(), ...); }, execs_);
    std::get<I>(execs_) = std::make_unique<typename point_executor<I>::type>(model_, loss_, comm_, options_);
    if (recording_) std::get<I>(execs_)->record_steps(true);
    current_ = I;
  }

  token_losses run_step(const char* who, std::span<const input_type> inputs, std::span<const target_type> targets,
                        std::span<const int>) {
    ctpipe::detail::check_microbatches(who, inputs.size(), targets.size(), microbatches);
    ctpipe::detail::with_index<ElasticPlan::count>(current_,
                                                   [&](auto i) { step_at<decltype(i)::value>(inputs, targets); });
    return {{losses_.data(), losses_.size()}, {}};
  }
  token_losses run_forward(const char* who, std::span<const input_type> inputs, std::span<const target_type> targets,
                           std::span<output_type> outputs, std::span<const int>) {
    const bool predicting = targets.empty();
    ctpipe::detail::check_microbatches(who, inputs.size(), predicting ? outputs.size() : targets.size(), microbatches,
                                       predicting ? "outputs" : "targets");
    if (!predicting) {
      ctpipe::detail::with_index<ElasticPlan::count>(current_, [&](auto i) {
        auto& ex = *std::get<decltype(i)::value>(execs_);
        constexpr int m = point_executor<decltype(i)::value>::pt.microbatches;
        const auto first = ctpipe::detail::ix(ex.replica() * m);
        ex.set_context_origin({steps_, 0});
        const auto l = ex.evaluate(inputs.subspan(first, m), targets.subspan(first, m));
        std::copy(l.begin(), l.end(), eval_losses_.begin());
      });
      return {{eval_losses_.data(), eval_losses_.size()}, {}};
    }
    std::fill(outputs.begin(), outputs.end(), output_type{});
    ctpipe::detail::with_index<ElasticPlan::count>(current_, [&](auto i) {
      auto& ex = *std::get<decltype(i)::value>(execs_);
      constexpr int m = point_executor<decltype(i)::value>::pt.microbatches;
      const auto first = ctpipe::detail::ix(ex.replica() * m);
      ex.set_context_origin({steps_, 0});
      ex.predict(inputs.subspan(first, m), outputs.subspan(first, m));
    });
    // Each replica's share is on its processes, zeros elsewhere: OR gives everyone every share.
    const auto bytes = std::as_writable_bytes(outputs);
    constexpr std::size_t most = std::size_t{1} << 30;  // bytes per call: MPI counts in int
    for (std::size_t at = 0; at < bytes.size(); at += most)
      detail::check(MPI_Allreduce(MPI_IN_PLACE, bytes.data() + at, static_cast<int>(std::min(most, bytes.size() - at)),
                                  MPI_BYTE, MPI_BOR, comm_),
                    "MPI_Allreduce");
    return {};
  }
  template <std::size_t I>
  void step_at(std::span<const input_type> inputs, std::span<const target_type> targets) {
    auto& ex = *std::get<I>(execs_);
    static constexpr elastic_point pt = ElasticPlan::points[I];  // (static: as in broadcast_active)
    constexpr int m = pt.microbatches;
    const auto first = ctpipe::detail::ix(ex.replica() * m);
    ex.set_context_origin({steps_, 0});  // (the executor numbers each replica's microbatches globally)
    const auto l = ex.step(inputs.subspan(first, m), targets.subspan(first, m));
    ++steps_;
    std::copy(l.begin(), l.end(), losses_.begin());
    // This process's stage: its layers' summed gradients are here; every replica updates alike.
    static constexpr auto stages = ElasticPlan::template stages<I>;
    const int rank = ex.rank();
    const bool counts_norm = ex.replica() == 0;
    [&]<std::size_t... K>(std::index_sequence<K...>) {
      (update_layer<K>(stages.stage_of_layer(static_cast<int>(K)) == rank && static_cast<int>(K) >= pt.frozen,
                       counts_norm),
       ...);
    }
    (std::make_index_sequence<model_t::size>{});
  }
  template <std::size_t K>
  void update_layer(bool own, bool counts_norm) {
    if constexpr (has_parameters<typename model_t::template layer_type<K>>) {
      if (!own) return;
      auto& l = model_.template layer<K>();
      const auto g = l.gradients();
      if (counts_norm) {
        record_.add(K, g);
      }
      auto w = l.parameters();
      using T = typename decltype(w)::element_type;
      opt_(K, w, std::span<const T>(g.data(), g.size()));
    }
  }

  bool recording_ = false;  // record_steps: each point's executor records
  Loss& loss_;
  Optimizer& opt_;
  MPI_Comm comm_;
  options options_;
  execs_t execs_{};
  std::vector<double> losses_ = std::vector<double>(ctpipe::detail::ix(microbatches));
  std::vector<double> eval_losses_ = std::vector<double>(ctpipe::detail::ix(microbatches));
};

}  // namespace ctpipe::mpi
