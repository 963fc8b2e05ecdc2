// Quickstart: declare a model from layer functors, let ctpipe split it into pipeline stages, pick a
// schedule, prove its figures at compile time, and train the model on the host executor (one
// thread per rank) with gradients equal to the bit to plain sequential training.
#include <ctpipe/ctpipe.hpp>
#include <ctpipe/layers/dense.hpp>  // reference CPU layers: dense (+ReLU), softmax cross-entropy

#include <cstdio>
#include <fstream>
#include <iostream>
#include <vector>

namespace {

using ctpipe::layers::activation;
using ctpipe::layers::dense;

// 1. The model: a type-level list of layer functors. Microbatches of 8 samples, 32 features, 4 classes.
constexpr std::size_t batch = 8, width = 32;
using hidden = dense<batch, width, width>;
using net = ctpipe::model<hidden, hidden, hidden, hidden, hidden, hidden, hidden, hidden,
                          dense<batch, width, 4, activation::none>>;
using loss = ctpipe::layers::softmax_cross_entropy<batch, 4>;

// 2. A schedule: interleaved 1F1B, 4 ranks, 8 microbatches, 2 chunks per rank (8 stages).
constexpr auto schedule = ctpipe::interleaved(4, 8, 2);
constexpr auto table = ctpipe::make_table<schedule>();
static_assert(ctpipe::check<table>());  // a table that breaks a rule does not compile

// 3. Stages: ctpipe balances the layers by their declared cost (PipeDream's dynamic program).
constexpr auto stages = ctpipe::partition<net, schedule.stages()>();
// Nine layers, eight stages: the light output layer joins the last hidden one.
static_assert(stages.first == std::array<int, 9>{0, 1, 2, 3, 4, 5, 6, 7, 9});

// 4. Figures of this schedule running these stages (backward = 2 x forward), proved before main().
constexpr auto report = ctpipe::analyse(table, ctpipe::costs_of(stages));
static_assert(report.bubble_fraction < 0.2, "the pipeline idles less than a fifth of the time");
static_assert(report.peak_live[0] == 11, "rank 0 holds at most 11 microbatch-chunks of activations");

// 5. The executor, expanded at compile time; its activation memory is a compile-time figure too.
using executor = ctpipe::host_executor<table, net, stages, loss>;
static_assert(executor::activation_bytes()[0] <= 24 * 1024,
              "at most 12 stashes (per-stage pools) of two 8 x 32 float tensors");

// Four Gaussian blobs in 16 dimensions: sample b of microbatch i is of class (i + b) % 4.
struct data_set {
  std::vector<net::input_type> inputs;
  std::vector<loss::target_type> targets;
};
data_set make_data() {
  data_set d{std::vector<net::input_type>(8), std::vector<loss::target_type>(8)};
  unsigned long long s = 42;
  for (std::size_t i = 0; i < 8; ++i)
    for (std::size_t b = 0; b < batch; ++b) {
      const int c = static_cast<int>((i + b) % 4);
      d.targets[i][b] = c;
      for (std::size_t f = 0; f < width; ++f) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        const float noise = static_cast<float>(static_cast<double>(s >> 40) / static_cast<double>(1ull << 24) - 0.5);
        d.inputs[i](b, f) = (f % 4 == static_cast<std::size_t>(c) ? 1.0f : 0.0f) + 0.5f * noise;
      }
    }
  return d;
}

}  // namespace

int main(int argc, char** argv) {
  std::cout << "ctpipe quickstart: a 9-layer MLP on 4 ranks, interleaved 1F1B, 8 microbatches, 2 chunks\n"
            << "stages (first layer of each):";
  for (int s = 0; s < stages.stages(); ++s) std::cout << ' ' << stages.begin(s);
  // The figures are in the layers' declared costs: a dense layer declares its forward's FLOP
  // (2 x batch x in x out), and its backward costs twice that.
  std::cout << "\n\n"
            << ctpipe::timeline_grid(table, ctpipe::costs_of(stages)) << ctpipe::figures_text(report, "FLOP") << "\n";

  net model;
  int seed = 1;
  ctpipe::for_each_layer(model, [&](auto& l) { l.init(static_cast<unsigned>(seed++)); });
  net reference = model;  // the same model, trained sequentially alongside, to show the bits agree
  loss l;
  const data_set d = make_data();
  executor exec(model, l);
  // 5b. The update: SGD over every parameter tensor, its state (none for plain SGD; adam, adamw and
  // sgd_momentum keep some) allocated here, once; the reference gets its own.
  ctpipe::optimizer opt(model, ctpipe::sgd{.lr = 0.01}), ref_opt(reference, ctpipe::sgd{.lr = 0.01});

  std::vector<double> ref_losses(d.inputs.size());
  bool identical = true;
  double first = 0.0, last = 0.0;
  constexpr int steps = 30;
  for (int step = 0; step < steps; ++step) {
    const auto losses = exec.step(d.inputs, d.targets);
    ctpipe::sequential_step(reference, l, std::span<const net::input_type>(d.inputs),
                            std::span<const loss::target_type>(d.targets), std::span<double>(ref_losses));
    double mean = 0.0;
    for (std::size_t i = 0; i < losses.size(); ++i) {
      mean += losses[i] / static_cast<double>(losses.size());
      identical = identical && losses[i] == ref_losses[i];
    }
    opt.step();
    ref_opt.step();
    (step == 0 ? first : last) = mean;
    std::printf("step %2d  loss %.6f (mean cross-entropy of 8 microbatches)\n", step, mean);
  }

  // 6. What really ran: one step recorded (off by default), against its replay with the measured
  // task times. measured_svg / measured_trace draw it; to_csv(step) is what `ctpipe compare` reads.
  exec.record_steps(true);
  exec.step(d.inputs, d.targets);
  std::printf(
      "\none step as it ran (with fewer cores than ranks, most waiting beyond the table is a thread waiting for a core):\n%s",
      ctpipe::comparison_text(ctpipe::compare_measured(executor::table, exec.recorded_step()), 3).c_str());
  // `quickstart step.svg step.json step.csv` also writes it: as it ran beside its replay (SVG), as
  // trace events, and as the CSV that `ctpipe compare` reads.
  if (argc > 1) std::ofstream(argv[1]) << ctpipe::measured_svg(executor::table, exec.recorded_step());
  if (argc > 2) std::ofstream(argv[2]) << ctpipe::measured_trace(executor::table, exec.recorded_step());
  if (argc > 3) std::ofstream(argv[3]) << ctpipe::to_csv(exec.recorded_step());

  std::printf(
      "\nsummary: trained %d steps of 8 microbatches on 4 ranks (8 stages); loss %.4f -> %.4f; "
      "every loss %s sequential training's, to the bit; activations allocated once:",
      steps, first, last, identical ? "equal to" : "DIFFERENT FROM");
  for (int r = 0; r < executor::ranks; ++r)
    std::printf(" %zu", executor::activation_bytes()[static_cast<std::size_t>(r)]);
  std::printf(" bytes per rank; table proved at compile time (bubble fraction %.4f)\n", report.bubble_fraction);
  return identical ? 0 : 1;
}
