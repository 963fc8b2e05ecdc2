// Schedule efficiency (bench/README.md, "Schedule efficiency"): a step's measured wall time against
// the makespan the table's own analysis predicts (ctpipe::analyse) for the same task durations.
//  - p = 2 (the development machine has 2 cores), tasks that spin for a set time: F = 200 us,
//    B = 400 us a stage; interleaved (v = 2) splits the same work into chunks of half that. The
//    split-backward schedules (ZB-H1, ZB-H2, ZB1P, ZB-V, DualPipeV, V-Min, V-Half) with F:I:W =
//    1:1:1 and 1:2:1 (F = 200 us), and 1F1B, ZB-H1, ZB-V, V-Min, V-Half at an uneven 2:3:1, beside
//    1F1B on the same work (B = I + W).
//  - p = 4 and 8, tasks that sleep instead (more ranks than cores): sleeping overshoots the asked
//    time, so the simulation is run twice, with the nominal durations and with the mean durations
//    the tasks actually took in this run (each task times itself). At p = 4 the memory-budget
//    schedules (1F1B, ZB-H1, ZB-V, V-Min, V-Half, synthesised for 4 and for 3 activations a rank,
//    and on V placement for 8 and 10 activations of a stage) at F:I:W = 1:1:1 and 2:3:1, with
//    F = 1 ms (sleeping's overshoot a smaller share).
// Counters: measured_ms (median step), simulated_ms, measured_over_simulated, peak_rank_activations
// (the table's peak, in microbatches of a rank's layers); for sleeping tasks also
// simulated_actual_ms and measured_over_actual.
#include "timed.hpp"

#include <benchmark/benchmark.h>

#include <ctpipe/ctpipe.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

