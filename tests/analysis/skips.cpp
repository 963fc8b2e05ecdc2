// Skip messages: the crossings of a table (skip connections between stages that are not neighbours)
// lowered into messages straight from the producing rank to each consuming one, every rule they can
// break, and what they cost in the simulation and the memory plan.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <vector>

#include "support/test_util.hpp"

using ctpipe::check_rule;
using ctpipe::crossing;
using ctpipe::op_kind;
using ctpipe::task;

namespace {

// Stage 0 feeds stage 2, stage 1 feeds stage 3.
constexpr std::array<crossing, 2> two_skips{{{0, 2, 64}, {1, 3, 32}}};

// Every skip message joins its crossing's two stages, on the ranks that hold them.
template <class Table>
constexpr bool straight(const Table& t) {
  for (int r = 0; r < t.ranks(); ++r)
    for (const task& x : t.program(r))
      if (ctpipe::is_skip(x.op) && (x.peer != t.rank_of(x.other) || x.peer == r ||
                                    (x.other > x.stage ? x.other - x.stage : x.stage - x.other) < 2))
        return false;
  return true;
}
template <class Table>
constexpr int count_skips(const Table& t) {
  int n = 0;
  for (int r = 0; r < t.ranks(); ++r)
    for (const task& x : t.program(r)) n += ctpipe::is_skip(x.op);
  return n;
}

// At compile time: the table lists its crossings, verifies, and carries four messages per
// crossing and microbatch (value and gradient, each sent and received), all sent straight.
constexpr auto skip_1f1b = ctpipe::make_table<ctpipe::one_f_one_b(4, 4), two_skips>();
static_assert(ctpipe::check<skip_1f1b>());
static_assert(skip_1f1b.crossings == two_skips);
static_assert(straight(skip_1f1b) && count_skips(skip_1f1b) == 2 * 4 * 4);
static_assert(skip_1f1b.size() == ctpipe::make_table<ctpipe::one_f_one_b(4, 4)>().size() + 2 * 4 * 4);
// Free messages cost nothing: the chain already orders a crossing's ends.
static_assert(ctpipe::analyse(skip_1f1b).makespan ==
              ctpipe::analyse(ctpipe::make_table<ctpipe::one_f_one_b(4, 4)>()).makespan);
// Interleaved p = 2, v = 2: stages 0 and 2 are both on rank 0, so that crossing sends nothing.
constexpr std::array<crossing, 2> near_and_far{{{0, 2, 8}, {0, 3, 8}}};
constexpr auto skip_interleaved = ctpipe::make_table<ctpipe::interleaved(2, 4, 2), near_and_far>();
static_assert(ctpipe::check<skip_interleaved>() && straight(skip_interleaved));
static_assert(count_skips(skip_interleaved) == 4 * 4);  // only 0 -> 3 crosses ranks
// Two directions: each chain has its copy of the crossing.
constexpr std::array<crossing, 1> first_to_last{{{0, 3, 8}}};
constexpr auto skip_dualpipe = ctpipe::make_table<ctpipe::dualpipe(4, 8), first_to_last>();
static_assert(ctpipe::check<skip_dualpipe>() && straight(skip_dualpipe) && count_skips(skip_dualpipe) == 4 * 8);

std::string ops(const ctpipe::dynamic_table& t, int r, std::size_t n) {
  std::string s;
  for (std::size_t i = 0; i < n && i < t.programs[static_cast<std::size_t>(r)].size(); ++i)
    s += (s.empty() ? "" : ", ") + ctpipe::describe(t.programs[static_cast<std::size_t>(r)][i]);
  return s;
}

// The position of the first op of rank r that `pred` accepts.
template <class Pred>
std::size_t find(const ctpipe::dynamic_table& t, int r, Pred pred) {
  const auto& p = t.programs[static_cast<std::size_t>(r)];
  return static_cast<std::size_t>(std::find_if(p.begin(), p.end(), pred) - p.begin());
}

void expect(const ctpipe::verification& v, check_rule rule, int rank, int position) {
  CHECK_MESSAGE(v.rule == rule, ctpipe::message(v));
  CHECK(v.rank == rank);
  CHECK(v.position == position);
}

}  // namespace

