// The property sweep: every schedule, every p <= 16, m <= 64, v <= 4 where valid: the table
// verifies, and makespan, span and peak live activations equal the closed forms where they apply.
// For p <= 8, m <= 16 the table is lowered again with skip connections (crossings), which must
// verify and, their messages being free, change no figure; and its forward-only table verifies
// (check_forward).
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "support/test_util.hpp"

namespace {

struct counts {
  int tables = 0, closed_form = 0, with_skips = 0, forward_only = 0;
};

std::string name_of(const ctpipe::schedule_info& i) {
  return std::string(i.name.view()) + " p=" + std::to_string(i.ranks) + " m=" + std::to_string(i.microbatches) +
         " v=" + std::to_string(i.chunks) + (i.group ? " G=" + std::to_string(i.group) : std::string());
}

// The closed forms of one schedule: a cost model (per stage, halved per chunk), and what the
// figures must be under it where they apply (applies() false: verification only).
struct closed_form {
  ctpipe::cost_model costs{};
  bool applies = false;
  double makespan = -1.0;    // < 0: not checked
  double max_span = -1.0;    // < 0: not checked
  double max_bubble = -1.0;  // < 0: not checked
  int peak_of_rank[64]{};    // < 1: not checked
  int max_peak = -1;         // the largest over the ranks; < 0: not checked
};

// `t` lowered with a crossing over every two stages of its chain and one from the first stage to the
// last: it verifies, and since the chain already puts a crossing's producer before its consumer
// (and their backwards the other way), free skip messages change neither the timing nor the
// activations held.
void check_skips(const ctpipe::dynamic_table& t, const ctpipe::cost_model& costs,
                 const ctpipe::report<std::dynamic_extent>& plain, const std::string& name, counts& n) {
  const int length = ctpipe::chains_of(t).length;
  if (length < 3) return;
  std::vector<ctpipe::crossing> cs;
  for (int a = 0; a + 2 < length; ++a) {
    cs.push_back({a, a + 2, 1});
    if (a == 0 && length > 3) cs.push_back({0, length - 1, 1});
  }
  const auto u = ctpipe::lower(t, cs);
  const auto v = ctpipe::verify(u);
  if (!v.ok()) FAIL_CHECK(name, " with skips: ", ctpipe::message(v));
  if (!v.ok()) return;
  ++n.with_skips;
  const auto r = ctpipe::analyse(u, costs);
  if (r.makespan != plain.makespan || r.peak_live != plain.peak_live)
    FAIL_CHECK(name, " with skips: makespan ", r.makespan, " (", plain.makespan, " without), peak ", r.peak_live[0],
               " (", plain.peak_live[0], ")");
}

// `t`'s forward-only table (forward_table): it verifies, runs the F of each microbatch on each
// stage of its chain once (and no backward op), holds one activation at a time on every rank that
// runs an F, and ends no later than `t`. With one stage per rank and one direction, each rank's F ops come in
// microbatch order, so the pass takes (m + p - 1) forwards.
void check_forward(const ctpipe::dynamic_table& t, const ctpipe::cost_model& costs,
                   const ctpipe::report<std::dynamic_extent>& plain, const std::string& name, counts& n) {
  const ctpipe::dynamic_table f = ctpipe::forward_table(t);
  const auto v = ctpipe::verify(f);
  if (!v.ok()) FAIL_CHECK(name, " forward only: ", ctpipe::message(v));
  if (!v.ok()) return;
  ++n.forward_only;
  int forwards = 0;
  for (int r = 0; r < f.ranks(); ++r)
    for (const ctpipe::task& x : f.program(r)) {
      forwards += x.op == ctpipe::op_kind::forward;
      if (x.op != ctpipe::op_kind::forward && x.op != ctpipe::op_kind::send_forward &&
          x.op != ctpipe::op_kind::recv_forward)
        FAIL_CHECK(name, " forward only: rank ", r, " runs ", ctpipe::describe(x));
    }
  if (forwards != t.stages() * t.microbatches() / t.params.directions)
    FAIL_CHECK(name, " forward only: ", forwards, " F ops");
  const auto r = ctpipe::analyse(f, costs);
  for (int k = 0; k < f.ranks(); ++k)
    if (r.peak_live[static_cast<std::size_t>(k)] != (f.program(k).empty() ? 0 : 1))
      FAIL_CHECK(name, " forward only: rank ", k, " holds ", r.peak_live[static_cast<std::size_t>(k)]);
  if (r.makespan > plain.makespan) FAIL_CHECK(name, " forward only: makespan ", r.makespan, " > ", plain.makespan);
  if (t.params.chunks == 1 && t.params.directions == 1 &&
      r.makespan != doctest::Approx((t.microbatches() + t.ranks() - 1) * costs.forward))
    FAIL_CHECK(name, " forward only: makespan ", r.makespan);
}

template <class S>
void check_one(const S& s, const closed_form& cf, counts& n) {
  const auto t = ctpipe::generate(s);
  const auto v = ctpipe::verify(t);
  if (!v.ok()) FAIL_CHECK(name_of(s.info()), ": ", ctpipe::message(v));
  if (!v.ok()) return;
  ++n.tables;
  const auto r = ctpipe::analyse(t, cf.costs);
  if (s.info().ranks <= 8 && s.info().microbatches <= 16) {
    check_skips(t, cf.costs, r, name_of(s.info()), n);
    check_forward(t, cf.costs, r, name_of(s.info()), n);
  }
  if (!cf.applies) return;
  ++n.closed_form;
  if (cf.makespan >= 0 && r.makespan != doctest::Approx(cf.makespan))
    FAIL_CHECK(name_of(s.info()), ": makespan ", r.makespan, " != ", cf.makespan);
  if (cf.max_span >= 0 && r.max_span() != doctest::Approx(cf.max_span))
    FAIL_CHECK(name_of(s.info()), ": max span ", r.max_span(), " != ", cf.max_span);
  if (cf.max_bubble >= 0 && r.max_bubble() != doctest::Approx(cf.max_bubble))
    FAIL_CHECK(name_of(s.info()), ": max bubble ", r.max_bubble(), " != ", cf.max_bubble);
  if (cf.max_peak >= 0 && *std::max_element(r.peak_live.begin(), r.peak_live.end()) != cf.max_peak)
    FAIL_CHECK(name_of(s.info()), ": peak ", *std::max_element(r.peak_live.begin(), r.peak_live.end()),
               " != ", cf.max_peak);
  for (int rank = 0; rank < s.info().ranks; ++rank)
    if (cf.peak_of_rank[rank] > 0 && r.peak_live[static_cast<std::size_t>(rank)] != cf.peak_of_rank[rank])
      FAIL_CHECK(name_of(s.info()), " rank ", rank, ": peak ", r.peak_live[static_cast<std::size_t>(rank)],
                 " != ", cf.peak_of_rank[rank]);
}

// F = 1, B = 2 per stage (per chunk F/v, B/v).
closed_form full_backward(int v) {
  closed_form c;
  c.costs = ctpipe::cost_model{.forward = 1.0 / v, .backward = 2.0 / v};
  return c;
}
// F = I = W = 1 per stage (per chunk 1/v each).
closed_form split_backward(int v) {
  closed_form c;
  c.costs = ctpipe::cost_model{
      .forward = 1.0 / v, .backward = 2.0 / v, .backward_input = 1.0 / v, .backward_weight = 1.0 / v};
  return c;
}

}  // namespace