namespace {

using bench::clock_type;
using bench::copy_loss;
using bench::durations;
using bench::timed;
using bench::timed_net;

constexpr int microbatches = 8;

// A stage's work in microseconds: forward, input gradient, weight gradient (B = I + W).
struct work {
  double forward, input, weight;
};

template <auto Table, bool Sleep, work Work = work{200.0, 200.0, 200.0}>
void step_time(benchmark::State& state) {
  constexpr int stages = Table.stages();
  // Several stages a rank (interleaved, V placement): each does 1/chunks of a stage's work.
  constexpr double chunk = static_cast<double>(Table.params.chunks);
  using net = timed_net<stages>;
  net model;
  durations record;
  const auto us = [](double x) { return std::chrono::microseconds(static_cast<long>(x)); };
  ctpipe::for_each_layer(model, [&](timed& l) {
    l.forward_time = us(Work.forward / chunk);
    l.input_time = us(Work.input / chunk);
    l.weight_time = us(Work.weight / chunk);
    l.sleep = Sleep;
    l.record = &record;
  });
  copy_loss loss;
  std::vector<timed::input_type> in(microbatches);
  std::vector<int> targets(microbatches);
  ctpipe::host_executor<Table, net, ctpipe::partition<net, stages>(), copy_loss> exec(model, loss);
  exec.step(in, targets);  // warm-up: threads started and spinning
  record.forward_ns = record.backward_ns = record.forwards = record.backwards = 0;
  std::vector<double> steps;
  for (auto _ : state) {
    const auto start = clock_type::now();
    benchmark::DoNotOptimize(exec.step(in, targets).data());
    steps.push_back(std::chrono::duration<double, std::milli>(clock_type::now() - start).count());
  }
  std::sort(steps.begin(), steps.end());
  const double measured = steps[steps.size() / 2];
  const ctpipe::cost_model costs{.forward = Work.forward / chunk,
                                 .backward = (Work.input + Work.weight) / chunk,
                                 .backward_input = Work.input / chunk,
                                 .backward_weight = Work.weight / chunk};
  const double simulated = ctpipe::analyse(Table, costs).makespan / 1000.0;
  state.counters["measured_ms"] = measured;
  state.counters["simulated_ms"] = simulated;
  state.counters["measured_over_simulated"] = measured / simulated;
  // Peak activations a rank holds, in microbatches of a whole rank's layers (a stage of 1F1B; two
  // chunks of a V schedule): the memory side of the trade.
  const auto memory = ctpipe::plan_memory(Table);
  state.counters["peak_rank_activations"] =
      static_cast<double>(*std::max_element(memory.peak_live.begin(), memory.peak_live.end())) / chunk;
  if (Sleep) {
    const double fa = static_cast<double>(record.forward_ns) / static_cast<double>(record.forwards) / 1000.0;
    const double ba = static_cast<double>(record.backward_ns) / static_cast<double>(record.backwards) / 1000.0;
    // A split backward: I counts as a backward, W apart (a whole B, where one runs, as I + W).
    const double wa =
        record.weights > 0 ? static_cast<double>(record.weight_ns) / static_cast<double>(record.weights) / 1000.0 : 0.0;
    const ctpipe::cost_model taken =
        record.weights > 0
            ? ctpipe::cost_model{.forward = fa, .backward = ba + wa, .backward_input = ba, .backward_weight = wa}
            : ctpipe::cost_model{.forward = fa, .backward = ba};
    const double actual = ctpipe::analyse(Table, taken).makespan / 1000.0;
    state.counters["task_F_us"] = fa;
    state.counters["task_B_us"] = ba;
    state.counters["simulated_actual_ms"] = actual;
    state.counters["measured_over_actual"] = measured / actual;
  }
}

constexpr auto gpipe_2 = ctpipe::make_table<ctpipe::gpipe(2, microbatches)>();
constexpr auto one_f_one_b_2 = ctpipe::make_table<ctpipe::one_f_one_b(2, microbatches)>();
constexpr auto interleaved_2 = ctpipe::make_table<ctpipe::interleaved(2, microbatches, 2)>();
constexpr auto gpipe_4 = ctpipe::make_table<ctpipe::gpipe(4, microbatches)>();
constexpr auto one_f_one_b_4 = ctpipe::make_table<ctpipe::one_f_one_b(4, microbatches)>();
constexpr auto interleaved_4 = ctpipe::make_table<ctpipe::interleaved(4, microbatches, 2)>();
constexpr auto gpipe_8 = ctpipe::make_table<ctpipe::gpipe(8, microbatches)>();
constexpr auto one_f_one_b_8 = ctpipe::make_table<ctpipe::one_f_one_b(8, microbatches)>();
constexpr auto interleaved_8 = ctpipe::make_table<ctpipe::interleaved(8, microbatches, 2)>();
constexpr auto zb_h1_2 = ctpipe::make_table<ctpipe::zb_h1(2, microbatches)>();
constexpr auto zb_h2_2 = ctpipe::make_table<ctpipe::zb_h2(2, microbatches)>();
constexpr auto zb1p_2 = ctpipe::make_table<ctpipe::interleaved_zero_bubble(2, microbatches, 2)>();
constexpr auto zb_v_2 = ctpipe::make_table<ctpipe::zb_v(2, microbatches)>();
constexpr auto dualpipe_v_2 = ctpipe::make_table<ctpipe::dualpipe_v(2, microbatches)>();
constexpr auto v_min_2 = ctpipe::make_table<ctpipe::v_min(2, microbatches)>();
constexpr auto v_half_2 = ctpipe::make_table<ctpipe::v_half(2, microbatches)>();
// Synthesised at p ranks for a cost row (F, I, W in units of 100 us at p = 2, of 500 us at p = 4)
// and a limit of activations a rank: the heuristic's own order, so that the figure is the
// synthesis' and not a handcrafted table's.
template <int P, int F, int I, int W, int Limit>
constexpr auto synth = ctpipe::make_table<
    ctpipe::synthesise_heuristic(P, microbatches, ctpipe::synthesis_costs::uniform(F, I, W), Limit)>();
// At p = 2 and 2 activations a rank (1F1B's).
constexpr auto synth_111 = synth<2, 2, 2, 2, 2>;
constexpr auto synth_121 = synth<2, 2, 4, 2, 2>;
constexpr auto synth_231 = synth<2, 2, 3, 1, 2>;
// F:I:W = 1:1:1, 1:2:1, and an uneven 2:3:1 (a heavy input gradient, a light weight gradient).
constexpr work even{200.0, 200.0, 200.0}, heavy_input{200.0, 400.0, 200.0}, uneven{200.0, 300.0, 100.0};
// p = 4, sleeping: the memory-budget schedules, F = 1 ms.
constexpr work even_slow{1000.0, 1000.0, 1000.0}, uneven_slow{1000.0, 1500.0, 500.0};
constexpr auto zb_h1_4 = ctpipe::make_table<ctpipe::zb_h1(4, microbatches)>();
constexpr auto zb_v_4 = ctpipe::make_table<ctpipe::zb_v(4, microbatches)>();
constexpr auto v_min_4 = ctpipe::make_table<ctpipe::v_min(4, microbatches)>();
constexpr auto v_half_4 = ctpipe::make_table<ctpipe::v_half(4, microbatches)>();
// At p = 4, 1F1B's 4 activations a rank and 3.
constexpr auto synth_111_4 = synth<4, 2, 2, 2, 4>;
constexpr auto synth_111_4_3 = synth<4, 2, 2, 2, 3>;
constexpr auto synth_231_4 = synth<4, 2, 3, 1, 4>;
constexpr auto synth_231_4_3 = synth<4, 2, 3, 1, 3>;
// On V placement (two stages a rank): 1F1B's memory, 8 activations of a stage a rank, and 10.
template <int P, int F, int I, int W, int Limit>
constexpr auto synth_v = ctpipe::make_table<ctpipe::synthesise_heuristic(
    P, microbatches, ctpipe::synthesis_costs::uniform(F, I, W), Limit, ctpipe::synthesis_placement::v)>();
constexpr auto synth_v_111_4 = synth_v<4, 2, 2, 2, 8>;
constexpr auto synth_v_231_4 = synth_v<4, 2, 3, 1, 8>;
constexpr auto synth_v_231_4_10 = synth_v<4, 2, 3, 1, 10>;

}  // namespace

