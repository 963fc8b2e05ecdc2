// The planner's prediction for one plan: the layers balanced over the plan's stages, the schedule's
// table simulated under the layers' costs at the plan's microbatch size (messages priced by their
// bytes), the data-parallel all-reduce of each rank's gradients started when its last backward op
// ends, and each device's peak memory (parameters with their state, plus the activations the
// schedule keeps alive, walked op by op). Plain constexpr: a static_assert can ask it.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>

#include <ctpipe/analysis/analyse.hpp>
#include <ctpipe/detail/balance.hpp>
#include <ctpipe/detail/buffer.hpp>
#include <ctpipe/planner/detail/transient_table.hpp>
#include <ctpipe/planner/request.hpp>
#include <ctpipe/schedule/generate.hpp>

namespace ctpipe {

/// What the planner predicts for one plan. Times are in the unit of the layer figures.
struct plan_figures {
  plan_choice choice{};
  int microbatch_size = 0;     // samples per microbatch
  double step_time = 0.0;      // the pipeline and the all-reduce after each rank's last backward op
  double pipeline_time = 0.0;  // the simulated table's makespan
  double allreduce_time =
      0.0;  // the longest rank's gradient sums: shared matrices', dualpipe's mirrors', the replicas' (0: none)
  double bubble_fraction = 0.0;    // of the pipeline: 1 - busy / (ranks x makespan)
  double peak_memory = 0.0;        // the fullest device's
  int peak_rank = 0;               // which rank that is
  double parameter_memory = 0.0;   // on that device: parameters x state factor
  double activation_memory = 0.0;  // on that device: activations at their peak
  double lower_bound = 0.0;        // what the search compares before simulating (<= step_time)
  bool fits = true;                // peak memory within the device's, less the reserve
};

/// The planner's own rules for a choice, before its schedule's: X(rule, parameter, words). The one
/// list the enum, the words of plan_error and the compile-time errors come from.
#define CTPIPE_PLAN_RULES(X)                                                                                       \
  X(timings, "timings",                                                                                            \
    "a layer's timings need 1 to 8 microbatch sizes of more than 0 samples, in increasing order, and "             \
    "times of at least 0")                                                                                         \
  X(shares_with, "shares_with", "a layer may share the parameters of an earlier layer that shares none")           \
  X(skip, "skip", "a skip reads the layer at least 2 places back (or the model's input), or is 0")                 \
  X(reserve, "reserved memory", "the reserve must be at least 0, and less than the device's memory")               \
  X(devices, "ranks and replicas", "ranks x replicas must equal the cluster's devices")                            \
  X(batch, "microbatches", "the global batch must split into replicas x microbatches whole microbatches")          \
  X(chunks, "chunks",                                                                                              \
    "chunks must be 1, 2 for the V schedules (zb_v, dualpipe_v, v_min, v_half), and at least 1 for the schedules " \
    "that take chunks")                                                                                            \
  X(layers, "ranks and chunks", "every stage (ranks x chunks of them) needs at least one layer")                   \
  X(recompute, "recompute", "recomputation is modelled only for schedules without split backward")

enum class plan_rule : int {
  ok,
#define CTPIPE_DETAIL_PLAN_ENUM(rule, parameter, words) rule,
  CTPIPE_PLAN_RULES(CTPIPE_DETAIL_PLAN_ENUM)
#undef CTPIPE_DETAIL_PLAN_ENUM
};

/// The parameter a plan rule is about, and the rule in words.
constexpr std::string_view plan_rule_parameter(plan_rule r) {
  switch (r) {
    case plan_rule::ok:
      return "";
#define CTPIPE_DETAIL_PLAN_PARAMETER(rule, parameter, words) \
  case plan_rule::rule:                                      \
    return parameter;
      CTPIPE_PLAN_RULES(CTPIPE_DETAIL_PLAN_PARAMETER)
#undef CTPIPE_DETAIL_PLAN_PARAMETER
  }
  return "?";
}
constexpr std::string_view plan_rule_text(plan_rule r) {
  switch (r) {
    case plan_rule::ok:
      return "";
#define CTPIPE_DETAIL_PLAN_TEXT(rule, parameter, words) \
  case plan_rule::rule:                                 \
    return words;
      CTPIPE_PLAN_RULES(CTPIPE_DETAIL_PLAN_TEXT)
#undef CTPIPE_DETAIL_PLAN_TEXT
  }
  return "?";
}

/// Thrown by predict() at run time for a choice that breaks a plan rule (a schedule's own rules
/// throw schedule_error).
class plan_error : public std::invalid_argument {
 public:
  explicit plan_error(plan_rule r)
      : std::invalid_argument("ctpipe::predict: " + std::string(plan_rule_parameter(r)) + ": " +
                              std::string(plan_rule_text(r))),
        rule_(r) {}
  plan_rule rule() const noexcept { return rule_; }

