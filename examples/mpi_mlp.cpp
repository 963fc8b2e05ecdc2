// The quickstart's MLP across processes: one process per pipeline rank, times D data-parallel
// replicas, over MPI. Run it with any MPI launcher, e.g. on one machine:
//
//   mpirun -np 4 ./build/bin/mpi_mlp [--trace FILE] [--svg FILE]
//
// It trains 1F1B on P = 2 ranks x D = processes / 2 replicas, then (with a multiple of 4
// processes) every schedule the executors run on P = 4 ranks, and checks each against sequential
// training of the same global batch in every process: losses, gradients and parameters equal to the
// bit. Exit code 0 when all agree, 1 when they do not (or a step fails).
#include <ctpipe/layers/dense.hpp>
#include <ctpipe/mpi.hpp>

#include <mpi.h>

#include <cstdio>
#include <exception>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace {

using ctpipe::layers::activation;
using ctpipe::layers::dense;

// The quickstart's model: nine dense layers, microbatches of 8 samples, 32 features, 4 classes.
constexpr std::size_t batch = 8, width = 32;
using hidden = dense<batch, width, width>;
using net = ctpipe::model<hidden, hidden, hidden, hidden, hidden, hidden, hidden, hidden,
                          dense<batch, width, 4, activation::none>>;
using loss = ctpipe::layers::softmax_cross_entropy<batch, 4>;
constexpr int microbatches = 8;  // per replica

int process = 0, processes = 1;