TEST_CASE(
    "skips: a crossing's value goes straight from its producer's rank to its consumer's, after the one and "
    "before the other") {
  const auto t = ctpipe::generate(ctpipe::one_f_one_b(4, 4), two_skips);
  CHECK(ctpipe::same_programs(t, skip_1f1b));
  CHECK(ops(t, 0, 3) == "F stage 0 mb 0, SEND_F stage 0 mb 0 to rank 1, SEND_SKIP_F stage 0 mb 0 to rank 2 (stage 2)");
  CHECK(ops(t, 2, 3) ==
        "RECV_F stage 2 mb 0 from rank 1, RECV_SKIP_F stage 2 mb 0 from rank 0 (stage 0), F stage 2 mb 0");
  // Rank 1, between them, relays nothing of crossing 0 -> 2: its skip messages are its own crossing's.
  for (const task& x : t.programs[1])
    if (ctpipe::is_skip(x.op)) CHECK(((x.stage == 1 && x.other == 3) || (x.stage == 3 && x.other == 1)));
  // The gradient comes back the same way: after stage 2's B, before stage 0's.
  const auto b2 = find(t, 2, [](const task& x) { return x.op == op_kind::backward && x.microbatch == 0; });
  CHECK(t.programs[2][b2 + 2] == task{op_kind::send_skip_backward, 2, 0, 0, false, 0});
  const auto b0 = find(t, 0, [](const task& x) { return x.op == op_kind::backward && x.microbatch == 0; });
  CHECK(t.programs[0][b0 - 1] == task{op_kind::recv_skip_backward, 0, 0, 2, false, 2});
  // Lowering a lowered table lays the same messages again.
  CHECK(ctpipe::same_programs(ctpipe::lower(t), t));
  CHECK(t.crossings == std::vector<crossing>(two_skips.begin(), two_skips.end()));
}

TEST_CASE("skips: every schedule kind with crossings verifies, at p = 1..4") {
  int checked = 0;
  auto one = [&](const auto& s) {
    const int length = ctpipe::chains_of(ctpipe::generate(s)).length;
    std::vector<crossing> cs;
    for (int a = 0; a < length; ++a)
      for (int b = a + 2; b < length; ++b) cs.push_back({a, b, 4});
    const auto t = ctpipe::generate(s, cs);
    const auto v = ctpipe::verify(t);
    CHECK_MESSAGE(v.ok(), s.info().name.view(), " p=", s.info().ranks, ": ", ctpipe::message(v));
    CHECK(straight(t));
    ++checked;
  };
  for (int p = 1; p <= 4; ++p) {
    one(ctpipe::naive(p, 4));
    one(ctpipe::gpipe(p, 4));
    one(ctpipe::one_f_one_b(p, 4));
    one(ctpipe::interleaved(p, 2 * p, 2));
    one(ctpipe::looped_bfs(p, 4, 2));
    one(ctpipe::zb_h1(p, 4));
    one(ctpipe::zb_h2(p, 4));
    one(ctpipe::zb_v(p, 2 * p));
    one(ctpipe::dualpipe_v(p, 2 * p));
    if (p % 2 == 0) one(ctpipe::dualpipe(p, 2 * p));
  }
  CHECK(checked == 4 * 9 + 2);
}

TEST_CASE("skips: the crossings a table lists must be in range, in order, each once") {
  const auto t = ctpipe::generate(ctpipe::one_f_one_b(4, 2));
  for (const auto& cs :
       {std::vector<crossing>{{0, 1, 4}}, std::vector<crossing>{{1, 4, 4}}, std::vector<crossing>{{-1, 2, 4}},
        std::vector<crossing>{{1, 3, 4}, {0, 2, 4}}, std::vector<crossing>{{0, 2, 4}, {0, 2, 8}}}) {
    auto u = t;
    u.crossings = cs;
    const auto v = ctpipe::verify(u);
    CHECK_MESSAGE(v.rule == check_rule::bad_crossing, ctpipe::message(v));
  }
  auto u = t;
  u.crossings = {{0, 2, 4}, {0, 1, 4}};
  CHECK(ctpipe::message(ctpipe::verify(u)) ==
        "crossing 1 (stage 0 to stage 1): the crossings a table lists must each join two stages of a chain at least "
        "two apart, in increasing order of (from, to), each pair once");
}