TEST_CASE("sweep: naive, GPipe, 1F1B for p <= 16, m <= 64") {
  counts n;
  for (int p = 1; p <= 16; ++p)
    for (int m = 1; m <= 64; ++m) {
      closed_form c = full_backward(1);
      c.applies = m >= p;
      for (int r = 0; r < p; ++r) c.peak_of_rank[r] = 1;
      c.makespan = 3.0 * m * p;
      check_one(ctpipe::naive(p, m), c, n);
      c.makespan = 3.0 * (m + p - 1);
      for (int r = 0; r < p; ++r) c.peak_of_rank[r] = m;
      check_one(ctpipe::gpipe(p, m), c, n);
      for (int r = 0; r < p; ++r) c.peak_of_rank[r] = std::min(p - r, m);
      check_one(ctpipe::one_f_one_b(p, m), c, n);
    }
  CHECK(n.tables == 3 * 16 * 64);
  CHECK(n.with_skips > 0);
  CHECK(n.forward_only > 0);
  MESSAGE("tables verified: ", n.tables, ", closed forms checked: ", n.closed_form, ", with skips: ", n.with_skips);
}

namespace {
void check_interleaved(const ctpipe::interleaved_schedule& s, counts& n) {
  const int p = s.ranks, m = s.microbatches, v = s.chunks, g = s.effective_group();
  closed_form c = full_backward(v);
  // The closed forms hold for m >= p with whole groups (Megatron's classic case).
  c.applies = m >= p && m % g == 0;
  c.makespan = 3.0 * m + 3.0 * (p - 1) / v;
  for (int r = 0; r < p; ++r)
    c.peak_of_rank[r] = v == 1 ? std::min(p - r, m) : std::min(2 * (p - r - 1) + (v - 1) * g + 1, v * m);
  check_one(s, c, n);
}
}  // namespace