// Four Gaussian blobs: sample b of microbatch i is of class (i + b) % 4.
struct data_set {
  std::vector<net::input_type> inputs;
  std::vector<loss::target_type> targets;
};
data_set make_data(int n) {
  data_set d{std::vector<net::input_type>(static_cast<std::size_t>(n)),
             std::vector<loss::target_type>(static_cast<std::size_t>(n))};
  unsigned long long s = 42;
  for (std::size_t i = 0; i < d.inputs.size(); ++i)
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

void write_file(const char* path, const std::string& text) {
  std::FILE* f = std::fopen(path, "w");
  if (!f || std::fputs(text.c_str(), f) < 0 || std::fclose(f) != 0)
    throw std::runtime_error(std::string("cannot write ") + path);
  std::printf("wrote %s\n", path);
}

net make_net() {
  net m;
  int seed = 1;
  ctpipe::for_each_layer(m, [&](auto& l) { l.init(static_cast<unsigned>(seed++)); });
  return m;
}

std::vector<float> values(net& m, bool gradients) {
  std::vector<float> v;
  ctpipe::for_each_parameter(m, [&](auto p, auto g) {
    for (float x : gradients ? g : p) v.push_back(x);
  });
  return v;
}

// Trains Schedule's pipeline for `steps` steps next to sequential training of the same global
// batch (D replicas: each replica's microbatches summed in order, then the D sums in replica
// order). True when the losses, and this process's gradients and parameters, agree to the bit.
// Record (with `trace` or `svg`): records the last step on every process, and process 0 writes
// what ran (every process, with its replay) as Chrome trace events and as a picture (replica 0).
// (A template argument: the other schedules' runs compile no recording.)
template <auto Schedule, ctpipe::dispatch Dispatch = ctpipe::dispatch::automatic, bool Record = false>
bool train(std::string_view name, int steps, const char* trace = nullptr, const char* svg = nullptr) {
  constexpr auto table = ctpipe::make_table<Schedule>();
  constexpr auto stages = ctpipe::partition<net, table.stages()>();
  using executor = ctpipe::mpi::executor<table, net, stages, loss, Dispatch>;
  net model = make_net(), reference = model;
  loss l;
  executor exec(model, l);
  // SGD on this process's layers (the executor says which); the reference updates all of its own.
  ctpipe::optimizer opt(model, exec, ctpipe::sgd{.lr = 0.01}), ref_opt(reference, ctpipe::sgd{.lr = 0.01});
  const int d = exec.replicas();
  const data_set data = make_data(d * microbatches);
  const auto mine = static_cast<std::size_t>(exec.replica() * microbatches);
  std::vector<double> ref(data.inputs.size());
  bool same = true;
  double first = 0.0, last = 0.0;
  for (int step = 0; step < steps; ++step) {
    if constexpr (Record)
      if ((trace || svg) && step == steps - 1) exec.record_steps(true);  // (collective: every process alike)
    const auto losses = exec.step(std::span<const net::input_type>(data.inputs).subspan(mine, microbatches),
                                  std::span<const loss::target_type>(data.targets).subspan(mine, microbatches));
    std::vector<float> sum;
    for (int r = 0; r < d; ++r) {
      const auto at = static_cast<std::size_t>(r * microbatches);
      ctpipe::sequential_step(reference, l, std::span<const net::input_type>(data.inputs).subspan(at, microbatches),
                              std::span<const loss::target_type>(data.targets).subspan(at, microbatches),
                              std::span<double>(ref).subspan(at, microbatches));
      const std::vector<float> g = values(reference, true);
      if (r == 0)
        sum = g;
      else
        for (std::size_t i = 0; i < g.size(); ++i) sum[i] += g[i];
    }
    std::size_t i = 0;
    ctpipe::for_each_parameter(reference, [&](auto, auto g) {
      for (float& x : g) x = sum[i++];
    });
    double mean = 0.0;
    for (std::size_t k = 0; k < losses.size(); ++k) {
      same = same && losses[k] == ref[k];
      mean += losses[k] / static_cast<double>(losses.size());
    }
    (step == 0 ? first : last) = mean;
    std::vector<float> a = values(model, true), b = values(reference, true);
    opt.step();  // collective: the non-finite check's one all-reduce, then the update
    ref_opt.step();
    // Layers of other ranks keep zero gradients here: compare this rank's only.
    std::size_t at = 0;
    [&]<std::size_t... K>(std::index_sequence<K...>) {
      auto one = [&](auto& lay, int k) {
        const std::size_t n = lay.gradients().size();
        if (table.stage_rank[static_cast<std::size_t>(stages.stage_of_layer(k))] == exec.rank())
          for (std::size_t j = at; j < at + n; ++j) same = same && a[j] == b[j];
        at += n;
      };
      (one(model.template layer<K>(), static_cast<int>(K)), ...);
    }
    (std::make_index_sequence<net::size>{});
  }
  if constexpr (Record)
    if ((trace || svg) && process == 0) {
      std::vector<ctpipe::measured_step> ran;
      for (int r = 0; r < d; ++r) ran.push_back(exec.recorded_step(r));
      const ctpipe::step_comparison c = ctpipe::compare_measured(executor::table, ran[0]);
      std::printf(
          "recorded the last step: replica 0 measured %.1f us, replayed with its task times %.1f us; "
          "clocks aligned within %.1f us\n",
          c.measured * 1e6, c.replayed * 1e6, exec.recorded_alignment_error() * 1e6);
      if (trace)
        write_file(trace, ctpipe::measured_trace(executor::table, std::span<const ctpipe::measured_step>(ran)));
      if (svg) write_file(svg, ctpipe::measured_svg(executor::table, ran[0]));
    }
  int ok = same ? 1 : 0, all = 0;
  MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (process == 0)
    std::printf("%-24.*s P=%d x D=%d: loss %.4f -> %.4f over %d steps; %s\n", static_cast<int>(name.size()),
                name.data(), executor::ranks, d, first, last, steps,
                all ? "losses, gradients and parameters equal the sequential run's to the bit"
                    : "DIFFERS from the sequential run");
  return all == 1;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &process);
  MPI_Comm_size(MPI_COMM_WORLD, &processes);
  // --trace FILE, --svg FILE: the first run's last step as it ran (every process), and its replay.
  const char* trace = nullptr;
  const char* svg = nullptr;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if ((a == "--trace" || a == "--svg") && i + 1 < argc)
      (a == "--trace" ? trace : svg) = argv[++i];
    else {
      if (process == 0) std::fprintf(stderr, "mpi_mlp: unknown option '%s' (--trace FILE, --svg FILE)\n", argv[i]);
      MPI_Finalize();
      return 2;
    }
  }
  bool ok = true;
  try {
    if (process == 0)
      std::printf("ctpipe mpi_mlp: the quickstart's 9-layer MLP on %d processes, %d microbatches per replica\n",
                  processes, microbatches);
    ok = train<ctpipe::one_f_one_b(2, microbatches), ctpipe::dispatch::automatic, true>("1F1B (data parallel)", 20,
                                                                                        trace, svg) &&
         ok;
    if (processes % 4 == 0) {
      // Each rank's program walked as a table: the same results as unrolled (the default, used
      // above), and ten schedules x four ranks compile in a fraction of the time.
      constexpr auto walk = ctpipe::dispatch::table_walk;
      ok = train<ctpipe::naive(4, microbatches), walk>("naive", 5) && ok;
      ok = train<ctpipe::gpipe(4, microbatches), walk>("GPipe", 5) && ok;
      ok = train<ctpipe::one_f_one_b(4, microbatches), walk>("1F1B", 5) && ok;
      ok = train<ctpipe::interleaved(4, microbatches, 2), walk>("interleaved 1F1B", 5) && ok;
      ok = train<ctpipe::zb_h1(4, microbatches), walk>("ZB-H1", 5) && ok;
      ok = train<ctpipe::zb_h2(4, microbatches), walk>("ZB-H2", 5) && ok;
      ok = train<ctpipe::interleaved_zero_bubble(4, microbatches, 2), walk>("interleaved zero bubble", 5) && ok;
      ok = train<ctpipe::zb_v(4, microbatches), walk>("ZB-V", 5) && ok;
      ok = train<ctpipe::dualpipe_v(4, microbatches), walk>("DualPipeV", 5) && ok;
    } else if (process == 0) {
      std::printf("(the P = 4 schedules need a multiple of 4 processes)\n");
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mpi_mlp: process %d: %s\n", process, e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);  // ends every process of the job, whatever it was waiting for
  }
  MPI_Finalize();
  return ok ? 0 : 1;
}