TEST_CASE("skips: each rule a skip message can break") {
  const auto good = ctpipe::generate(ctpipe::one_f_one_b(4, 2), two_skips);
  REQUIRE(ctpipe::verify(good).ok());
  const auto at = [&](int r, op_kind k, int mb) {
    return find(good, r, [&](const task& x) { return x.op == k && x.microbatch == mb; });
  };
  auto erase = [](ctpipe::dynamic_table t, int r, std::size_t i) {
    t.programs[static_cast<std::size_t>(r)].erase(t.programs[static_cast<std::size_t>(r)].begin() +
                                                  static_cast<std::ptrdiff_t>(i));
    return t;
  };
  // A missing receive is reported at the op that needs it, a missing send at the op that makes it.
  {
    const auto t = erase(good, 2, at(2, op_kind::recv_skip_forward, 1));
    expect(ctpipe::verify(t), check_rule::missing_receive, 2,
           static_cast<int>(find(t, 2, [](const task& x) { return x.op == op_kind::forward && x.microbatch == 1; })));
  }
  expect(ctpipe::verify(erase(good, 0, at(0, op_kind::send_skip_forward, 0))), check_rule::missing_send, 0,
         static_cast<int>(at(0, op_kind::forward, 0)));
  {
    const auto t = erase(good, 3, at(3, op_kind::send_skip_backward, 1));
    expect(ctpipe::verify(t), check_rule::missing_send, 3,
           static_cast<int>(find(t, 3, [](const task& x) { return x.op == op_kind::backward && x.microbatch == 1; })));
  }
  {
    const auto t = erase(good, 1, at(1, op_kind::recv_skip_backward, 0));
    expect(ctpipe::verify(t), check_rule::missing_receive, 1,
           static_cast<int>(find(t, 1, [](const task& x) { return x.op == op_kind::backward && x.microbatch == 0; })));
  }
  // A receive on the wrong side of its consumer.
  {
    auto t = good;
    auto& p = t.programs[2];
    const auto r = at(2, op_kind::recv_skip_forward, 0), f = at(2, op_kind::forward, 0);
    std::swap(p[r], p[f]);
    expect(ctpipe::verify(t), check_rule::missing_receive, 2, static_cast<int>(r));
  }
  // A skip message that names the wrong rank, or no crossing, or one against its direction.
  {
    auto t = good;
    t.programs[0][at(0, op_kind::send_skip_forward, 0)].peer = 1;
    expect(ctpipe::verify(t), check_rule::wrong_peer, 0, static_cast<int>(at(0, op_kind::send_skip_forward, 0)));
    t = good;
    auto& x = t.programs[0][at(0, op_kind::send_skip_forward, 0)];
    x.other = 3;  // stage 0 -> 3 is not a crossing of this table
    x.peer = 3;
    expect(ctpipe::verify(t), check_rule::wrong_crossing, 0, static_cast<int>(at(0, op_kind::send_skip_forward, 0)));
    t = good;
    t.programs[2][at(2, op_kind::recv_skip_forward, 0)].op = op_kind::recv_skip_backward;  // 2 does not make for 0
    expect(ctpipe::verify(t), check_rule::wrong_crossing, 2, static_cast<int>(at(2, op_kind::recv_skip_forward, 0)));
  }
  // A crossing has a channel of its own in each direction: its receives come in the order of its
  // sends. Rank 2 receives microbatch 1's value first, both before they are needed.
  {
    auto t = good;
    auto& p = t.programs[2];
    const task second = p[at(2, op_kind::recv_skip_forward, 1)];
    p.erase(p.begin() + static_cast<std::ptrdiff_t>(at(2, op_kind::recv_skip_forward, 1)));
    p.insert(p.begin() + static_cast<std::ptrdiff_t>(at(2, op_kind::recv_skip_forward, 0)), second);
    expect(ctpipe::verify(t), check_rule::unpaired_send_receive, 2,
           static_cast<int>(at(2, op_kind::recv_skip_forward, 0)) + 1);
  }
  // Receiving a gradient back before the consumer could have made it: the ranks wait on each other.
  {
    auto t = good;
    auto& p = t.programs[0];
    const task early = p[at(0, op_kind::recv_skip_backward, 0)];
    p.erase(p.begin() + static_cast<std::ptrdiff_t>(at(0, op_kind::recv_skip_backward, 0)));
    p.insert(p.begin(), early);
    const auto v = ctpipe::verify(t);
    expect(v, check_rule::deadlock, 0, 0);
  }
}

TEST_CASE("skips: the simulation waits for a skip message, and the memory plan holds what it brings") {
  // A cost model that prices skip messages at 10 and every other message at 0.
  struct skip_costly : ctpipe::cost_model {
    constexpr double message(const task& send) const { return ctpipe::is_skip(send.op) ? 10.0 : 0.0; }
  };
  constexpr std::array<crossing, 1> around{{{0, 2, 4}}};
  const auto t = ctpipe::generate(ctpipe::naive(3, 1), around);
  // F0 0-1, F1 1-2, F2 waits for the skip: 11-12, B2 12-14, B1 14-16, B0 waits for the skip: 24-26.
  CHECK(ctpipe::simulate(t, skip_costly{}).makespan == 26.0);
  CHECK(ctpipe::simulate(t).makespan == 9.0);
  // 1F1B p = 4: stage 2 holds the values of the microbatches in flight there (2), stage 0 one
  // gradient at a time; nothing for the ranks in between.
  const auto mem = ctpipe::plan_memory(ctpipe::generate(ctpipe::one_f_one_b(4, 8), around));
  CHECK(mem.skip_value_slots == std::vector<int>{0, 0, 2, 0});
  CHECK(mem.skip_gradient_slots == std::vector<int>{1, 0, 0, 0});
  // Split backward: a value is held until the consumer's W.
  const auto zb = ctpipe::generate(ctpipe::zb_h1(4, 8), around);
  const auto plain = ctpipe::plan_memory(ctpipe::generate(ctpipe::zb_h1(4, 8)));
  const auto with = ctpipe::plan_memory(zb);
  CHECK(with.skip_value_slots[2] == plain.peak_live[2]);
  CHECK(with.peak_live == plain.peak_live);
  // The slots are handed out at the receives.
  std::vector<int> taken;
  ctpipe::plan_memory(zb, [&](int r, int i, ctpipe::slot_pool pool, int slot) {
    if (pool == ctpipe::slot_pool::skip_value) {
      CHECK(zb.programs[static_cast<std::size_t>(r)][static_cast<std::size_t>(i)].op == op_kind::recv_skip_forward);
      taken.push_back(slot);
    }
  });
  CHECK(taken.size() == 8);
}