TEST_CASE("sweep: interleaved for p <= 16, m <= 64, v <= 4, default group") {
  counts n;
  for (int p = 1; p <= 16; ++p)
    for (int m = 1; m <= 64; ++m)
      for (int v = 1; v <= 4; ++v) {
        const auto s = ctpipe::interleaved(p, m, v);
        if (ctpipe::validate(s).ok()) check_interleaved(s, n);
      }
  // Valid with the default group (G = p): m < p, or m a multiple of p.
  int expected = 0;
  for (int p = 1; p <= 16; ++p) expected += 4 * (std::min(p - 1, 64) + 64 / p);
  CHECK(n.tables == expected);
  CHECK(n.with_skips > 0);
  CHECK(n.forward_only > 0);
  MESSAGE("tables verified: ", n.tables, ", closed forms checked: ", n.closed_form, ", with skips: ", n.with_skips);
}

TEST_CASE("sweep: interleaved with every valid group, p <= 8, m <= 32, v <= 3") {
  counts n;
  for (int p = 1; p <= 8; ++p)
    for (int m = 1; m <= 32; ++m)
      for (int v = 2; v <= 3; ++v)
        for (int g = 1; g <= m; ++g) {
          const auto s = ctpipe::interleaved(p, m, v, g);
          if (ctpipe::validate(s).ok()) check_interleaved(s, n);
        }
  CHECK(n.tables > 500);
  CHECK(n.with_skips > 0);
  CHECK(n.forward_only > 0);
  MESSAGE("tables verified: ", n.tables, ", closed forms checked: ", n.closed_form, ", with skips: ", n.with_skips);
}

TEST_CASE("sweep: looped BFS for p <= 16, m <= 64, v <= 4") {
  counts n;
  for (int p = 1; p <= 16; ++p)
    for (int m = 1; m <= 64; ++m)
      for (int v = 1; v <= 4; ++v) {
        closed_form c = full_backward(v);
        c.applies = m >= p;
        c.makespan = 3.0 * m + 3.0 * (p - 1) / v;  // as interleaved at v
        for (int r = 0; r < p; ++r) c.peak_of_rank[r] = v * m;
        check_one(ctpipe::looped_bfs(p, m, v), c, n);
      }
  CHECK(n.tables == 16 * 64 * 4);
  CHECK(n.with_skips > 0);
  CHECK(n.forward_only > 0);
  MESSAGE("tables verified: ", n.tables, ", closed forms checked: ", n.closed_form, ", with skips: ", n.with_skips);
}

TEST_CASE("sweep: ZB-H1 and ZB-H2 for p <= 16, m <= 64") {
  counts n;
  for (int p = 1; p <= 16; ++p)
    for (int m = 1; m <= 64; ++m) {
      // F = I = W = 1. ZB-H1: makespan m(F+I+W) + (p-1)(F+I-W), p held on every rank (m >= p).
      closed_form h1 = split_backward(1);
      h1.applies = m >= p;
      h1.makespan = 3.0 * m + (p - 1);
      for (int r = 0; r < p; ++r) h1.peak_of_rank[r] = p;
      check_one(ctpipe::zb_h1(p, m), h1, n);
      // ZB-H2: every rank's span is m(F+I+W) (zero bubble), peak 2p-1 (m >= 2p-1).
      closed_form h2 = split_backward(1);
      h2.applies = m >= 2 * p - 1;
      h2.max_span = 3.0 * m;
      for (int r = 0; r < p; ++r) h2.peak_of_rank[r] = 2 * p - 1;
      check_one(ctpipe::zb_h2(p, m), h2, n);
    }
  CHECK(n.tables == 2 * 16 * 64);
  CHECK(n.with_skips > 0);
  CHECK(n.forward_only > 0);
  MESSAGE("tables verified: ", n.tables, ", closed forms checked: ", n.closed_form, ", with skips: ", n.with_skips);
}

TEST_CASE("sweep: interleaved zero bubble for p <= 16, m <= 64, v <= 4") {
  counts n;
  int valid = 0;
  for (int p = 1; p <= 16; ++p)
    for (int m = 1; m <= 64; ++m)
      for (int v = 1; v <= 4; ++v) {
        const auto s = ctpipe::interleaved_zero_bubble(p, m, v);
        if (!ctpipe::validate(s).ok()) continue;
        ++valid;
        closed_form c = split_backward(v);
        // One chunk: ZB-H1.
        c.applies = v == 1 && m >= p;
        c.makespan = 3.0 * m + (p - 1);
        check_one(s, c, n);
        if (v == 1) CHECK(ctpipe::same_programs(ctpipe::generate(s), ctpipe::generate(ctpipe::zb_h1(p, m))));
      }
  CHECK(n.tables == valid);
  int expected = 0;  // PyTorch's rule: m a multiple of its rounds max(1, m / p)
  for (int p = 1; p <= 16; ++p)
    for (int m = 1; m <= 64; ++m) expected += 4 * (m % std::max(1, m / p) == 0);
  CHECK(valid == expected);
  CHECK(n.with_skips > 0);
  CHECK(n.forward_only > 0);
  MESSAGE("tables verified: ", n.tables, ", closed forms checked: ", n.closed_form, ", with skips: ", n.with_skips);
}

