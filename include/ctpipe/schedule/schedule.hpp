// What a schedule is: the concept every schedule meets (the built-in ones and a user's own), the
// record of its parameters that a table keeps, the rules its parameters must follow and the words
// used when one is broken, at compile time and at run time.
#pragma once

#include <array>
#include <concepts>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>

#include <ctpipe/schedule/task.hpp>

namespace ctpipe {

/// A short name held by value (structural: usable inside a template argument). Longer names are cut.
struct schedule_name {
  static constexpr std::size_t capacity = 31;
  char text[capacity + 1]{};

  constexpr schedule_name() = default;
  template <std::size_t N>
  constexpr schedule_name(const char (&s)[N]) {  // NOLINT: implicit from a string literal on purpose
    for (std::size_t i = 0; i + 1 < N && i < capacity; ++i) text[i] = s[i];
  }
  constexpr explicit schedule_name(std::string_view s) {
    for (std::size_t i = 0; i < s.size() && i < capacity; ++i) text[i] = s[i];
  }
  constexpr std::string_view view() const {
    std::size_t n = 0;
    while (n < capacity && text[n] != '\0') ++n;
    return {text, n};
  }
  friend constexpr bool operator==(const schedule_name&, const schedule_name&) = default;
};

/// The record of a schedule that every table keeps: its name (as the explorer and the formats
/// print it), ranks, microbatches, stages per rank (`chunks`), for grouped schedules the group size
/// in use, and the number of directions. A structural type.
///
/// Directions: in a unidirectional table (1, every schedule but DualPipe) every microbatch visits
/// stages 0 .. S-1 in turn. A bidirectional table (2) runs two pipelines over mirrored copies of
/// the model: the first half of the microbatches visits stages 0 .. S/2-1, the second half stages
/// S/2 .. S-1, and stage S/2 + j is a copy of stage j (see stage_chains in table.hpp).
///
/// Forward only: a table of forward passes alone (evaluation, inference: see forward_pass in
/// schedule/forward.hpp), with no B, I or W and no gradient messages; it is verified under the
/// same rules, less those of the backward.
struct schedule_info {
  schedule_name name{"custom"};
  int ranks = 1;
  int microbatches = 1;
  int chunks = 1;             // stages per rank
  int group = 0;              // microbatch group size (interleaved orders); 0 where the schedule has none
  int directions = 1;         // pipelines fed from different ends (DualPipe: 2)
  bool forward_only = false;  // a forward-only table: F ops alone