#define CTPIPE_EFFICIENCY(table, sleep, name) \
  BENCHMARK(step_time<table, sleep>)->Name("efficiency/" name)->UseRealTime()->Unit(benchmark::kMillisecond);
#define CTPIPE_EFFICIENCY_SPLIT(table, w, name) \
  BENCHMARK(step_time<table, false, w>)->Name("efficiency/spin/" name)->UseRealTime()->Unit(benchmark::kMillisecond);
CTPIPE_EFFICIENCY(gpipe_2, false, "spin/gpipe/p:2/m:8")
CTPIPE_EFFICIENCY(one_f_one_b_2, false, "spin/1f1b/p:2/m:8")
CTPIPE_EFFICIENCY(interleaved_2, false, "spin/interleaved_v2/p:2/m:8")
CTPIPE_EFFICIENCY_SPLIT(one_f_one_b_2, even, "FIW:1:1:1/1f1b/p:2/m:8")
CTPIPE_EFFICIENCY_SPLIT(zb_h1_2, even, "FIW:1:1:1/zb_h1/p:2/m:8")
CTPIPE_EFFICIENCY_SPLIT(zb_h2_2, even, "FIW:1:1:1/zb_h2/p:2/m:8")
CTPIPE_EFFICIENCY_SPLIT(zb1p_2, even, "FIW:1:1:1/interleaved_zero_bubble_v2/p:2/m:8")
CTPIPE_EFFICIENCY_SPLIT(zb_v_2, even, "FIW:1:1:1/zb_v/p:2/m:8")
CTPIPE_EFFICIENCY_SPLIT(dualpipe_v_2, even, "FIW:1:1:1/dualpipe_v/p:2/m:8")
CTPIPE_EFFICIENCY_SPLIT(v_min_2, even, "FIW:1:1:1/v_min/p:2/m:8")
CTPIPE_EFFICIENCY_SPLIT(v_half_2, even, "FIW:1:1:1/v_half/p:2/m:8")
CTPIPE_EFFICIENCY_SPLIT(synth_111, even, "FIW:1:1:1/synthesised/p:2/m:8")
CTPIPE_EFFICIENCY_SPLIT(one_f_one_b_2, heavy_input, "FIW:1:2:1/1f1b/p:2/m:8")
CTPIPE_EFFICIENCY_SPLIT(zb_h1_2, heavy_input, "FIW:1:2:1/zb_h1/p:2/m:8")
CTPIPE_EFFICIENCY_SPLIT(zb_h2_2, heavy_input, "FIW:1:2:1/zb_h2/p:2/m:8")
CTPIPE_EFFICIENCY_SPLIT(zb1p_2, heavy_input, "FIW:1:2:1/interleaved_zero_bubble_v2/p:2/m:8")
CTPIPE_EFFICIENCY_SPLIT(zb_v_2, heavy_input, "FIW:1:2:1/zb_v/p:2/m:8")
CTPIPE_EFFICIENCY_SPLIT(dualpipe_v_2, heavy_input, "FIW:1:2:1/dualpipe_v/p:2/m:8")
CTPIPE_EFFICIENCY_SPLIT(v_min_2, heavy_input, "FIW:1:2:1/v_min/p:2/m:8")
CTPIPE_EFFICIENCY_SPLIT(v_half_2, heavy_input, "FIW:1:2:1/v_half/p:2/m:8")
CTPIPE_EFFICIENCY_SPLIT(synth_121, heavy_input, "FIW:1:2:1/synthesised/p:2/m:8")
CTPIPE_EFFICIENCY_SPLIT(one_f_one_b_2, uneven, "FIW:2:3:1/1f1b/p:2/m:8")
CTPIPE_EFFICIENCY_SPLIT(zb_h1_2, uneven, "FIW:2:3:1/zb_h1/p:2/m:8")
CTPIPE_EFFICIENCY_SPLIT(zb_v_2, uneven, "FIW:2:3:1/zb_v/p:2/m:8")
CTPIPE_EFFICIENCY_SPLIT(v_min_2, uneven, "FIW:2:3:1/v_min/p:2/m:8")
CTPIPE_EFFICIENCY_SPLIT(v_half_2, uneven, "FIW:2:3:1/v_half/p:2/m:8")
CTPIPE_EFFICIENCY_SPLIT(synth_231, uneven, "FIW:2:3:1/synthesised/p:2/m:8")
CTPIPE_EFFICIENCY(gpipe_4, true, "sleep/gpipe/p:4/m:8")
CTPIPE_EFFICIENCY(one_f_one_b_4, true, "sleep/1f1b/p:4/m:8")
CTPIPE_EFFICIENCY(interleaved_4, true, "sleep/interleaved_v2/p:4/m:8")
#define CTPIPE_EFFICIENCY_SLEEP_SPLIT(table, w, name) \
  BENCHMARK(step_time<table, true, w>)->Name("efficiency/sleep/" name)->UseRealTime()->Unit(benchmark::kMillisecond);
