// Compile-time tests: the figures of docs/schedules.md (p = 4, m = 8, zero comm; stage
// costs, halved per chunk for the 2-chunk schedules), proved by static_assert: global makespan,
// the largest per-rank span and the largest per-rank bubble, and the memory split of the Zero
// Bubble paper (held = awaiting I + awaiting W).
#include <doctest/doctest.h>

#include <array>

#include <ctpipe/schedules.hpp>

namespace {

struct figures {
  double makespan, max_span, max_bubble;
  friend constexpr bool operator==(const figures&, const figures&) = default;
};

// Stage costs F, I, W (B = I + W), each divided by the chunks per rank.
constexpr ctpipe::cost_model stage_costs(double f, double i, double w, double chunks) {
  return {
      .forward = f / chunks, .backward = (i + w) / chunks, .backward_input = i / chunks, .backward_weight = w / chunks};
}
template <auto Table>
constexpr figures figures_of(double f, double i, double w) {
  const auto r = ctpipe::analyse(Table, stage_costs(f, i, w, Table.params.chunks));
  return {r.makespan, r.max_span(), r.max_bubble()};
}

constexpr auto f1b1 = ctpipe::make_table<ctpipe::one_f_one_b(4, 8)>();
constexpr auto zbh1 = ctpipe::make_table<ctpipe::zb_h1(4, 8)>();
constexpr auto zbh2 = ctpipe::make_table<ctpipe::zb_h2(4, 8)>();
constexpr auto zb1p = ctpipe::make_table<ctpipe::interleaved_zero_bubble(4, 8, 2)>();
constexpr auto inter = ctpipe::make_table<ctpipe::interleaved(4, 8, 2)>();
constexpr auto zbv = ctpipe::make_table<ctpipe::zb_v(4, 8)>();
constexpr auto dpv = ctpipe::make_table<ctpipe::dualpipe_v(4, 8)>();
constexpr auto vmin = ctpipe::make_table<ctpipe::v_min(4, 8)>();
constexpr auto vhalf = ctpipe::make_table<ctpipe::v_half(4, 8)>();
static_assert(ctpipe::check<zbh1>() && ctpipe::check<zbh2>() && ctpipe::check<zb1p>());
static_assert(ctpipe::check<zbv>() && ctpipe::check<dpv>() && ctpipe::check<vmin>() && ctpipe::check<vhalf>());

// F, I, W = 1, 1, 1
static_assert(figures_of<f1b1>(1, 1, 1) == figures{33, 33, 9});
static_assert(figures_of<zbh1>(1, 1, 1) == figures{27, 27, 3});
static_assert(figures_of<zbh2>(1, 1, 1) == figures{27, 24, 0});
static_assert(figures_of<zb1p>(1, 1, 1) == figures{25.5, 25.5, 1.5});
static_assert(figures_of<inter>(1, 1, 1) == figures{28.5, 28.5, 4.5});
static_assert(figures_of<zbv>(1, 1, 1) == figures{25.5, 24, 0});
static_assert(figures_of<dpv>(1, 1, 1) == figures{27, 27, 3});
static_assert(figures_of<vmin>(1, 1, 1) == figures{29.5, 29.5, 5.5});
static_assert(figures_of<vhalf>(1, 1, 1) == figures{26.5, 26.5, 2.5});
// F, I, W = 1, 2, 1
static_assert(figures_of<f1b1>(1, 2, 1) == figures{44, 44, 12});
static_assert(figures_of<zbh1>(1, 2, 1) == figures{38, 38, 6});
static_assert(figures_of<zbh2>(1, 2, 1) == figures{35, 35, 3});
static_assert(figures_of<zb1p>(1, 2, 1) == figures{35, 35, 3});
static_assert(figures_of<inter>(1, 2, 1) == figures{38, 38, 6});
static_assert(figures_of<zbv>(1, 2, 1) == figures{35, 35, 3});
static_assert(figures_of<dpv>(1, 2, 1) == figures{37.5, 37.5, 5.5});
static_assert(figures_of<vmin>(1, 2, 1) == figures{54.5, 54.5, 22.5});  // (built for I = F: poor where I = 2F)
static_assert(figures_of<vhalf>(1, 2, 1) == figures{41, 41, 9});
// F, I, W = 2, 2, 1
static_assert(figures_of<f1b1>(2, 2, 1) == figures{55, 55, 15});
static_assert(figures_of<zbh1>(2, 2, 1) == figures{49, 49, 9});
static_assert(figures_of<zbh2>(2, 2, 1) == figures{46, 46, 6});
static_assert(figures_of<zb1p>(2, 2, 1) == figures{44.5, 44.5, 4.5});
static_assert(figures_of<inter>(2, 2, 1) == figures{47.5, 47.5, 7.5});
static_assert(figures_of<zbv>(2, 2, 1) == figures{43, 43, 3});
static_assert(figures_of<dpv>(2, 2, 1) == figures{47.5, 47.5, 7.5});
static_assert(figures_of<vmin>(2, 2, 1) == figures{58.5, 58.5, 18.5});
static_assert(figures_of<vhalf>(2, 2, 1) == figures{47.5, 47.5, 7.5});

// The closed forms: ZB-H1 bubble (p-1)(F+I-W), ZB-H2 (p-1)(F+I-2W), both at F=2, I=2, W=1.
static_assert(figures_of<zbh1>(2, 2, 1).max_bubble == 3 * (2 + 2 - 1));
static_assert(figures_of<zbh2>(2, 2, 1).max_bubble == 3 * (2 + 2 - 2));
// ZB-H2's per-rank spans at unit costs: 24 on every rank (ZB-H1: 27 26 25 24).
static_assert(ctpipe::analyse(zbh2, stage_costs(1, 1, 1, 1)).span == std::array{24.0, 24.0, 24.0, 24.0});
static_assert(ctpipe::analyse(zbh1, stage_costs(1, 1, 1, 1)).span == std::array{27.0, 26.0, 25.0, 24.0});
// The bubble rate: (max span - m(F+I+W)) / max span.
static_assert(ctpipe::analyse(zbh1, stage_costs(1, 1, 1, 1)).bubble_rate == 3.0 / 27.0);
static_assert(ctpipe::analyse(zbh2, stage_costs(1, 1, 1, 1)).bubble_rate == 0.0);

// Memory. ZB-H1: rank r holds (p-r) M_I + r M_W, p in all; ZB-H2: (2p-1-2r) M_I + 2r M_W.
constexpr auto m_h1 = ctpipe::plan_memory(zbh1);
static_assert(m_h1.peak_live == std::array{4, 4, 4, 4});
static_assert(m_h1.peak_awaiting_input == std::array{4, 3, 2, 1});
static_assert(m_h1.peak_awaiting_weight == std::array{0, 1, 2, 3});
constexpr auto m_h2 = ctpipe::plan_memory(zbh2);
static_assert(m_h2.peak_live == std::array{7, 7, 7, 7});
static_assert(m_h2.peak_awaiting_input == std::array{7, 5, 3, 1});
static_assert(m_h2.peak_awaiting_weight == std::array{0, 2, 4, 6});
// ZB-V: p stages' activations (2p half-size chunks) on every rank; DualPipeV: 2p+1 chunks.
static_assert(ctpipe::plan_memory(zbv).peak_live == std::array{8, 8, 8, 8});
static_assert(ctpipe::plan_memory(dpv).peak_live == std::array{9, 9, 9, 9});
// V-Min and V-Half (controllable memory): 2((p+4)/3) and 2((p+2)/2) chunks, a third and a half of
// the 2p chunks ZB-V and 1F1B hold; their bubble rates at F = I = W are the authors' scheduler's
// (tests/data/v_memory_orders.txt: 11/59 and 5/53).
static_assert(ctpipe::plan_memory(vmin).peak_live == std::array{4, 4, 4, 4});
static_assert(ctpipe::plan_memory(vmin).peak_live[0] == 2 * ((4 + 4) / 3));
static_assert(ctpipe::plan_memory(vhalf).peak_live == std::array{6, 6, 6, 6});
static_assert(ctpipe::plan_memory(vhalf).peak_live[0] == 2 * ((4 + 2) / 2));
static_assert(ctpipe::analyse(vmin, stage_costs(1, 1, 1, 2)).bubble_rate == 5.5 / 29.5);
static_assert(ctpipe::analyse(vhalf, stage_costs(1, 1, 1, 2)).bubble_rate == 2.5 / 26.5);
// 1F1B has nothing awaiting W.
static_assert(ctpipe::plan_memory(f1b1).peak_awaiting_weight == std::array{0, 0, 0, 0});

// An overlapped pair costs its own figure: with F&B = 0.75 (F+B) per chunk, DualPipeV shortens.
constexpr ctpipe::cost_model dpv_overlap{
    .forward = 0.5, .backward = 1.0, .backward_input = 0.5, .backward_weight = 0.5, .overlap = 0.75 * 1.5};
static_assert(ctpipe::analyse(dpv, dpv_overlap).makespan < 27.0);
static_assert(ctpipe::analyse(dpv, dpv_overlap).busy[0] == 24.0 - 5 * 0.25 * 1.5);  // 5 pairs on rank 0

// Communication latency on cross-rank edges only: the V turn is free.
constexpr ctpipe::cost_model with_comm{
    .forward = 0.5, .backward = 1.0, .backward_input = 0.5, .backward_weight = 0.5, .comm = 0.25};
static_assert(ctpipe::analyse(zbv, with_comm).makespan > 25.5);

// DualPipe (two directions; each chunk is a whole stage of the model, so costs are not halved):
// at F = I = W = 1, B = 2, F&B = F + B, every rank holds p + 1 stages' activations and the largest
// per-rank bubble is (p/2 - 1)(F&B + B - 3W); at F = 2, I = 2, W = 1 too (the form is exact where
// I = F and F&B = F + B); at I = 2 F it is a bound.
constexpr auto dp4 = ctpipe::make_table<ctpipe::dualpipe(4, 8)>();
constexpr auto dp8 = ctpipe::make_table<ctpipe::dualpipe(8, 24)>();
static_assert(ctpipe::check<dp4>() && ctpipe::check<dp8>());
template <auto Table>
constexpr figures whole_stage_figures(double f, double i, double w) {
  const auto r = ctpipe::analyse(Table, stage_costs(f, i, w, 1));
  return {r.makespan, r.max_span(), r.max_bubble()};
}
static_assert(whole_stage_figures<dp4>(1, 1, 1) == figures{26, 26, 1 * (3 + 2 - 3)});
static_assert(whole_stage_figures<dp4>(2, 2, 1) == figures{45, 45, 1 * (5 + 3 - 3)});
static_assert(whole_stage_figures<dp4>(1, 2, 1) == figures{35, 35, 3});  // the bound: 1 * (4 + 3 - 3)
static_assert(whole_stage_figures<dp8>(1, 1, 1).max_bubble == 3 * (3 + 2 - 3));
static_assert(whole_stage_figures<dp8>(2, 2, 1).max_bubble == 3 * (5 + 3 - 3));
static_assert(ctpipe::plan_memory(dp4).peak_live == std::array{5, 5, 5, 5});
static_assert(ctpipe::plan_memory(dp8).peak_live == std::array{9, 9, 9, 9, 9, 9, 9, 9});

}  // namespace

TEST_CASE("part 2 figures (the static_asserts above) also hold at run time") {
  const auto r = ctpipe::analyse(ctpipe::generate(ctpipe::zb_v(4, 8)), stage_costs(2, 2, 1, 2));
  CHECK(r.makespan == 43.0);
  CHECK(r.max_span() == 43.0);
  CHECK(r.max_bubble() == 3.0);
  const auto d = ctpipe::analyse(ctpipe::generate(ctpipe::dualpipe_v(4, 8)), stage_costs(1, 2, 1, 2));
  CHECK(d.makespan == 37.5);
}
