// PipeDream's asynchronous schedules (schedule/async.hpp), at compile time: the table (two steps
// from a fresh start and the drain) is 1F1B over 2m microbatches and verifies; its stash depth is
// p - s; the weight rule is docs/schedules.md's; and the version bookkeeping is proved by walking each
// stage's order over several steps: every F and B finds in its slot the version the rule names,
// every update finds the newest version where it reads it, and no activation stash is overwritten
// while its microbatch is in flight.
#include <doctest/doctest.h>

#include <ctpipe/schedules.hpp>

#include <array>

namespace {

using ctpipe::async_schedule;

constexpr bool same_order(const auto& a, const auto& b) {
  if (a.ranks() != b.ranks()) return false;
  for (int r = 0; r < a.ranks(); ++r) {
    const auto x = a.program(r), y = b.program(r);
    if (x.size() != y.size()) return false;
    for (std::size_t i = 0; i < x.size(); ++i)
      if (!(x[i] == y[i])) return false;
  }
  return true;
}

constexpr auto stashed = ctpipe::make_table<ctpipe::pipedream(4, 6)>();
constexpr auto twobw = ctpipe::make_table<ctpipe::pipedream_2bw(4, 6)>();
static_assert(ctpipe::check<stashed>() && ctpipe::check<twobw>());
static_assert(same_order(stashed, ctpipe::make_table<ctpipe::one_f_one_b(4, 12)>()));
static_assert(same_order(twobw, stashed));
static_assert(stashed.params.name.view() == "pipedream" && twobw.params.name.view() == "pipedream_2bw");
static_assert(stashed.microbatches() == 12);  // two steps of 6
constexpr auto figures = ctpipe::analyse(stashed);
static_assert(figures.peak_live[0] == 4 && figures.peak_live[1] == 3 && figures.peak_live[2] == 2 &&
              figures.peak_live[3] == 1);

// The rule, as docs/schedules.md writes it.
constexpr async_schedule p4 = ctpipe::pipedream(4, 6), b4 = ctpipe::pipedream_2bw(4, 6);
static_assert(p4.version(0, 0) == 0 && p4.version(0, 3) == 0 && p4.version(0, 4) == 1 && p4.version(0, 10) == 7);
static_assert(p4.version(3, 0) == 0 && p4.version(3, 5) == 5);  // the last stage: no staleness
static_assert(p4.version_slots(0) == 4 && p4.version_slots(3) == 1 && b4.version_slots(0) == 2);
static_assert(p4.staleness(0) == 3 && p4.staleness(3) == 0 && b4.staleness(0) == 1);
static_assert(b4.version(0, 5) == 0 && b4.version(2, 11) == 0 && b4.version(1, 12) == 1 && b4.version(1, 23) == 2);
static_assert(p4.update_after(0) && p4.update_after(4) && !b4.update_after(4) && b4.update_after(5));

// Walks stage s's program over `steps` steps of a fresh pipeline (1F1B over steps x m, as the
// executor runs it) with slots holding version numbers; false at the first broken invariant.
constexpr bool bookkeeping_holds(const async_schedule& a, int s, int steps) {
  const int m = a.microbatches, n = steps * m, w = a.warmup(s), slots = a.version_slots(s);
  std::array<int, 16> content{};   // the version each slot holds (all start as version 0)
  std::array<int, 16> stash_of{};  // the microbatch each activation stash holds, -1 when free
  if (slots > 16 || a.stash_slots(s) > 16) return false;
  for (auto& x : stash_of) x = -1;
  int newest = 0;
  auto uses = [&](int i) { return content[static_cast<std::size_t>(a.version_slot(s, i))] == a.version(s, i); };
  auto forward = [&](int i) {
    const auto st = static_cast<std::size_t>(i % a.stash_slots(s));
    if (stash_of[st] != -1) return false;  // its microbatch's backward has not run
    stash_of[st] = i;
    return uses(i) && (a.versions == ctpipe::weight_versions::double_buffered || a.version(s, i) == newest);
  };
  auto backward = [&](int i) {
    const auto st = static_cast<std::size_t>(i % a.stash_slots(s));
    if (stash_of[st] != i || !uses(i)) return false;
    stash_of[st] = -1;
    if (!a.update_after(i)) return true;
    const int v = a.updated_version(i);
    if (v != newest + 1 || content[static_cast<std::size_t>(a.slot_of(s, v - 1))] != newest) return false;
    content[static_cast<std::size_t>(a.slot_of(s, v))] = newest = v;
    return true;
  };
  for (int i = 0; i < w && i < n; ++i)
    if (!forward(i)) return false;
  for (int i = 0; i + w < n; ++i)
    if (!forward(i + w) || !backward(i)) return false;
  for (int i = n - w; i < n; ++i)
    if (i >= 0 && !backward(i)) return false;
  return newest == a.versions_after(n);
}
// Every stage at p ranks, m from the least allowed to p + 4, five steps. (One constant evaluation
// per p: clang 14 stops one after a million steps.)
constexpr bool bookkeeping_holds_at(int p) {
  for (int m = p > 1 ? p - 1 : 1; m <= p + 4; ++m)
    for (auto v : {ctpipe::weight_versions::stashed, ctpipe::weight_versions::double_buffered})
      for (int s = 0; s < p; ++s)
        if (!bookkeeping_holds(async_schedule{p, m, v}, s, 5)) return false;
  return true;
}
static_assert(bookkeeping_holds_at(1) && bookkeeping_holds_at(2) && bookkeeping_holds_at(3));
static_assert(bookkeeping_holds_at(4));
static_assert(bookkeeping_holds_at(5));
static_assert(bookkeeping_holds_at(6));
static_assert(bookkeeping_holds_at(8));

}  // namespace

TEST_CASE("pipedream tables: the explorer's entry points take them at run time") {
  const auto t = ctpipe::generate(ctpipe::pipedream_2bw(3, 4));
  CHECK(t.params.name.view() == "pipedream_2bw");
  CHECK(t.microbatches() == 8);
  CHECK(ctpipe::verify(t).ok());
  CHECK_THROWS_AS((void)ctpipe::generate(ctpipe::pipedream(5, 3)), ctpipe::schedule_error);
}