 private:
  plan_rule rule_;
};

/// Compile-time errors of predict() in a constant expression: a call to the function named after
/// the broken rule (not constexpr, so the compiler stops there and names it). A schedule's own
/// rules stop at the function named after its param_rule.
namespace detail::plan_failed {
#define CTPIPE_DETAIL_PLAN_FUNCTION(rule, parameter, words) \
  inline void rule() {}
CTPIPE_PLAN_RULES(CTPIPE_DETAIL_PLAN_FUNCTION)
#undef CTPIPE_DETAIL_PLAN_FUNCTION
#define CTPIPE_DETAIL_SCHEDULE_RULE_FUNCTION(A, rule, parameter, compile_words, run_words) \
  inline void rule(int /*value*/) {}
CTPIPE_PARAM_RULES_WITH(CTPIPE_DETAIL_SCHEDULE_RULE_FUNCTION, _)
#undef CTPIPE_DETAIL_SCHEDULE_RULE_FUNCTION
}  // namespace detail::plan_failed

namespace detail {

// Calls f(schedule) with the generator of a planned choice.
template <class F>
constexpr decltype(auto) with_planned(const plan_choice& c, F&& f) {
  const int p = c.ranks, m = c.microbatches, v = c.chunks;
  switch (c.schedule) {
    case planned_schedule::gpipe:
      return f(gpipe(p, m));
    case planned_schedule::one_f_one_b:
      return f(one_f_one_b(p, m));
    case planned_schedule::interleaved:
      return f(interleaved(p, m, v));
    case planned_schedule::looped_bfs:
      return f(looped_bfs(p, m, v));
    case planned_schedule::zb_h1:
      return f(zb_h1(p, m));
    case planned_schedule::zb_h2:
      return f(zb_h2(p, m));
    case planned_schedule::interleaved_zero_bubble:
      return f(interleaved_zero_bubble(p, m, v));
    case planned_schedule::zb_v:
      return f(zb_v(p, m));
    case planned_schedule::dualpipe:
      return f(dualpipe(p, m));
    case planned_schedule::v_min:
      return f(v_min(p, m));
    case planned_schedule::v_half:
      return f(v_half(p, m));
    case planned_schedule::synthesised:
      return f(synthesise_heuristic(p, m, c.costs, c.memory_limit));
    case planned_schedule::dualpipe_v:
      break;
  }
  return f(dualpipe_v(p, m));
}

// The table's stages; and the model's (the stage plan's): the same, but for dualpipe, whose second
// pipeline runs mirrored copies of the first's p stages.
constexpr int stages_of(const plan_choice& c) {
  return c.ranks * (v_placed(c.schedule) || c.schedule == planned_schedule::dualpipe ? 2 : c.chunks);
}
constexpr int model_stages_of(const plan_choice& c) {
  return c.schedule == planned_schedule::dualpipe ? c.ranks : stages_of(c);
}

// A layer's time for one call of op 0 (F), 1 (I) or 2 (W) at a microbatch of n samples: per-sample
// time and overhead, or its measured timings (layer_profile::timings).
constexpr double op_time(const layer_profile& l, int op, double n) {
  if (l.timed <= 0) return n * (op == 0 ? l.forward : op == 1 ? l.backward_input : l.backward_weight) + l.overhead;
  const auto at = [&](int k) {
    const op_timing& t = l.timings[static_cast<std::size_t>(k)];
    return op == 0 ? t.forward : op == 1 ? t.backward_input : t.backward_weight;
  };
  if (l.timed == 1) return at(0) * n / l.timings[0].samples;
  int k = 0;  // the segment [k, k + 1]: the one holding n, or the nearest one
  while (k + 2 < l.timed && n > l.timings[static_cast<std::size_t>(k) + 1].samples) ++k;
  const double x0 = l.timings[static_cast<std::size_t>(k)].samples,
               x1 = l.timings[static_cast<std::size_t>(k) + 1].samples;
  const double t = at(k) + (at(k + 1) - at(k)) * (n - x0) / (x1 - x0);
  return t > 0.0 ? t : 0.0;
}
// What one whole backward call saves against its I and W called apart: one op's fixed cost (a
// measured layer's is inside its timings, and not known apart: nothing).
constexpr double fixed_cost(const layer_profile& l) { return l.timed > 0 ? 0.0 : l.overhead; }

// Per stage (in the order microbatches visit them), per microbatch of b samples: op costs, what a
// forward keeps, the bytes of the messages its sends carry, its parameters.
struct stage_figures {
  int stages = 0;
  int model_stages = 0;  // of the stage plan (stage s runs model stage s % model_stages)
  buffer<int> first;     // model_stages + 1 layer boundaries
  buffer<double> f, b, i, w;
  buffer<double> keep;         // activations kept from F to B (or W): all of them, or the input when recomputing
  buffer<double> full;         // all the stage's activations (what a recomputing stage rebuilds for one backward)
  buffer<double> msg_fwd;      // time of the message a forward's send carries (its output)
  buffer<double> msg_bwd;      // time of the message a backward's send carries (its input's gradient)
  buffer<double> params;       // parameter bytes (a matrix two of its layers share, once)
  buffer<int> stage_of;        // each layer's model stage; [layers]: model_stages (past the last)
  bool shared_across = false;  // some layers share parameters with a layer of another model stage
};

constexpr double message_time(const cluster_profile& c, double bytes) {
  return c.latency + (c.activation_bandwidth > 0.0 ? bytes / c.activation_bandwidth : 0.0);
}

constexpr stage_figures stage_figures_of(const plan_request& q, const plan_choice& c, int b) {
  const int L = static_cast<int>(q.layers.size()), S = stages_of(c), M = model_stages_of(c);
  const layer_profile* lp = q.layers.data();
  const double n = static_cast<double>(b);
  stage_figures s{S,
                  M,
                  buffer<int>(static_cast<std::size_t>(M) + 1),
                  buffer<double>(static_cast<std::size_t>(S)),
                  buffer<double>(static_cast<std::size_t>(S)),
                  buffer<double>(static_cast<std::size_t>(S)),
                  buffer<double>(static_cast<std::size_t>(S)),
                  buffer<double>(static_cast<std::size_t>(S)),
                  buffer<double>(static_cast<std::size_t>(S)),
                  buffer<double>(static_cast<std::size_t>(S)),
                  buffer<double>(static_cast<std::size_t>(S)),
                  buffer<double>(static_cast<std::size_t>(S)),
                  buffer<int>(static_cast<std::size_t>(L) + 1)};
  // Balance by the time a microbatch spends in each layer, forward and backward.
  buffer<double> per_layer(static_cast<std::size_t>(L));
  for (int l = 0; l < L; ++l)
    per_layer.data()[l] = op_time(lp[l], 0, n) * (c.recompute ? 2.0 : 1.0) + op_time(lp[l], 1, n) +
                          op_time(lp[l], 2, n) - fixed_cost(lp[l]);
  balance(per_layer.data(), L, M, 0.0, s.first.data());
  buffer<int>& stage_of = s.stage_of;
  for (int ms = 0; ms < M; ++ms)
    for (int l = s.first.data()[ms]; l < s.first.data()[ms + 1]; ++l) stage_of.data()[l] = ms;
  stage_of.data()[L] = M;
  // The tensors: t = 0 the model's input, t = l + 1 layer l's output. Each one's bytes, the stage
  // that makes it (the input: stage 0's), and the last layer that reads it.
  const auto bytes_of = [&](int t) { return t == 0 ? q.input_bytes : lp[t - 1].output_bytes; };
  const auto made_by = [&](int t) { return t == 0 ? 0 : stage_of.data()[t - 1]; };
  const auto skip_source = [&](int l) { return l - lp[l].skip + 1 > 0 ? l - lp[l].skip + 1 : 0; };
  buffer<int> last_reader(static_cast<std::size_t>(L) + 1);
  for (int t = 0; t <= L; ++t) last_reader.data()[t] = t;  // layer t reads tensor t
  for (int l = 0; l < L; ++l)
    if (lp[l].skip > 0 && last_reader.data()[skip_source(l)] < l) last_reader.data()[skip_source(l)] = l;
  buffer<int> seen(static_cast<std::size_t>(L) + 1);  // the stage (+ 1) that last counted the tensor
  for (int st = 0; st < S; ++st) {
    double f = 0.0, i = 0.0, w = 0.0, o = 0.0, act = 0.0, par = 0.0;
    const int ms = st % M;  // (dualpipe's mirrors: a copy of model stage ms)
    const int begin = s.first.data()[ms], end = s.first.data()[ms + 1];
    double received = 0.0, sent = 0.0;
    for (int l = begin; l < end; ++l) {
      f += op_time(lp[l], 0, n);
      i += op_time(lp[l], 1, n);
      w += op_time(lp[l], 2, n);
      o += fixed_cost(lp[l]);
      act += n * lp[l].activation_bytes;
      const int k = lp[l].shares_with;
      if (k < 0 || stage_of.data()[k] != ms) par += lp[l].parameter_bytes;
      if (k >= 0 && stage_of.data()[k] != ms) s.shared_across = true;
      // What it reads from earlier stages (the input counts as received, even by stage 0), each
      // tensor once.
      for (const int t : {l, lp[l].skip > 0 ? skip_source(l) : -1})
        if (t >= 0 && (t == 0 || made_by(t) < ms) && seen.data()[t] != st + 1) {
          seen.data()[t] = st + 1;
          received += n * bytes_of(t);
        }
      // What it makes for later stages.
      if (stage_of.data()[last_reader.data()[l + 1]] > ms) sent += n * bytes_of(l + 1);
    }
    if (begin == 0 && stage_of.data()[last_reader.data()[0]] > ms) sent += n * q.input_bytes;
    s.f.data()[st] = f;
    s.i.data()[st] = i + (c.recompute ? f : 0.0);
    s.w.data()[st] = w;
    s.b.data()[st] = i + w - o + (c.recompute ? f : 0.0);  // one backward call per layer
    s.full.data()[st] = act;
    s.keep.data()[st] = c.recompute ? received : act;
    s.msg_fwd.data()[st] = message_time(q.cluster, sent);
    s.msg_bwd.data()[st] = message_time(q.cluster, received);
    s.params.data()[st] = par;
  }
  return s;
}

// Each rank's parameter bytes (params[r], from its stages: a matrix two of its layers share, once)
// and, where layers on two ranks share one, what those ranks sum first: tied[r] bytes, once every
// rank holding a copy has finished (the latest last_end of them, into ready[r]; last_end may be
// null). rank_of(st) is the rank of table stage st.
template <class RankOf>
constexpr void rank_parameters(const plan_request& q, const stage_figures& s, int p, const RankOf& rank_of,
                               double* params, double* tied, const double* last_end, double* ready) {
  for (int r = 0; r < p; ++r) params[r] = tied[r] = ready[r] = 0.0;
  for (int st = 0; st < s.stages; ++st) params[rank_of(st)] += s.params.data()[st];
  if (!s.shared_across) return;
  const int L = static_cast<int>(q.layers.size());
  const auto holds = [&](int r, int layer) {  // a stage of rank r runs the layer's model stage
    for (int st = 0; st < s.stages; ++st)
      if (rank_of(st) == r && st % s.model_stages == s.stage_of.data()[layer]) return true;
    return false;
  };
  for (int l = 0; l < L; ++l) {
    const int k = q.layers[static_cast<std::size_t>(l)].shares_with;
    if (k < 0 || s.stage_of.data()[l] == s.stage_of.data()[k]) continue;  // (one stage: counted once there)
    const double bytes = q.layers[static_cast<std::size_t>(l)].parameter_bytes;
    double done = 0.0;
    for (int r = 0; r < p; ++r)
      if (last_end != nullptr && (holds(r, l) || holds(r, k)) && last_end[r] > done) done = last_end[r];
    for (int r = 0; r < p; ++r) {
      const bool hl = holds(r, l), hk = holds(r, k);
      if (hl && hk) {
        params[r] -= bytes;  // two stages of one rank: one matrix
      } else if (hl || hk) {
        tied[r] += bytes;
        ready[r] = done > ready[r] ? done : ready[r];
      }
    }
  }
}

// The simulation's cost model: the stage figures, microbatch i's ops scaled by its factor.
struct planned_costs {
  const stage_figures* s = nullptr;
  std::span<const double> factor{};
  double comm = 0.0;  // unused: every message has its own time (message())