CTPIPE_EFFICIENCY_SLEEP_SPLIT(one_f_one_b_4, even_slow, "FIW:1:1:1/1f1b/p:4/m:8")
CTPIPE_EFFICIENCY_SLEEP_SPLIT(zb_h1_4, even_slow, "FIW:1:1:1/zb_h1/p:4/m:8")
CTPIPE_EFFICIENCY_SLEEP_SPLIT(zb_v_4, even_slow, "FIW:1:1:1/zb_v/p:4/m:8")
CTPIPE_EFFICIENCY_SLEEP_SPLIT(v_min_4, even_slow, "FIW:1:1:1/v_min/p:4/m:8")
CTPIPE_EFFICIENCY_SLEEP_SPLIT(v_half_4, even_slow, "FIW:1:1:1/v_half/p:4/m:8")
CTPIPE_EFFICIENCY_SLEEP_SPLIT(synth_111_4, even_slow, "FIW:1:1:1/synthesised_limit4/p:4/m:8")
CTPIPE_EFFICIENCY_SLEEP_SPLIT(synth_111_4_3, even_slow, "FIW:1:1:1/synthesised_limit3/p:4/m:8")
CTPIPE_EFFICIENCY_SLEEP_SPLIT(synth_v_111_4, even_slow, "FIW:1:1:1/synthesised_v_limit8/p:4/m:8")
CTPIPE_EFFICIENCY_SLEEP_SPLIT(one_f_one_b_4, uneven_slow, "FIW:2:3:1/1f1b/p:4/m:8")
CTPIPE_EFFICIENCY_SLEEP_SPLIT(zb_h1_4, uneven_slow, "FIW:2:3:1/zb_h1/p:4/m:8")
CTPIPE_EFFICIENCY_SLEEP_SPLIT(zb_v_4, uneven_slow, "FIW:2:3:1/zb_v/p:4/m:8")
CTPIPE_EFFICIENCY_SLEEP_SPLIT(v_min_4, uneven_slow, "FIW:2:3:1/v_min/p:4/m:8")
CTPIPE_EFFICIENCY_SLEEP_SPLIT(v_half_4, uneven_slow, "FIW:2:3:1/v_half/p:4/m:8")
CTPIPE_EFFICIENCY_SLEEP_SPLIT(synth_231_4, uneven_slow, "FIW:2:3:1/synthesised_limit4/p:4/m:8")
CTPIPE_EFFICIENCY_SLEEP_SPLIT(synth_231_4_3, uneven_slow, "FIW:2:3:1/synthesised_limit3/p:4/m:8")
CTPIPE_EFFICIENCY_SLEEP_SPLIT(synth_v_231_4, uneven_slow, "FIW:2:3:1/synthesised_v_limit8/p:4/m:8")
CTPIPE_EFFICIENCY_SLEEP_SPLIT(synth_v_231_4_10, uneven_slow, "FIW:2:3:1/synthesised_v_limit10/p:4/m:8")
CTPIPE_EFFICIENCY(gpipe_8, true, "sleep/gpipe/p:8/m:8")
CTPIPE_EFFICIENCY(one_f_one_b_8, true, "sleep/1f1b/p:8/m:8")
CTPIPE_EFFICIENCY(interleaved_8, true, "sleep/interleaved_v2/p:8/m:8")

BENCHMARK_MAIN();
