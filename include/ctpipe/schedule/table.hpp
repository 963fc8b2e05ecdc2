// Task tables: per rank, its ordered program, plus the stage -> rank placement.
//
// task_table is fixed-size and structural (usable as a template argument, built at compile time);
// dynamic_table holds the same thing in std::vectors for run-time use (the explorer, loaded CSV).
// Every algorithm in ctpipe takes either, through the same member functions.
#pragma once

#include <array>
#include <cstddef>
#include <span>
#include <vector>

#include <ctpipe/config.hpp>  // CTPIPE_NTTP_TYPE
#include <ctpipe/schedule/crossing.hpp>
#include <ctpipe/schedule/generate.hpp>
#include <ctpipe/schedule/schedule.hpp>
#include <ctpipe/schedule/task.hpp>

namespace ctpipe {

/// A table whose sizes are template arguments. `Capacity` is the longest program's length;
/// `Crossings` the number of crossings (skip connections between stages, crossing.hpp) it lists.
template <std::size_t Ranks, std::size_t Stages, std::size_t Capacity, std::size_t Crossings = 0>
struct task_table {
  static constexpr std::size_t static_ranks = Ranks;
  static constexpr std::size_t static_stages = Stages;
  static constexpr std::size_t capacity = Capacity;
  static constexpr std::size_t static_crossings = Crossings;

  schedule_info params{};                                    // what generated it ("custom" if nothing did)
  std::array<int, Stages> stage_rank{};                      // stage -> rank placement
  std::array<int, Ranks> length{};                           // ops in each rank's program
  std::array<std::array<task, Capacity>, Ranks> programs{};  // each rank's program, in order
  std::array<crossing, Crossings> crossings{};               // the skip connections its messages carry

  constexpr int ranks() const { return static_cast<int>(Ranks); }
  constexpr int stages() const { return static_cast<int>(Stages); }
  constexpr int microbatches() const { return params.microbatches; }
  constexpr int rank_of(int stage) const { return stage_rank[static_cast<std::size_t>(stage)]; }
  constexpr std::span<const task> program(int rank) const {
    return {programs[static_cast<std::size_t>(rank)].data(),
            static_cast<std::size_t>(length[static_cast<std::size_t>(rank)])};
  }
  constexpr int size() const {
    int n = 0;
    for (int l : length) n += l;
    return n;
  }
  /// Sink interface: appends `t` to rank `rank`'s program.
  constexpr void push(int rank, task t) {
    auto r = static_cast<std::size_t>(rank);
    programs[r][static_cast<std::size_t>(length[r]++)] = t;
  }
};

/// The same table with run-time sizes.
struct dynamic_table {
  static constexpr std::size_t static_ranks = std::dynamic_extent;

  schedule_info params{};
  std::vector<int> stage_rank;
  std::vector<std::vector<task>> programs;
  std::vector<crossing> crossings;

  dynamic_table() = default;
  /// An empty table with `ranks` programs, `stages` stages placed by `placement`, and `microbatches`.
  dynamic_table(schedule_info p, std::vector<int> placement) : params(p), stage_rank(std::move(placement)) {
    programs.resize(static_cast<std::size_t>(p.ranks));
  }

  int ranks() const { return static_cast<int>(programs.size()); }
  int stages() const { return static_cast<int>(stage_rank.size()); }
  int microbatches() const { return params.microbatches; }
  int rank_of(int stage) const { return stage_rank[static_cast<std::size_t>(stage)]; }
  std::span<const task> program(int rank) const { return programs[static_cast<std::size_t>(rank)]; }
  int size() const {
    std::size_t n = 0;
    for (auto& p : programs) n += p.size();
    return static_cast<int>(n);
  }
  void push(int rank, task t) { programs[static_cast<std::size_t>(rank)].push_back(t); }
};

/// Anything with the table interface: task_table, dynamic_table, or a user's own.
template <class T>
concept table_like = requires(const T& t, int i) {
  { t.ranks() } -> std::convertible_to<int>;
  { t.stages() } -> std::convertible_to<int>;
  { t.microbatches() } -> std::convertible_to<int>;
  { t.rank_of(i) } -> std::convertible_to<int>;
  { t.program(i) } -> std::convertible_to<std::span<const task>>;
  { T::static_ranks } -> std::convertible_to<std::size_t>;
};

/// Where a table is written task by task: push(rank, task) appends to that rank's program.
template <class S>
concept table_sink = requires(S& s, task x) {
  s.push(0, x);
};

/// The chains of stages a table's microbatches run through. A unidirectional table has one chain,
/// stages 0 .. S-1, visited by every microbatch. A bidirectional one (schedule_info::directions = 2,
/// DualPipe) has two chains of S/2 stages: microbatches [0, m/2) run through stages [0, S/2),
/// microbatches [m/2, m) through [S/2, S), and stage S/2 + j holds a copy of stage j's layers.
/// A microbatch's F goes up its chain, its B (or I) comes back down.
struct stage_chains {
  int length = 1;        // stages per chain
  int microbatches = 1;  // microbatches per chain

