// Schedule parameters, their rules, and the words used when a rule is broken.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace ctpipe {

enum class schedule_kind : int {
  naive,        // naive model parallel: one microbatch at a time through all stages
  gpipe,        // fill-drain: all forwards, then all backwards
  one_f_one_b,  // PipeDream-Flush / 1F1B
  interleaved,  // Megatron's interleaved 1F1B (virtual pipeline)
  custom,       // a table that was loaded or written by hand
};

constexpr std::string_view schedule_name(schedule_kind k) {
  switch (k) {
    case schedule_kind::naive:
      return "naive";
    case schedule_kind::gpipe:
      return "gpipe";
    case schedule_kind::one_f_one_b:
      return "1f1b";
    case schedule_kind::interleaved:
      return "interleaved";
    case schedule_kind::custom:
      return "custom";
  }
  return "?";
}

/// The C++ spelling of each generator, used in error messages.
constexpr std::string_view schedule_function(schedule_kind k) {
  switch (k) {
    case schedule_kind::naive:
      return "ctpipe::naive";
    case schedule_kind::gpipe:
      return "ctpipe::gpipe";
    case schedule_kind::one_f_one_b:
      return "ctpipe::one_f_one_b";
    case schedule_kind::interleaved:
      return "ctpipe::interleaved";
    case schedule_kind::custom:
      return "ctpipe::custom";
  }
  return "?";
}

/// A schedule's parameters: a structural type, so it can be a template argument.
/// `group` is Megatron's microbatch group size for interleaving (0 = default: ranks, or
/// microbatches when there are fewer microbatches than ranks).
struct schedule {
  schedule_kind kind = schedule_kind::one_f_one_b;
  int ranks = 1;
  int microbatches = 1;
  int chunks = 1;
  int group = 0;

  constexpr int stages() const { return ranks * chunks; }
  /// The group size the generator uses (resolves the default).
  constexpr int effective_group() const {
    if (group != 0) return group;
    return microbatches < ranks ? microbatches : ranks;
  }
  friend constexpr bool operator==(const schedule&, const schedule&) = default;
};

constexpr schedule naive(int ranks, int microbatches) { return {schedule_kind::naive, ranks, microbatches, 1, 0}; }
constexpr schedule gpipe(int ranks, int microbatches) { return {schedule_kind::gpipe, ranks, microbatches, 1, 0}; }
constexpr schedule one_f_one_b(int ranks, int microbatches) {
  return {schedule_kind::one_f_one_b, ranks, microbatches, 1, 0};
}
constexpr schedule interleaved(int ranks, int microbatches, int chunks, int group = 0) {
  return {schedule_kind::interleaved, ranks, microbatches, chunks, group};
}

/// The rules a schedule's parameters must follow: the one list that the enum, the parameter names,
/// the run-time words (schedule_error) and the compile-time static_asserts (make_table) are
/// generated from. X(rule, parameter, compile-time words, run-time words): the compile-time words
/// follow "ctpipe::<schedule>: "; the run-time words follow "<parameter> (<value>) " and may use
/// p (ranks), m (microbatches) and rem (microbatches mod group), as strings.
#define CTPIPE_PARAM_RULES(X)                                                                                         \
  X(ranks_at_least_one, "ranks", "ranks must be at least 1", "must be at least 1")                                    \
  X(microbatches_at_least_one, "microbatches", "microbatches must be at least 1", "must be at least 1")               \
  X(chunks_at_least_one, "chunks", "chunks must be at least 1", "must be at least 1")                                 \
  X(chunks_only_for_interleaved, "chunks", "chunks must be 1 (only interleaved has chunks)",                          \
    "must be 1 (only interleaved has chunks)")                                                                        \
  X(group_only_for_interleaved, "group", "group must be 0 (only interleaved has a group size)",                       \
    "must be 0 (only interleaved has a group size)")                                                                  \
  X(group_at_least_ranks, "group", "group must be at least ranks", "must be at least ranks (" + p + ")")              \
  X(group_at_most_microbatches, "group", "group must be at most microbatches",                                        \
    "must be at most microbatches (" + m + ")")                                                                       \
  X(group_remainder, "group", "microbatches mod group must be 0 or at least ranks, or the schedule deadlocks",        \
    "must leave a remainder microbatches mod group (" + rem + ") that is 0 or at least ranks (" + p +                 \
        "), or the schedule deadlocks")                                                                               \
  X(group_equals_microbatches, "group", "group must equal microbatches when there are fewer microbatches than ranks", \
    "must equal microbatches (" + m + ") when there are fewer microbatches than ranks (" + p + ")")                   \
  X(stages_fit_in_int, "ranks, chunks and microbatches",                                                              \
    "ranks, microbatches and ranks * chunks must each stay below 2^20",                                               \
    "are too large (each must stay below 2^20, and ranks * chunks too)")

