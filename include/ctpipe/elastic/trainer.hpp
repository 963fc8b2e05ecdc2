// PipeTransformer on host threads: an elastic trainer that freezes a growing prefix of layers and,
// at each freeze point of its elastic_plan (plan.hpp), runs the point's precomputed pipeline: the
// active layers re-partitioned over fewer ranks, the freed devices as more data-parallel replicas.
//
//   using plan = ctpipe::elastic_plan<net, 4, 4, 8, std::array{0, 4, 6}>;   // 4 devices, 4 stages, m = 8
//   ctpipe::elastic_trainer<plan, loss, ctpipe::sgd> train(model, loss, opt);
//   for (epoch ...) { for (step ...) train.step(inputs, targets); train.end_epoch(ctpipe::geometric_freezing{0.2}); }
//
// A step runs every replica's pipeline (replica d takes microbatches [d*m/D, (d+1)*m/D)), sums the
// replicas' gradients in replica order into replica 0's model (the user's), calls the optimizer on
// the active layers, and copies their parameters to the other replicas. Switching (freeze) ends
// the old point's threads and starts the new one's, on the same model: on threads the layers do not
// move (a pointer is all an owner needs); replica copies are made from the user's model. Nothing is
// allocated per step (after the first epoch where the prefix cache is filled).
#pragma once

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include <ctpipe/detail/index.hpp>  // ix
#include <ctpipe/elastic/detail/trainer_state.hpp>
#include <ctpipe/elastic/plan.hpp>
#include <ctpipe/elastic/policy.hpp>
#include <ctpipe/exec/detail/face.hpp>
#include <ctpipe/exec/detail/run.hpp>            // with_index
#include <ctpipe/exec/detail/version_store.hpp>  // layer_optimizer
#include <ctpipe/exec/failure.hpp>
#include <ctpipe/exec/host.hpp>
#include <ctpipe/format/measured.hpp>  // measured_trace
#include <ctpipe/make_table.hpp>

namespace ctpipe {

namespace detail {

// Threads 1..n-1 that run job(d) for replica d while the caller runs job(0); the first failure (by
// replica) is rethrown. No allocation per run: the job is a function pointer and a context.
class replica_pool {
 public:
  explicit replica_pool(int workers) : errors_(detail::ix(workers)) {
    threads_.reserve(detail::ix(workers > 0 ? workers - 1 : 0));
    for (int d = 1; d < workers; ++d) threads_.emplace_back([this, d] { work(d); });
  }
  replica_pool(const replica_pool&) = delete;
  replica_pool& operator=(const replica_pool&) = delete;
  ~replica_pool() {
    stopping_.store(true, std::memory_order_release);
    epoch_.fetch_add(1, std::memory_order_release);
    epoch_.notify_all();
    for (auto& t : threads_) t.join();
  }
  // Runs fn(ctx, d) for d in [0, n): d = 0 on the caller. Rethrows the first replica's failure.
  void run(void (*fn)(void*, int), void* ctx, int n) {
    fn_ = fn;
    ctx_ = ctx;
    n_ = n;
    done_.store(0, std::memory_order_relaxed);
    for (auto& e : errors_) e = nullptr;
    epoch_.fetch_add(1, std::memory_order_release);
    epoch_.notify_all();
    one(0);
    const auto workers = static_cast<std::uint32_t>(threads_.size());
    for (std::uint32_t d = done_.load(std::memory_order_acquire); d != workers;
         d = done_.load(std::memory_order_acquire))
      done_.wait(d, std::memory_order_acquire);
    for (auto& e : errors_)
      if (e) std::rethrow_exception(e);
  }