  constexpr int chain_of_stage(int s) const { return s / length; }
  constexpr int chain_of_microbatch(int mb) const { return mb / microbatches; }
  /// The stage of the (one) model whose copy stage `s` is.
  constexpr int model_stage(int s) const { return s % length; }
  constexpr bool first(int s) const { return s % length == 0; }
  constexpr bool last(int s) const { return (s + 1) % length == 0; }
  /// Does microbatch `mb` run through stage `s`?
  constexpr bool visits(int s, int mb) const { return chain_of_stage(s) == chain_of_microbatch(mb); }
  /// The first microbatch that runs through stage `s`.
  constexpr int first_microbatch(int s) const { return chain_of_stage(s) * microbatches; }
};

/// The directions of a table: its schedule_info's, or 1 for a table type without one.
template <table_like T>
constexpr int directions_of(const T& t) {
  if constexpr (requires { t.params.directions; })
    return t.params.directions;
  else
    return 1;
}

/// Is the table forward only (schedule_info::forward_only)? false for a table type without params.
template <table_like T>
constexpr bool forward_only_of(const T& t) {
  if constexpr (requires { t.params.forward_only; })
    return t.params.forward_only;
  else
    return false;
}

/// The crossings a table lists (its `crossings`; none for a table type without them).
template <table_like T>
constexpr std::span<const crossing> crossings_of(const T& t) {
  if constexpr (requires { std::span<const crossing>(t.crossings); })
    return std::span<const crossing>(t.crossings);
  else
    return {};
}

/// A table's chains (see stage_chains). Directions that do not divide the stages and microbatches
/// (which verify reports) give one chain.
template <table_like T>
constexpr stage_chains chains_of(const T& t) {
  const int d = directions_of(t), S = t.stages(), m = t.microbatches();
  if (d <= 1 || S % d != 0 || m % d != 0) return {S > 0 ? S : 1, m > 0 ? m : 1};
  return {S / d, m / d};
}

/// Same placement, the same crossings (their stages: bytes are not compared) and the same programs,
/// op for op (parameters are not compared).
template <table_like A, table_like B>
constexpr bool same_programs(const A& a, const B& b) {
  if (a.ranks() != b.ranks() || a.stages() != b.stages() || a.microbatches() != b.microbatches()) return false;
  for (int s = 0; s < a.stages(); ++s)
    if (a.rank_of(s) != b.rank_of(s)) return false;
  const auto ca = crossings_of(a), cb = crossings_of(b);
  if (ca.size() != cb.size()) return false;
  for (std::size_t k = 0; k < ca.size(); ++k)
    if (ca[k].from != cb[k].from || ca[k].to != cb[k].to) return false;
  for (int r = 0; r < a.ranks(); ++r) {
    auto pa = a.program(r);
    auto pb = b.program(r);
    if (pa.size() != pb.size()) return false;
    for (std::size_t i = 0; i < pa.size(); ++i)
      if (!(pa[i] == pb[i])) return false;
  }
  return true;
}

namespace detail {

// The sinks that size and fill a task_table in a constant evaluation hold built-in arrays, and
// the filler writes through a pointer to each rank's row: g++ 12 evaluates a store there about a
// third as costly (time and memory) as one through std::array's operator[] (bench/README.md,
// the compile time of a table).
template <std::size_t Ranks>
struct length_counter {
  int length[Ranks > 0 ? Ranks : 1]{};
  constexpr void push(int rank, task) { ++length[rank]; }
  constexpr int max() const {
    int m = 0;
    for (int l : length) m = l > m ? l : m;
    return m;
  }
};

template <std::size_t Ranks>
struct row_writer {
  task* row[Ranks > 0 ? Ranks : 1]{};
  int length[Ranks > 0 ? Ranks : 1]{};
  constexpr void push(int rank, task t) { row[rank][length[rank]++] = t; }
};

// Appends what `emit(sink)` pushes to the programs of the task_table `t`.
template <class Table, class Emit>
constexpr void fill_programs(Table& t, Emit&& emit) {
  row_writer<Table::static_ranks> w{};
  for (std::size_t r = 0; r < Table::static_ranks; ++r) {
    w.row[r] = t.programs[r].data();
    w.length[r] = t.length[r];
  }
  emit(w);
  for (std::size_t r = 0; r < Table::static_ranks; ++r) t.length[r] = w.length[r];
}

// The longest program schedule S writes: its own figure where it gives one (program_length(), for
// generators that cost more than a counting pass), a counting pass over its generator otherwise.
template <auto S>
consteval int emitted_capacity() {
  if constexpr (requires { S.program_length(); }) {
    return S.program_length();
  } else {
    length_counter<static_cast<std::size_t>(S.info().ranks)> c{};
    S.emit(c);
    return c.max();
  }
}
}  // namespace detail

/// The compute ops of schedule `S` (no sends or receives), built at compile time.
/// Parameters that break a rule fail to compile with a message naming the schedule, the
/// parameter and the rule; the template arguments of the failing check show the value.
template <auto S>
requires schedule_generator<CTPIPE_NTTP_TYPE(S)>
consteval auto make_compute_table() {
  constexpr param_check c = validate(S);
  if constexpr (!c.ok()) {
    static_assert(detail::parameter_error_v<CTPIPE_NTTP_TYPE(S), c.rule, c.value>(),
                  "ctpipe: invalid schedule parameters");
    return task_table<1, 1, 0>{};
  } else {
    constexpr schedule_info info = S.info();
    task_table<static_cast<std::size_t>(info.ranks), static_cast<std::size_t>(info.stages()),
               static_cast<std::size_t>(detail::emitted_capacity<S>())>
        t{};
    t.params = info;
    for (int s = 0; s < info.stages(); ++s) t.stage_rank[static_cast<std::size_t>(s)] = S.rank_of(s);
    detail::fill_programs(t, [](auto& sink) { S.emit(sink); });
    return t;
  }
}

/// Run time: the compute ops of `s`. Throws schedule_error for parameters that break a rule.
template <schedule_generator S>
dynamic_table generate_compute(const S& s) {
  require_valid(s);
  const schedule_info info = s.info();
  std::vector<int> placement(static_cast<std::size_t>(info.stages()));
  for (int st = 0; st < info.stages(); ++st) placement[static_cast<std::size_t>(st)] = s.rank_of(st);
  dynamic_table t(info, std::move(placement));
  s.emit(t);
  return t;
}

}  // namespace ctpipe