/// The rules a schedule's parameters must follow (CTPIPE_PARAM_RULES), and `ok`.
enum class param_rule : int {
  ok,
#define CTPIPE_DETAIL_PARAM_ENUM(rule, parameter, compile_words, run_words) rule,
  CTPIPE_PARAM_RULES(CTPIPE_DETAIL_PARAM_ENUM)
#undef CTPIPE_DETAIL_PARAM_ENUM
};

/// Which rule a schedule breaks (or `ok`), the parameter's name and its value.
struct param_check {
  param_rule rule = param_rule::ok;
  int value = 0;
  constexpr bool ok() const { return rule == param_rule::ok; }
};

inline constexpr int max_index = 1 << 20;  // stages, microbatches and ranks stay below this

constexpr param_check validate(const schedule& s) {
  if (s.ranks < 1) return {param_rule::ranks_at_least_one, s.ranks};
  if (s.microbatches < 1) return {param_rule::microbatches_at_least_one, s.microbatches};
  if (s.ranks >= max_index) return {param_rule::stages_fit_in_int, s.ranks};
  if (s.microbatches >= max_index) return {param_rule::stages_fit_in_int, s.microbatches};
  if (s.kind == schedule_kind::interleaved) {
    if (s.chunks < 1) return {param_rule::chunks_at_least_one, s.chunks};
    if (static_cast<long long>(s.ranks) * s.chunks >= max_index) return {param_rule::stages_fit_in_int, s.chunks};
    if (s.group != 0) {
      if (s.microbatches < s.ranks) {
        if (s.group != s.microbatches) return {param_rule::group_equals_microbatches, s.group};
      } else {
        if (s.group < s.ranks) return {param_rule::group_at_least_ranks, s.group};
        if (s.group > s.microbatches) return {param_rule::group_at_most_microbatches, s.group};
      }
    }
    const int g = s.effective_group();
    const int rem = s.microbatches % g;
    if (rem != 0 && rem < s.ranks) return {param_rule::group_remainder, g};
  } else {
    if (s.chunks != 1) return {param_rule::chunks_only_for_interleaved, s.chunks};
    if (s.group != 0) return {param_rule::group_only_for_interleaved, s.group};
  }
  return {};
}

/// The parameter a rule is about.
constexpr std::string_view param_name(param_rule r) {
  switch (r) {
    case param_rule::ok:
      return "";
#define CTPIPE_DETAIL_PARAM_NAME(rule, parameter, compile_words, run_words) \
  case param_rule::rule:                                                    \
    return parameter;
      CTPIPE_PARAM_RULES(CTPIPE_DETAIL_PARAM_NAME)
#undef CTPIPE_DETAIL_PARAM_NAME
  }
  return "?";
}

/// The rule in words, with the other parameters it refers to.
inline std::string param_rule_text(const schedule& s, param_rule r) {
  const std::string p = std::to_string(s.ranks), m = std::to_string(s.microbatches);
  const std::string rem = std::to_string(s.microbatches % (s.effective_group() > 0 ? s.effective_group() : 1));
  switch (r) {
    case param_rule::ok:
      return "";
#define CTPIPE_DETAIL_PARAM_TEXT(rule, parameter, compile_words, run_words) \
  case param_rule::rule:                                                    \
    return std::string() + run_words;
      CTPIPE_PARAM_RULES(CTPIPE_DETAIL_PARAM_TEXT)
#undef CTPIPE_DETAIL_PARAM_TEXT
  }
  return "?";
}

/// Thrown at run time for parameters that break a rule; the message names the schedule, the
/// parameter, its value and the rule, in the same words as the compile-time error.
class schedule_error : public std::invalid_argument {
 public:
  schedule_error(const schedule& s, param_check c)
      : std::invalid_argument(std::string(schedule_function(s.kind)) + ": " + std::string(param_name(c.rule)) + " (" +
                              std::to_string(c.value) + ") " + param_rule_text(s, c.rule)),
        params_(s),
        check_(c) {}
  const schedule& params() const noexcept { return params_; }
  param_rule rule() const noexcept { return check_.rule; }

 private:
  schedule params_;
  param_check check_;
};

/// Run-time entry check: throws schedule_error when `s` breaks a rule.
inline void require_valid(const schedule& s) {
  if (auto c = validate(s); !c.ok()) throw schedule_error(s, c);
}

}  // namespace ctpipe