  constexpr int stages() const { return ranks * chunks; }
  friend constexpr bool operator==(const schedule_info&, const schedule_info&) = default;
};

/// A table written by hand or read from a file: named "custom".
constexpr schedule_info custom_schedule(int ranks, int microbatches, int chunks = 1, int directions = 1) {
  return {"custom", ranks, microbatches, chunks, 0, directions};
}

/// The rules a schedule's parameters must follow: the one list that the enum, the parameter names,
/// the run-time words (schedule_error) and the compile-time static_asserts are generated from.
/// X(A, rule, parameter, compile-time words, run-time words), with A passed through: the
/// compile-time words follow "<schedule>: "; the run-time words follow "<parameter> (<value>) " and
/// may use p (ranks), m (microbatches), rem (microbatches mod group), two_p and rounds, as strings.
#define CTPIPE_PARAM_RULES_WITH(X, A)                                                                              \
  X(A, ranks_at_least_one, "ranks", "ranks must be at least 1", "must be at least 1")                              \
  X(A, microbatches_at_least_one, "microbatches", "microbatches must be at least 1", "must be at least 1")         \
  X(A, chunks_at_least_one, "chunks", "chunks must be at least 1", "must be at least 1")                           \
  X(A, group_at_least_ranks, "group", "group must be at least ranks", "must be at least ranks (" + p + ")")        \
  X(A, group_at_most_microbatches, "group", "group must be at most microbatches",                                  \
    "must be at most microbatches (" + m + ")")                                                                    \
  X(A, group_remainder, "group", "microbatches mod group must be 0 or at least ranks, or the schedule deadlocks",  \
    "must leave a remainder microbatches mod group (" + rem + ") that is 0 or at least ranks (" + p +              \
        "), or the schedule deadlocks")                                                                            \
  X(A, group_equals_microbatches, "group",                                                                         \
    "group must equal microbatches when there are fewer microbatches than ranks",                                  \
    "must equal microbatches (" + m + ") when there are fewer microbatches than ranks (" + p + ")")                \
  X(A, microbatches_at_least_two_ranks, "microbatches", "microbatches must be at least 2 * ranks",                 \
    "must be at least 2 * ranks (" + two_p + ")")                                                                  \
  X(A, ranks_even, "ranks", "ranks must be even (each rank holds a stage of both directions)",                     \
    "must be even (each rank holds a stage of both directions)")                                                   \
  X(A, microbatches_even, "microbatches", "microbatches must be even (half of them enter at each end)",            \
    "must be even (half of them enter at each end)")                                                               \
  X(A, directions_divide, "directions",                                                                            \
    "directions must be at least 1 and divide both the stages (ranks * chunks) and the microbatches",              \
    "must be at least 1 and divide both the stages (ranks * chunks) and the microbatches (" + m + ")")             \
  X(A, microbatches_multiple_of_rounds, "microbatches",                                                            \
    "microbatches must be a multiple of the rounds (microbatches / ranks, at least 1), as in PyTorch",             \
    "must be a multiple of the rounds, microbatches / ranks (" + rounds + "), as in PyTorch")                      \
  X(A, microbatches_cover_warmup, "microbatches",                                                                  \
    "microbatches (per step) must be at least ranks - 1, so that a step holds the pipeline's warm-up",             \
    "must be at least ranks - 1 (" + p_less + "), so that a step holds the pipeline's warm-up")                    \
  X(A, memory_limit_at_least_one, "memory_limit",                                                                  \
    "memory_limit must be at least one microbatch's activations of a rank's stage "                                \
    "(costs.activation, 1 by default)",                                                                            \
    "must be at least one microbatch's activations of a rank's stage (costs.activation, 1 by default)")            \
  X(A, memory_limit_holds_v_turn, "memory_limit",                                                                  \
    "memory_limit must be at least two microbatches' activations of a stage (2 * costs.activation) "               \
    "on V placement, where the last rank holds both its stages' for a microbatch",                                 \
    "must be at least two microbatches' activations of a stage (2 * costs.activation) on V placement, where the "  \
    "last rank holds both its stages' for a microbatch")                                                           \
  X(A, synthesis_fits, "memory_limit",                                                                             \
    "memory_limit leaves synthesis no order: on V placement its heuristic needs 2 * ranks activations of a stage " \
    "or more and microbatches >= ranks, V-Min 2 * ((ranks + 4) / 3)",                                              \
    "leaves synthesis no order: on V placement its heuristic needs 2 * ranks (" + two_p +                          \
        ") activations of a stage or more and microbatches >= ranks, V-Min 2 * ((ranks + 4) / 3)")                 \
  X(A, memory_units, "costs",                                                                                      \
    "costs.activation must be at least 1, and costs.weight_stash from 0 to costs.activation",                      \
    "must leave costs.activation at least 1 and costs.weight_stash from 0 to costs.activation")                    \
  X(A, ranks_within_synthesis, "ranks",                                                                            \
    "ranks must be at most 32 for synthesis (its per-stage costs), 16 on V placement (two stages a rank)",         \
    "must be at most 32 for synthesis (its per-stage costs), 16 on V placement (two stages a rank)")               \
  X(A, costs_positive, "costs", "every stage's F, I and W cost must be at least 1, and comm at least 0",           \
    "must be at least 1 for every stage's F, I and W, and at least 0 for comm")                                    \
  X(A, stages_fit_in_int, "ranks, chunks and microbatches",                                                        \
    "ranks, microbatches and ranks * chunks must each stay below 2^20",                                            \
    "are too large (each must stay below 2^20, and ranks * chunks too)")

/// The rules a schedule's parameters must follow (CTPIPE_PARAM_RULES_WITH), and `ok`.
enum class param_rule : int {
  ok,
#define CTPIPE_DETAIL_PARAM_ENUM(A, rule, parameter, compile_words, run_words) rule,
  CTPIPE_PARAM_RULES_WITH(CTPIPE_DETAIL_PARAM_ENUM, _)
#undef CTPIPE_DETAIL_PARAM_ENUM
};

/// Which rule a schedule breaks (or `ok`), and the offending value.
struct param_check {
  param_rule rule = param_rule::ok;
  int value = 0;
  constexpr bool ok() const { return rule == param_rule::ok; }
};

namespace detail {
inline constexpr int max_index = 1 << 20;  // stages, microbatches and ranks stay below this
}  // namespace detail

/// Inside a schedule type: the compile-time words of every parameter rule, prefixed with `name`
/// (the schedule's C++ spelling, a string literal), and the same name for run-time errors.
///
///   struct my_schedule { int ranks, microbatches; CTPIPE_SCHEDULE_ERRORS("my::schedule") ... };
///
/// A schedule without it still gets every rule's words, prefixed "ctpipe: a schedule's", with its
/// type in the template arguments of ctpipe::detail::invalid_parameter.
#define CTPIPE_SCHEDULE_ERRORS(name)                                \
  static constexpr ::std::string_view function = name;              \
  template <::ctpipe::param_rule Rule, int Value>                   \
  struct parameter_error {                                          \
    CTPIPE_PARAM_RULES_WITH(CTPIPE_DETAIL_PARAM_ASSERT_NAMED, name) \
    static constexpr bool value = false;                            \
  };
#define CTPIPE_DETAIL_PARAM_ASSERT_NAMED(name, rule, parameter, compile_words, run_words) \
  static_assert(Rule != ::ctpipe::param_rule::rule, name ": " compile_words);

namespace detail {
/// Anything with push(rank, task): what a generator writes into (the concept's archetype).
struct sink_archetype {
  constexpr void push(int, task) {}
};
}  // namespace detail

/// A schedule: a structural value (usable as a template argument) that says
/// - info(): its name, ranks, microbatches and stages per rank (schedule_info);
/// - rank_of(stage): where each stage lives (any placement: loop, V, ...);
/// - emit(sink): each rank's compute ops in program order, as sink.push(rank, task) — one constexpr
///   function for compile time (a fixed-size table) and run time (a growing one).
/// Optional: validate() -> param_check for rules of its own (ranks >= 1, microbatches >= 1 and the
/// size limits are checked for every schedule), CTPIPE_SCHEDULE_ERRORS("name") for the words, and
/// program_length() -> int, the longest program emit writes, where it is known without emitting
/// (make_table then runs emit once instead of twice: for generators that search).
/// Built-in and user-written schedules go through the same entry points: make_table<S>(),
/// generate(s), check, analyse, the formats and the executors.
template <class S>
concept schedule_generator = std::copyable<S> && requires(const S& s, detail::sink_archetype& out, int stage) {
  { s.info() } -> std::same_as<schedule_info>;
  { s.rank_of(stage) } -> std::convertible_to<int>;
  s.emit(out);
};

/// Every rule a schedule's parameters must follow: the ones every schedule has, then its own, then
/// the rule on directions (after its own, whose words say more: "ranks must be even").
template <schedule_generator S>
constexpr param_check validate(const S& s) {
  const schedule_info i = s.info();
  if (i.ranks < 1) return {param_rule::ranks_at_least_one, i.ranks};
  if (i.microbatches < 1) return {param_rule::microbatches_at_least_one, i.microbatches};
  if (i.ranks >= detail::max_index) return {param_rule::stages_fit_in_int, i.ranks};
  if (i.microbatches >= detail::max_index) return {param_rule::stages_fit_in_int, i.microbatches};
  if (i.chunks < 1) return {param_rule::chunks_at_least_one, i.chunks};
  if (static_cast<long long>(i.ranks) * i.chunks >= detail::max_index) return {param_rule::stages_fit_in_int, i.chunks};
  if constexpr (requires {
                  { s.validate() } -> std::same_as<param_check>;
                })
    if (const param_check own = s.validate(); !own.ok()) return own;  // its own words first
  if (i.directions < 1 || i.stages() % i.directions != 0 || i.microbatches % i.directions != 0)
    return {param_rule::directions_divide, i.directions};
  return {};
}

/// The parameter a rule is about.
constexpr std::string_view param_name(param_rule r) {
  switch (r) {
    case param_rule::ok:
      return "";
#define CTPIPE_DETAIL_PARAM_NAME(A, rule, parameter, compile_words, run_words) \
  case param_rule::rule:                                                       \
    return parameter;
      CTPIPE_PARAM_RULES_WITH(CTPIPE_DETAIL_PARAM_NAME, _)
#undef CTPIPE_DETAIL_PARAM_NAME
  }
  return "?";
}

namespace detail {
// A rule's run-time words, as pieces joined once: "must be at least ranks (" + p + ")" with p a
// piece. (Joined with std::string's operator+, g++ 12 warned falsely inside it where this header
// was precompiled: -Warray-bounds, "forming offset [32, 34] is out of the bounds [0, 32]", in the
// move of the temporary string; GCC PR 105651's kind.)
// (At most 8 pieces, the longest rule has 5: one more throws std::out_of_range, never overruns.)
struct rule_words {
  std::array<std::string_view, 8> part{};
  std::size_t n = 0;
  friend rule_words operator+(rule_words a, std::string_view b) {
    a.part.at(a.n++) = b;
    return a;
  }
  friend rule_words operator+(const char* a, const rule_words& b) { return rule_words{{a}, 1} + b; }
  friend rule_words operator+(rule_words a, const rule_words& b) {
    for (std::size_t k = 0; k < b.n; ++k) a.part.at(a.n++) = b.part[k];
    return a;
  }
};
inline std::string rule_text(std::string_view w) { return std::string(w); }
inline std::string rule_text(const rule_words& w) {
  std::size_t size = 0;
  for (std::size_t k = 0; k < w.n; ++k) size += w.part[k].size();
  std::string out;
  out.reserve(size);
  for (std::size_t k = 0; k < w.n; ++k) out.append(w.part[k]);
  return out;
}
}  // namespace detail

/// The rule in words, with the other parameters it refers to.
inline std::string param_rule_text(const schedule_info& s, param_rule r) {
  const std::string ranks = std::to_string(s.ranks), microbatches = std::to_string(s.microbatches);
  const std::string twice = std::to_string(2LL * s.ranks), less = std::to_string(s.ranks - 1LL);
  const std::string remainder = std::to_string(s.microbatches % (s.group > 0 ? s.group : 1));
  const std::string round_count =
      std::to_string(s.ranks > 0 && s.microbatches / s.ranks > 1 ? s.microbatches / s.ranks : 1);
  // The names the rule list's words use.
  const detail::rule_words p{{ranks}, 1}, m{{microbatches}, 1}, two_p{{twice}, 1}, p_less{{less}, 1},
      rem{{remainder}, 1}, rounds{{round_count}, 1};
  switch (r) {
    case param_rule::ok:
      return "";
#define CTPIPE_DETAIL_PARAM_TEXT(A, rule, parameter, compile_words, run_words) \
  case param_rule::rule:                                                       \
    return detail::rule_text(run_words);
      CTPIPE_PARAM_RULES_WITH(CTPIPE_DETAIL_PARAM_TEXT, _)
#undef CTPIPE_DETAIL_PARAM_TEXT
  }
  return "?";
}

/// The name a schedule's errors start with: its C++ spelling where it gives one
/// (CTPIPE_SCHEDULE_ERRORS), its info() name otherwise.
template <schedule_generator S>
std::string schedule_function(const S& s) {
  if constexpr (requires { S::function; })
    return std::string(S::function);
  else
    return std::string(s.info().name.view());
}

/// Thrown at run time for parameters that break a rule; the message names the schedule, the
/// parameter, its value and the rule, in the same words as the compile-time error.
class schedule_error : public std::invalid_argument {
 public:
  schedule_error(const std::string& function, const schedule_info& s, param_check c)
      : std::invalid_argument(function + ": " + std::string(param_name(c.rule)) + " (" + std::to_string(c.value) +
                              ") " + param_rule_text(s, c.rule)),
        params_(s),
        check_(c) {}
  /// The schedule's record (for grouped schedules, with the group size it resolved to).
  const schedule_info& params() const noexcept { return params_; }
  param_rule rule() const noexcept { return check_.rule; }

 private:
  schedule_info params_;
  param_check check_;
};

/// Run-time entry check: throws schedule_error when `s` breaks a rule.
template <schedule_generator S>
void require_valid(const S& s) {
  if (auto c = validate(s); !c.ok()) throw schedule_error(schedule_function(s), s.info(), c);
}

namespace detail {
// A compile-time parameter error of a schedule without CTPIPE_SCHEDULE_ERRORS. The template
// arguments carry the schedule's type, the rule and the offending value.
template <class S, param_rule Rule, int Value>
struct invalid_parameter {
  CTPIPE_PARAM_RULES_WITH(CTPIPE_DETAIL_PARAM_ASSERT_NAMED, "ctpipe: a schedule's parameters")
  static constexpr bool value = false;
};
// The error for schedule S: its own words where it has them.
template <class S, param_rule Rule, int Value>
constexpr bool parameter_error_v() {
  if constexpr (requires { S::template parameter_error<Rule, Value>::value; })
    return S::template parameter_error<Rule, Value>::value;
  else
    return invalid_parameter<S, Rule, Value>::value;
}
}  // namespace detail

}  // namespace ctpipe