TEST_CASE("sweep: ZB-V, V-Min, V-Half for p <= 16, m <= 64, DualPipeV for p <= 16, 2p <= m <= 64") {
  counts n;
  int dualpipe = 0;
  for (int p = 1; p <= 16; ++p)
    for (int m = 1; m <= 64; ++m) {
      // ZB-V at F = I = W: zero bubble, every rank's span m(F+I+W), from m >= 2p-1 on.
      closed_form c = split_backward(2);
      c.applies = m >= 2 * p - 1;
      c.max_span = 3.0 * m;
      check_one(ctpipe::zb_v(p, m), c, n);
      // V-Min and V-Half: the authors' peaks, (p+4) div 3 and (p+2) div 2 microbatches of a rank's
      // layers (two stage activations each; never more than the 2m a step has), against 1F1B's p.
      closed_form vm = split_backward(2), vh = split_backward(2);
      vm.applies = vh.applies = true;
      vm.max_peak = std::min(2 * ((p + 4) / 3), 2 * m);
      vh.max_peak = std::min(2 * ((p + 2) / 2), 2 * m);
      check_one(ctpipe::v_min(p, m), vm, n);
      check_one(ctpipe::v_half(p, m), vh, n);
      if (m >= 2 * p) {
        ++dualpipe;
        check_one(ctpipe::dualpipe_v(p, m), split_backward(2), n);
      }
    }
  CHECK(n.tables == 3 * 16 * 64 + dualpipe);
  CHECK(n.with_skips > 0);
  CHECK(n.forward_only > 0);
  MESSAGE("tables verified: ", n.tables, ", closed forms checked: ", n.closed_form, ", with skips: ", n.with_skips);
}

TEST_CASE("sweep: DualPipe for even p <= 16, even m with 2p <= m <= 64") {
  // At F = I = W = 1 (B = F&B - F = 2): every rank holds at most p + 1 stages' activations, and the
  // largest per-rank bubble is DualPipe's (p/2 - 1)(F&B + B - 3W) = p - 2.
  counts n;
  int expected = 0;
  for (int p = 2; p <= 16; p += 2)
    for (int m = 2 * p; m <= 64; m += 2) {
      ++expected;
      closed_form c = split_backward(1);
      c.applies = true;
      c.max_bubble = p - 2;
      for (int r = 0; r < p; ++r) c.peak_of_rank[r] = p + 1;
      check_one(ctpipe::dualpipe(p, m), c, n);
    }
  CHECK(n.tables == expected);
  CHECK(n.closed_form == expected);
  CHECK(n.forward_only > 0);
  MESSAGE("tables verified: ", n.tables);
}

// Compile-time generation agrees with run-time generation on a sample of the sweep.
namespace {
template <auto S>
bool same_at_both_times() {
  constexpr auto t = ctpipe::make_table<S>();
  static_assert(ctpipe::check<t>());
  constexpr auto f = ctpipe::make_forward_table<t>();  // and its forward-only table
  static_assert(ctpipe::check<f>() && f.params.forward_only);
  return ctpipe::same_programs(t, ctpipe::generate(S)) &&
         ctpipe::same_programs(f, ctpipe::forward_table(ctpipe::generate(S)));
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
  CHECK(same_at_both_times<ctpipe::looped_bfs(5, 7, 3)>());
  CHECK(same_at_both_times<ctpipe::zb_h1(6, 3)>());
  CHECK(same_at_both_times<ctpipe::zb_h2(5, 17)>());
  CHECK(same_at_both_times<ctpipe::interleaved_zero_bubble(4, 12, 3)>());
  CHECK(same_at_both_times<ctpipe::interleaved_zero_bubble(8, 3, 2)>());
  CHECK(same_at_both_times<ctpipe::zb_v(6, 4)>());
  CHECK(same_at_both_times<ctpipe::zb_v(16, 64)>());
  CHECK(same_at_both_times<ctpipe::v_min(5, 7)>());
  CHECK(same_at_both_times<ctpipe::v_half(3, 4)>());
  CHECK(same_at_both_times<ctpipe::dualpipe_v(3, 6)>());
  CHECK(same_at_both_times<ctpipe::dualpipe_v(8, 20)>());
  CHECK(same_at_both_times<ctpipe::dualpipe(2, 4)>());
  CHECK(same_at_both_times<ctpipe::dualpipe(8, 22)>());
}
