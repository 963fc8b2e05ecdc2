// The property sweep: every schedule, every p <= 16, m <= 64, v <= 4 where valid: the table
// verifies, and makespan and peak live activations equal the closed forms where they apply.
#include <doctest/doctest.h>

#include "test_util.hpp"

namespace {
int closed_form_peak(const ctpipe::schedule& s, int r) {
  const int p = s.ranks, m = s.microbatches, v = s.chunks;
  switch (s.kind) {
    case ctpipe::schedule_kind::naive:
      return 1;
    case ctpipe::schedule_kind::gpipe:
      return m;
    case ctpipe::schedule_kind::one_f_one_b:
      return std::min(p - r, m);
    default:
      if (v == 1) return std::min(p - r, m);
      return std::min(2 * (p - r - 1) + (v - 1) * s.effective_group() + 1, v * m);
  }
}
double closed_form_makespan(const ctpipe::schedule& s) {
  const double p = s.ranks, m = s.microbatches, v = s.chunks, fb = 3.0;  // F = 1, B = 2 per stage
  switch (s.kind) {
    case ctpipe::schedule_kind::naive:
      return m * p * fb;
    case ctpipe::schedule_kind::gpipe:
    case ctpipe::schedule_kind::one_f_one_b:
      return (m + p - 1) * fb;
    default:
      return m * fb + (p - 1) * fb / v;
  }
}
struct counts {
  int tables = 0, closed_form = 0;
};
void check_one(const ctpipe::schedule& s, counts& n) {
  const auto t = ctpipe::generate(s);
  const auto v = ctpipe::verify(t);
  if (!v.ok())
    FAIL_CHECK(ctpipe::schedule_name(s.kind), " p=", s.ranks, " m=", s.microbatches, " v=", s.chunks,
               " G=", s.effective_group(), ": ", ctpipe::message(v));
  if (!v.ok()) return;
  ++n.tables;
  const double f = 1.0 / s.chunks, b = 2.0 / s.chunks;
  const auto r = ctpipe::analyse(t, ctpipe::cost_model{.forward = f, .backward = b});
  // The closed forms hold for m >= p; for interleaved, with whole groups (Megatron's classic case).
  const bool applies = s.microbatches >= s.ranks &&
                       (s.kind != ctpipe::schedule_kind::interleaved || s.microbatches % s.effective_group() == 0);
  if (!applies) return;
  ++n.closed_form;
  if (r.makespan != doctest::Approx(closed_form_makespan(s)))
    FAIL_CHECK(ctpipe::schedule_name(s.kind), " p=", s.ranks, " m=", s.microbatches, " v=", s.chunks,
               " G=", s.effective_group(), ": makespan ", r.makespan, " != ", closed_form_makespan(s));
  for (int rank = 0; rank < s.ranks; ++rank)
    if (r.peak_live[static_cast<std::size_t>(rank)] != closed_form_peak(s, rank))
      FAIL_CHECK(ctpipe::schedule_name(s.kind), " p=", s.ranks, " m=", s.microbatches, " v=", s.chunks, " rank ", rank,
                 ": peak ", r.peak_live[static_cast<std::size_t>(rank)], " != ", closed_form_peak(s, rank));
}
}  // namespace

TEST_CASE("sweep: naive, GPipe, 1F1B for p <= 16, m <= 64") {
  counts n;
  for (int p = 1; p <= 16; ++p)
    for (int m = 1; m <= 64; ++m)
      for (auto s : {ctpipe::naive(p, m), ctpipe::gpipe(p, m), ctpipe::one_f_one_b(p, m)}) check_one(s, n);
  CHECK(n.tables == 3 * 16 * 64);
  MESSAGE("tables verified: ", n.tables, ", closed forms checked: ", n.closed_form);
}

TEST_CASE("sweep: interleaved for p <= 16, m <= 64, v <= 4, default group") {
  counts n;
  for (int p = 1; p <= 16; ++p)
    for (int m = 1; m <= 64; ++m)
      for (int v = 1; v <= 4; ++v) {
        const auto s = ctpipe::interleaved(p, m, v);
        if (ctpipe::validate(s).ok()) check_one(s, n);
      }
  // Valid with the default group (G = p): m < p, or m a multiple of p.
  int expected = 0;
  for (int p = 1; p <= 16; ++p) expected += 4 * (std::min(p - 1, 64) + 64 / p);
  CHECK(n.tables == expected);
  MESSAGE("tables verified: ", n.tables, ", closed forms checked: ", n.closed_form);
}

TEST_CASE("sweep: interleaved with every valid group, p <= 8, m <= 32, v <= 3") {
  counts n;
  for (int p = 1; p <= 8; ++p)
    for (int m = 1; m <= 32; ++m)
      for (int v = 2; v <= 3; ++v)
        for (int g = 1; g <= m; ++g) {
          const auto s = ctpipe::interleaved(p, m, v, g);
          if (ctpipe::validate(s).ok()) check_one(s, n);
        }
  CHECK(n.tables > 500);
  MESSAGE("tables verified: ", n.tables, ", closed forms checked: ", n.closed_form);
}

// Compile-time generation agrees with run-time generation on a sample of the sweep.
namespace {
template <ctpipe::schedule S>
bool same_at_both_times() {
  constexpr auto t = ctpipe::make_table<S>();
  static_assert(ctpipe::check<t>());
  return ctpipe::same_programs(t, ctpipe::generate(S));
}
}  // namespace

TEST_CASE("sweep sample: compile time and run time give the same tables") {
  CHECK(same_at_both_times<ctpipe::naive(5, 3)>());
  CHECK(same_at_both_times<ctpipe::gpipe(16, 64)>());
  CHECK(same_at_both_times<ctpipe::one_f_one_b(7, 13)>());
  CHECK(same_at_both_times<ctpipe::one_f_one_b(16, 1)>());
  CHECK(same_at_both_times<ctpipe::interleaved(3, 9, 4)>());
  CHECK(same_at_both_times<ctpipe::interleaved(4, 12, 2, 8)>());
  CHECK(same_at_both_times<ctpipe::interleaved(8, 5, 3)>());
  CHECK(same_at_both_times<ctpipe::interleaved(16, 32, 2)>());
}