  constexpr double of(int mb) const {
    return factor.empty() ? 1.0 : factor[static_cast<std::size_t>(mb) % factor.size()];
  }
  constexpr double operator()(const task& t) const {
    const double k = of(t.microbatch);
    switch (t.op) {
      case op_kind::forward:
        return k * s->f.data()[t.stage];
      case op_kind::backward:
        return k * s->b.data()[t.stage];
      case op_kind::backward_input:
        return k * s->i.data()[t.stage];
      case op_kind::backward_weight:
        return k * s->w.data()[t.stage];
      default:
        return 0.0;
    }
  }
  constexpr double message(const task& send) const {
    return send.op == op_kind::send_forward ? s->msg_fwd.data()[send.stage] : s->msg_bwd.data()[send.stage];
  }
};

constexpr double allreduce_time(const plan_request& q, int replicas, double bytes) {
  if (replicas <= 1) return 0.0;
  const double d = static_cast<double>(replicas);
  // A ring all-reduce: 2 (D - 1) steps, each moving 1/D of the bytes.
  return 2.0 * (d - 1.0) * q.cluster.latency +
         (q.cluster.allreduce_bandwidth > 0.0 ? 2.0 * (d - 1.0) / d * bytes / q.cluster.allreduce_bandwidth : 0.0);
}
// The sums after a rank's pipeline work, for its `bytes` of parameters: dualpipe's mirrors first
// (each stage's two copies, on two ranks: an all-reduce of two), then the replicas'.
constexpr double gradient_sums_time(const plan_request& q, const plan_choice& c, double bytes) {
  return (c.schedule == planned_schedule::dualpipe ? allreduce_time(q, 2, bytes) : 0.0) +
         allreduce_time(q, c.replicas, bytes);
}

// A bound no run of the plan beats, from the stage figures alone: rank r cannot start before the
// first microbatch's forward has passed the stages before its first one, then has all its compute
// to do, then its all-reduce.
constexpr double lower_bound_of(const plan_request& q, const plan_choice& c, const stage_figures& s) {
  const planned_costs k{&s, q.microbatch_factors};
  // Per chain (one, or dualpipe's two, each with its half of the microbatches): the sum of its
  // microbatches' factors and the least of them.
  const int chains = s.stages / s.model_stages, per_chain = c.microbatches / chains;
  double total[2] = {0.0, 0.0}, least[2] = {1e300, 1e300};
  for (int i = 0; i < c.microbatches; ++i) {
    const int ch = i / per_chain < chains ? i / per_chain : chains - 1;
    total[ch] += k.of(i);
    least[ch] = k.of(i) < least[ch] ? k.of(i) : least[ch];
  }
  const bool split = splits_backward(c.schedule);
  return with_planned(c, [&](const auto& g) {
    const auto p = static_cast<std::size_t>(c.ranks);
    buffer<double> params(p), tied(p), ready(p);  // (the shared gradients' sums left out: a bound)
    rank_parameters(
        q, s, c.ranks, [&](int st) { return g.rank_of(st); }, params.data(), tied.data(), nullptr, ready.data());
    double bound = 0.0;
    for (int r = 0; r < c.ranks; ++r) {
      double work = 0.0, head = 1e300;
      for (int st = 0; st < s.stages; ++st) {
        if (g.rank_of(st) != r) continue;
        const int ch = st / s.model_stages;
        // A split schedule may still run some backwards whole (DualPipeV's pairs): the cheaper form.
        const double iw = s.i.data()[st] + s.w.data()[st], whole = s.b.data()[st];
        work += total[ch] * (s.f.data()[st] + (split && iw < whole ? iw : whole));
        // The rank starts no sooner than a microbatch's forwards through the stages before one of
        // its own, on that stage's chain.
        double before = 0.0;
        for (int b = st - st % s.model_stages; b < st; ++b) before += s.f.data()[b];
        head = least[ch] * before < head ? least[ch] * before : head;
      }
      const double rank = (head < 1e300 ? head : 0.0) + work + gradient_sums_time(q, c, params.data()[r]);
      bound = rank > bound ? rank : bound;
    }
    return bound;
  });
}

}  // namespace detail

/// The planner's rules for a request: its layers' timings, sharing and skips, and the reserve.
constexpr plan_rule check_request(const plan_request& q) {
  const int L = static_cast<int>(q.layers.size());
  for (int l = 0; l < L; ++l) {
    const layer_profile& x = q.layers[static_cast<std::size_t>(l)];
    if (x.timed < 0 || x.timed > max_op_timings) return plan_rule::timings;
    for (int k = 0; k < x.timed; ++k) {
      const op_timing& t = x.timings[static_cast<std::size_t>(k)];
      if (!(t.samples > 0.0) || (k > 0 && !(t.samples > x.timings[static_cast<std::size_t>(k) - 1].samples)) ||
          !(t.forward >= 0.0) || !(t.backward_input >= 0.0) || !(t.backward_weight >= 0.0))
        return plan_rule::timings;
    }
    if (x.shares_with < -1 || x.shares_with >= l ||
        (x.shares_with >= 0 && q.layers[static_cast<std::size_t>(x.shares_with)].shares_with >= 0))
      return plan_rule::shares_with;
    if (x.skip < 0 || x.skip == 1) return plan_rule::skip;
  }
  if (!(q.cluster.reserved_bytes >= 0.0) ||
      (q.cluster.reserved_bytes > 0.0 && !(q.cluster.reserved_bytes < q.cluster.memory_bytes)))
    return plan_rule::reserve;
  return plan_rule::ok;
}

/// The planner's own rules for a choice, the request's first (the schedule's come after:
/// validate_choice).
constexpr plan_rule check_choice(const plan_request& q, const plan_choice& c) {
  if (const plan_rule r = check_request(q); r != plan_rule::ok) return r;
  if (c.ranks < 1 || c.replicas < 1 || c.ranks * c.replicas != q.cluster.devices) return plan_rule::devices;
  if (c.microbatches < 1 || q.global_batch < 1 || q.global_batch % (c.replicas * c.microbatches) != 0)
    return plan_rule::batch;
  const bool v_shape = v_placed(c.schedule);
  if (c.chunks < 1 || (v_shape && c.chunks != 2) || (!v_shape && !takes_chunks(c.schedule) && c.chunks != 1))
    return plan_rule::chunks;
  if (detail::model_stages_of(c) > static_cast<int>(q.layers.size())) return plan_rule::layers;
  if (c.recompute && splits_backward(c.schedule)) return plan_rule::recompute;
  return plan_rule::ok;
}

/// The schedule's own parameter rules for the choice (ok when it may run).
constexpr param_check validate_choice(const plan_choice& c) {
  return detail::with_planned(c, [](const auto& s) { return validate(s); });
}

namespace detail {
// Nothing for ok; for a broken plan rule, at compile time a stop at the function named after it,
// at run time plan_error.
constexpr void require_rule(plan_rule r) {
  if (r == plan_rule::ok) return;
  if (std::is_constant_evaluated()) switch (r) {
      case plan_rule::ok:
        break;
#define CTPIPE_DETAIL_PLAN_CALL(rule, parameter, words) \
  case plan_rule::rule:                                 \
    detail::plan_failed::rule();                        \
    break;
        CTPIPE_PLAN_RULES(CTPIPE_DETAIL_PLAN_CALL)
#undef CTPIPE_DETAIL_PLAN_CALL
#undef CTPIPE_PLAN_RULES  // its last use: the list is this header's alone
    }
  throw plan_error(r);
}
}  // namespace detail

/// The layer boundaries of the choice's stages: stage s holds layers [first[s], first[s + 1]).
/// `first` has ranks x chunks + 1 entries (dualpipe: ranks + 1, the stage plan its two pipelines
/// run). The choice must pass check_choice.
constexpr void stage_split(const plan_request& q, const plan_choice& c, int* first) {
  const auto s = detail::stage_figures_of(q, c, q.global_batch / (c.replicas * c.microbatches));
  for (int i = 0; i <= s.model_stages; ++i) first[i] = s.first.data()[i];
}

/// A time no run of `c` beats (plan_figures::lower_bound), without building its table. The choice
/// must pass check_choice and validate_choice.
constexpr double lower_bound(const plan_request& q, const plan_choice& c) {
  return detail::lower_bound_of(q, c, detail::stage_figures_of(q, c, q.global_batch / (c.replicas * c.microbatches)));
}

/// What `c` takes and holds. Throws std::invalid_argument for a choice that breaks a rule
/// (plan_error: check_choice; schedule_error: validate_choice); in a constant expression it stops at
/// the function named after the rule (detail::plan_failed).
constexpr plan_figures predict(const plan_request& q, const plan_choice& c) {
  detail::require_rule(check_choice(q, c));
  if (const param_check v = validate_choice(c); !v.ok()) {
    if (std::is_constant_evaluated()) switch (v.rule) {
        case param_rule::ok:
          break;
#define CTPIPE_DETAIL_SCHEDULE_RULE_CALL(A, rule, parameter, compile_words, run_words) \
  case param_rule::rule:                                                               \
    detail::plan_failed::rule(v.value);                                                \
    break;
          CTPIPE_PARAM_RULES_WITH(CTPIPE_DETAIL_SCHEDULE_RULE_CALL, _)
#undef CTPIPE_DETAIL_SCHEDULE_RULE_CALL
      }
    detail::with_planned(c, [](const auto& g) { require_valid(g); });
  }
  const int b = q.global_batch / (c.replicas * c.microbatches);
  const detail::stage_figures s = detail::stage_figures_of(q, c, b);
  const detail::transient_table t = detail::with_planned(c, [](const auto& g) { return detail::transient_lowered(g); });
  const int p = c.ranks;
  const detail::planned_costs costs{&s, q.microbatch_factors};

  // Time: each rank's last compute op ends; then, where it holds a matrix it shares with another
  // rank, once that one's has too, the two sum its gradient; then its replicas sum their gradients.
  const auto n = static_cast<std::size_t>(p);
  detail::buffer<double> last_end(n), params(n), tied(n), ready(n);
  const detail::table_index ix = detail::index_or_throw(t, false);  // the simulation finds a deadlock
  const auto timing = detail::simulate_indexed(t, ix, costs, [&](int r, int, double, double end) {
    last_end.data()[r] = end > last_end.data()[r] ? end : last_end.data()[r];
  });
  detail::rank_parameters(
      q, s, p, [&](int st) { return t.rank_of(st); }, params.data(), tied.data(), last_end.data(), ready.data());
  plan_figures out{c, b};
  out.lower_bound = detail::lower_bound_of(q, c, s);
  out.pipeline_time = timing.makespan;
  out.bubble_fraction = timing.bubble_fraction;
  out.step_time = timing.makespan;
  for (int r = 0; r < p; ++r) {
    const double shared = tied.data()[r] > 0.0 ? detail::allreduce_time(q, 2, tied.data()[r]) : 0.0;
    const double ar = shared + detail::gradient_sums_time(q, c, params.data()[r]);
    out.allreduce_time = ar > out.allreduce_time ? ar : out.allreduce_time;
    const double start = last_end.data()[r] > ready.data()[r] ? last_end.data()[r] : ready.data()[r];
    const double end = start + ar;
    out.step_time = end > out.step_time ? end : out.step_time;
  }

  // Memory: parameters with their state, and the activations alive at the rank's peak (a forward
  // keeps them, its B, or its W in a split backward, frees them); a recomputing stage also rebuilds
  // one microbatch's activations for its backward.
  const bool split = splits_backward(c.schedule);
  out.peak_memory = -1.0;
  for (int r = 0; r < p; ++r) {
    double live = 0.0, peak = 0.0, rebuild = 0.0;
    for (const task& x : t.program(r)) {
      const double k = costs.of(x.microbatch);
      if (x.op == op_kind::forward) live += k * s.keep.data()[x.stage];
      if (detail::frees_activation[split][static_cast<int>(x.op)]) live -= k * s.keep.data()[x.stage];
      peak = live > peak ? live : peak;
      const double full = k * s.full.data()[x.stage];
      if (c.recompute && !detail::comm_op[static_cast<int>(x.op)] && full > rebuild) rebuild = full;
    }
    const double param_mem = q.state_factor * params.data()[r], act_mem = peak + rebuild;
    if (param_mem + act_mem > out.peak_memory) {
      out.peak_memory = param_mem + act_mem;
      out.peak_rank = r;
      out.parameter_memory = param_mem;
      out.activation_memory = act_mem;
    }
  }
  out.fits = q.cluster.memory_bytes <= 0.0 || out.peak_memory + q.cluster.reserved_bytes <= q.cluster.memory_bytes;
  return out;
}

}  // namespace ctpipe