 private:
  void one(int d) {
    if (d >= n_) return;
    try {
      fn_(ctx_, d);
    } catch (...) {
      errors_[detail::ix(d)] = std::current_exception();
    }
  }
  void work(int d) {
    std::uint32_t seen = 0;
    for (;;) {
      for (std::uint32_t e = epoch_.load(std::memory_order_acquire); e == seen;
           e = epoch_.load(std::memory_order_acquire))
        epoch_.wait(e, std::memory_order_acquire);
      seen = epoch_.load(std::memory_order_acquire);
      if (stopping_.load(std::memory_order_acquire)) return;
      one(d);
      done_.fetch_add(1, std::memory_order_acq_rel);
      done_.notify_one();
    }
  }
  std::vector<std::thread> threads_;
  std::vector<std::exception_ptr> errors_;
  std::atomic<std::uint32_t> epoch_{0}, done_{0};
  std::atomic<bool> stopping_{false};
  void (*fn_)(void*, int) = nullptr;
  void* ctx_ = nullptr;
  int n_ = 0;
};

}  // namespace detail

/// Trains ElasticPlan::model_t (an elastic_plan's model) with loss Loss, calling Optimizer
/// (opt(layer, parameters, gradients), as ctpipe::sgd) on the active layers once per step.
///
/// Guarantee (bitwise; tests/exec/elastic.cpp): every step equals a sequential run that computes
/// each replica's microbatches in order on the step's weights, sums the replicas' gradients in
/// replica order, and updates the layers not frozen at that step.
template <class ElasticPlan, class Loss, class Optimizer>
class elastic_trainer
    : public detail::trainer_state<ElasticPlan>,
      public detail::executor_face<elastic_trainer<ElasticPlan, Loss, Optimizer>, "ctpipe::elastic_trainer",
                                   typename ElasticPlan::model_t, Loss, detail::trainer_face> {
  using state = detail::trainer_state<ElasticPlan>;
  using state::model_, state::current_, state::record_, state::steps_;
  friend detail::executor_face<elastic_trainer, "ctpipe::elastic_trainer", typename ElasticPlan::model_t, Loss,
                               detail::trainer_face>;

 public:
  using model_t = typename state::model_t;
  using input_type = typename state::input_type;
  using target_type = typename Loss::target_type;
  using output_type = typename model_t::output_type;
  using state::microbatches, state::layers, state::points, state::frozen;

  // (The layers' rules are the host executor's, which each freeze point instantiates.)
  static_assert(detail::optimizer_requirements<model_t, Optimizer>::value);

  /// Starts at freeze point 0 (nothing frozen). The model, loss and optimizer must outlive the trainer.
  elastic_trainer(model_t& model, Loss& loss, Optimizer& opt)
      : state(model), loss_(loss), opt_(opt), pool_(max_replicas()) {
    switch_to<0>();
  }
  elastic_trainer(const elastic_trainer&) = delete;
  elastic_trainer& operator=(const elastic_trainer&) = delete;

  /// One step of `microbatches` microbatches over every replica of the current point, then one
  /// update of the active layers. `samples` (optional, one id per microbatch): where the same id
  /// comes again (the next epoch), the frozen prefix's output for it is taken from a cache instead
  /// of being computed (the cache holds one tensor per id; a switch empties it). Returns the
  /// losses in microbatch order. A failing task throws task_failure naming the replica, rank, stage
  /// and microbatch (of this step); the model keeps the weights from before the step.
  std::span<const double> step(std::span<const input_type> inputs, std::span<const target_type> targets,
                               std::span<const std::size_t> samples = {}) {
    detail::check_microbatches("ctpipe::elastic_trainer::step", inputs.size(), targets.size(), microbatches);
    if (!samples.empty() && samples.size() != detail::ix(microbatches))
      throw std::invalid_argument("ctpipe::elastic_trainer::step: samples (" + std::to_string(samples.size()) +
                                  ") must be empty or hold one id per microbatch (" + std::to_string(microbatches) +
                                  ")");
    detail::with_index<ElasticPlan::count>(current_,
                                           [&](auto i) { run_step<decltype(i)::value>(inputs, targets, samples); });
    return {losses_.data(), losses_.size()};
  }

  // evaluate and predict: detail::executor_face (full-length microbatches). Each replica of the
  // current point runs its share through its executor's forward-only pass
  // (host_executor::evaluate; the frozen prefix computed, not cached), on the model's parameters
  // as they are; the losses or outputs in microbatch order. Equal to the sequential pass to the
  // bit; no gradient, norm or weight is touched.

  /// Freezes the first `count` layers: moves to the last freeze point at or below it (no change if
  /// that is the current one). Frozen layers stay frozen: a count below the layers frozen now is
  /// refused, as is one that leaves no layer active.
  void freeze(int count) {
    record_.check("ctpipe::elastic_trainer::freeze", count, frozen());
    const std::size_t k = ElasticPlan::point_for(count);
    if (k == current_) return;
    detail::with_index<ElasticPlan::count>(k, [&](auto i) { switch_to<decltype(i)::value>(); });
  }

  /// Records the start and end of every task of the steps that follow, on every replica of the
  /// current freeze point and of the points it moves to, until record_steps(false), which keeps
  /// the last step's recording (host_executor::record_steps: each replica's pipeline from its own
  /// start, on the host's clock). Off by default. Between steps.
  void record_steps(bool on) {
    recording_ = on;
    detail::with_index<ElasticPlan::count>(current_, [&](auto i) {
      for (auto& e : std::get<decltype(i)::value>(sets_)->execs) e->record_steps(on);
    });
  }
  /// Replica `replica`'s pipeline in the last recorded step of the current point, per rank, per
  /// position of the point's table (its 1F1B over its ranks); empty where none was recorded.
  const measured_step& recorded_step(int replica = 0) const {
    const measured_step* m = nullptr;
    detail::with_index<ElasticPlan::count>(current_, [&](auto i) {
      m = &std::get<decltype(i)::value>(sets_)->execs.at(detail::ix(replica))->recorded_step();
    });
    return *m;
  }
  /// compare_measured of that recording against the current point's table (what it ran).
  step_comparison recorded_comparison(int replica = 0) const {
    step_comparison c;
    detail::with_index<ElasticPlan::count>(current_, [&](auto i) {
      c = compare_measured(replica_set<decltype(i)::value>::table, recorded_step(replica));
    });
    return c;
  }
  /// Every replica's recorded pipeline and its replay, as one Perfetto trace (measured_trace).
  std::string recorded_trace() const {
    std::string t;
    detail::with_index<ElasticPlan::count>(current_, [&](auto i) {
      std::vector<measured_step> all;
      for (const auto& e : std::get<decltype(i)::value>(sets_)->execs) all.push_back(e->recorded_step());
      t = measured_trace(replica_set<decltype(i)::value>::table, std::span<const measured_step>(all));
    });
    return t;
  }

  /// Ends an epoch: asks `policy` (int(const freeze_signal&): geometric_freezing, adaptive_freezing or
  /// the user's own) how many layers to freeze, from this epoch's and the last epoch's gradient
  /// norms, and freezes them (to the last freeze point at or below). Returns the layers frozen.
  template <class Policy>
  int end_epoch(Policy&& policy) {
    freeze(record_.ask(policy, frozen()));
    return frozen();
  }

 private:
  template <std::size_t I>
  struct replica_set {
    static constexpr elastic_point pt = ElasticPlan::points[I];
    static constexpr auto table = make_table<one_f_one_b(pt.ranks, pt.microbatches)>();
    using exec_t = host_executor<table, model_t, ElasticPlan::template stages<I>, Loss>;
    using prefix_t = typename exec_t::prefix_type;
    std::vector<std::unique_ptr<model_t>> copies;  // replicas 1..D-1
    std::vector<std::unique_ptr<exec_t>> execs;    // replica d on model 0 (the user's) or copy d - 1
    std::unordered_map<std::size_t, prefix_t> cache;
    std::vector<const prefix_t*> in;  // per microbatch of the step
    std::vector<prefix_t*> out;
  };
  template <class Seq>
  struct sets_of;
  template <std::size_t... I>
  struct sets_of<std::index_sequence<I...>> {
    using type = std::tuple<std::unique_ptr<replica_set<I>>...>;
  };
  using sets_t = typename sets_of<std::make_index_sequence<ElasticPlan::count>>::type;

  static constexpr int max_replicas() {
    int d = 1;
    for (const auto& p : points) d = std::max(d, p.replicas);
    return d;
  }

  template <std::size_t I>
  model_t& replica_model(replica_set<I>& r, int d) {
    return d == 0 ? model_ : *r.copies[detail::ix(d - 1)];
  }

  template <std::size_t I>
  void switch_to() {
    // The old point's threads end first: at most one point's threads exist at a time.
    std::apply([](auto&... s) { (s.reset(), ...); }, sets_);
    auto r = std::make_unique<replica_set<I>>();
    constexpr elastic_point pt = ElasticPlan::points[I];
    for (int d = 1; d < pt.replicas; ++d) r->copies.push_back(std::make_unique<model_t>(model_));
    for (int d = 0; d < pt.replicas; ++d) {
      r->execs.push_back(std::make_unique<typename replica_set<I>::exec_t>(replica_model(*r, d), loss_));
      if (recording_) r->execs.back()->record_steps(true);
    }
    r->in.assign(detail::ix(microbatches), nullptr);
    r->out.assign(detail::ix(microbatches), nullptr);
    std::get<I>(sets_) = std::move(r);
    current_ = I;
  }

  template <std::size_t I>
  struct step_job {
    elastic_trainer* self;
    replica_set<I>* set;
    const input_type* inputs;
    const target_type* targets;
    static void run(void* ctx, int d) {
      auto& j = *static_cast<step_job*>(ctx);
      constexpr int m = replica_set<I>::pt.microbatches;
      const auto first = detail::ix(d * m);
      in_replica<I>(d, [&] {
        const auto l = j.set->execs[detail::ix(d)]->step(std::span<const input_type>(j.inputs + first, m),
                                                         std::span<const target_type>(j.targets + first, m));
        std::copy(l.begin(), l.end(), j.self->losses_.begin() + static_cast<std::ptrdiff_t>(first));
      });
    }
  };
  // Runs replica d's part of a step or forward pass: a task_failure it throws names the replica
  // and the microbatch in the step's batch.
  template <std::size_t I, class F>
  static void in_replica(int d, F&& f) {
    constexpr int m = replica_set<I>::pt.microbatches;
    try {
      f();
    } catch (const task_failure& e) {
      throw task_failure(detail::host_executor_tag::name, e.rank(), task{e.op(), e.stage(), e.microbatch() + d * m, -1},
                         e.cause(), replica_set<I>::pt.replicas > 1 ? d : -1);
    }
  }

  template <std::size_t I>
  void run_step(std::span<const input_type> inputs, std::span<const target_type> targets,
                std::span<const std::size_t> samples) {
    auto& set = *std::get<I>(sets_);
    constexpr elastic_point pt = ElasticPlan::points[I];
    constexpr int m = pt.microbatches;
    using prefix_t = typename replica_set<I>::prefix_t;
    const bool cached = pt.frozen > 0 && !samples.empty();
    if (cached)
      for (std::size_t i = 0; i < samples.size(); ++i) {
        auto it = set.cache.find(samples[i]);
        const bool hit = it != set.cache.end();
        set.in[i] = hit ? &it->second : nullptr;
        set.out[i] = hit ? nullptr : &set.cache[samples[i]];
      }
    for (int d = 0; d < pt.replicas; ++d) {
      set.execs[detail::ix(d)]->set_context_origin({steps_, d * m});  // a replica's microbatches: global
      const auto first = detail::ix(d * m);
      if (cached)
        set.execs[detail::ix(d)]->use_prefix_cache(std::span<const prefix_t* const>(set.in.data() + first, m),
                                                   std::span<prefix_t* const>(set.out.data() + first, m));
      else
        set.execs[detail::ix(d)]->use_prefix_cache({}, {});
    }
    step_job<I> job{this, &set, inputs.data(), targets.data()};
    pool_.run(&step_job<I>::run, &job, pt.replicas);
    reduce_and_update<I>(set);
    ++steps_;
  }

  template <std::size_t I>
  struct forward_job {
    elastic_trainer* self;
    replica_set<I>* set;
    const input_type* inputs;
    const target_type* targets;  // evaluate
    output_type* outputs;        // predict
    static void run(void* ctx, int d) {
      auto& j = *static_cast<forward_job*>(ctx);
      constexpr int m = replica_set<I>::pt.microbatches;
      const auto first = detail::ix(d * m);
      auto& ex = *j.set->execs[detail::ix(d)];
      in_replica<I>(d, [&] {
        ex.set_context_origin({j.self->steps_, d * m});
        if (j.outputs != nullptr) {
          ex.predict(std::span<const input_type>(j.inputs + first, m), std::span<output_type>(j.outputs + first, m));
        } else {
          const auto l = ex.evaluate(std::span<const input_type>(j.inputs + first, m),
                                     std::span<const target_type>(j.targets + first, m));
          std::copy(l.begin(), l.end(), j.self->eval_losses_.begin() + static_cast<std::ptrdiff_t>(first));
        }
      });
    }
  };
  token_losses run_forward(const char* who, std::span<const input_type> inputs, std::span<const target_type> targets,
                           std::span<output_type> outputs, std::span<const int>) {
    const bool predicting = targets.empty();
    detail::check_microbatches(who, inputs.size(), predicting ? outputs.size() : targets.size(), microbatches,
                               predicting ? "outputs" : "targets");
    detail::with_index<ElasticPlan::count>(current_,
                                           [&](auto i) { forward_at<decltype(i)::value>(inputs, targets, outputs); });
    if (predicting) return {};
    return {{eval_losses_.data(), eval_losses_.size()}, {}};
  }
  template <std::size_t I>
  void forward_at(std::span<const input_type> inputs, std::span<const target_type> targets,
                  std::span<output_type> outputs) {
    auto& set = *std::get<I>(sets_);
    forward_job<I> job{this, &set, inputs.data(), targets.empty() ? nullptr : targets.data(),
                       outputs.empty() ? nullptr : outputs.data()};
    pool_.run(&forward_job<I>::run, &job, replica_set<I>::pt.replicas);
  }

  // Replica gradients summed in replica order into the user's model; the optimizer on the active
  // layers; their norms for the policies; their parameters to the other replicas.
  template <std::size_t I>
  void reduce_and_update(replica_set<I>& set) {
    // (static: g++ 12 at -O0 gives a generic lambda that captures a constexpr local by reference an
    // uninitialised copy of it)
    static constexpr elastic_point pt = ElasticPlan::points[I];
    [&]<std::size_t... K>(std::index_sequence<K...>) { (update_layer<I, K>(set, pt), ...); }
    (std::make_index_sequence<model_t::size>{});
  }
  template <std::size_t I, std::size_t K>
  void update_layer(replica_set<I>& set, const elastic_point& pt) {
    using L = typename model_t::template layer_type<K>;
    if constexpr (has_parameters<L>) {
      if (static_cast<int>(K) < pt.frozen) return;
      auto g = model_.template layer<K>().gradients();
      for (int d = 1; d < pt.replicas; ++d) {
        const auto h = set.copies[detail::ix(d - 1)]->template layer<K>().gradients();
        for (std::size_t i = 0; i < g.size(); ++i) g[i] += h[i];
      }
      record_.add(K, g);
      auto w = model_.template layer<K>().parameters();
      using T = typename decltype(w)::element_type;
      opt_(K, w, std::span<const T>(g.data(), g.size()));
      for (int d = 1; d < pt.replicas; ++d)
        std::copy(w.begin(), w.end(), set.copies[detail::ix(d - 1)]->template layer<K>().parameters().begin());
    }
  }

  Loss& loss_;
  Optimizer& opt_;
  bool recording_ = false;  // record_steps: each point's executors record
  detail::replica_pool pool_;
  sets_t sets_{};
  std::vector<double> losses_ = std::vector<double>(detail::ix(microbatches));
  std::vector<double> eval_losses_ = std::vector<double>(detail::ix(microbatches));
};

}  // namespace ctpipe
