// ctpipe's side of the PyTorch comparison (bench/pytorch_pipe.sh): trains the MLP of
// bench/blas_mlp.hpp with GPipe for N steps and prints one JSON line (median step time, first and
// last loss). `--dump FILE` writes the initial parameters, the data and the stage split instead, so
// that bench/pytorch_pipe.py starts torch.distributed.pipeline.sync.Pipe from the same point.
#include "blas_mlp.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace {

constexpr std::size_t micro = 32, features = 128, hidden = 128, classes = 16;
constexpr int chunks = 8;
using ctpipe::layers::activation;
using first_layer = bench::blas_dense<micro, features, hidden>;
using hidden_layer = bench::blas_dense<micro, hidden, hidden>;
using last_layer = bench::blas_dense<micro, hidden, classes, activation::none>;
using net = ctpipe::model<first_layer, hidden_layer, hidden_layer, hidden_layer, hidden_layer, hidden_layer,
                          hidden_layer, last_layer>;
using input = net::input_type;

// Mean cross-entropy over the whole batch (chunks x micro samples), as torch's cross_entropy on
// Pipe's output: each microbatch's gradient is scaled by 1 / chunks.
struct batch_mean_loss : ctpipe::layers::softmax_cross_entropy<micro, classes> {
  using base = ctpipe::layers::softmax_cross_entropy<micro, classes>;
  double operator()(const ctpipe::layers::matrix<micro, classes>& y, const target_type& t,
                    ctpipe::layers::matrix<micro, classes>& dy) const {
    const double l = base::operator()(y, t, dy);
    for (float& v : dy.v) v /= static_cast<float>(chunks);
    return l;
  }
};
using target = batch_mean_loss::target_type;

net make_net() {
  net m;
  std::uint64_t seed = 1;
  ctpipe::for_each_layer(m, [&](auto& l) { l.init(seed++); });
  return m;
}

// Inputs uniform in [-1, 1); each sample's class is the index of its largest of the first 16
// features (a rule the MLP can learn).
void make_data(std::vector<input>& in, std::vector<target>& t) {
  std::uint64_t s = 0x2545F4914F6CDD1Dull;
  in.resize(chunks);
  t.resize(chunks);
  for (int c = 0; c < chunks; ++c)
    for (std::size_t r = 0; r < micro; ++r) {
      for (std::size_t f = 0; f < features; ++f) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        in[static_cast<std::size_t>(c)](r, f) =
            static_cast<float>(s >> 40) / static_cast<float>(1ull << 24) * 2.0f - 1.0f;
      }
      std::size_t best = 0;
      for (std::size_t k = 1; k < classes; ++k)
        if (in[static_cast<std::size_t>(c)](r, k) > in[static_cast<std::size_t>(c)](r, best)) best = k;
      t[static_cast<std::size_t>(c)][r] = static_cast<int>(best);
    }
}

template <int Ranks>
int train(int steps, double rate) {
  constexpr auto table = ctpipe::make_table<ctpipe::gpipe(Ranks, chunks)>();
  constexpr auto stages = ctpipe::partition<net, Ranks>();
  net m = make_net();
  batch_mean_loss loss;
  std::vector<input> in;
  std::vector<target> t;
  make_data(in, t);
  ctpipe::host_executor<table, net, stages, batch_mean_loss> exec(m, loss);
  std::vector<double> times, losses;
  for (int s = 0; s < steps; ++s) {
    const auto start = std::chrono::steady_clock::now();
    const auto l = exec.step(in, t);
    ctpipe::sgd_step(m, rate);
    times.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    double sum = 0.0;
    for (double x : l) sum += x;
    losses.push_back(sum / chunks);
  }
  std::vector<double> sorted = times;
  std::sort(sorted.begin(), sorted.end());
  std::printf(
      "{\"runner\": \"ctpipe gpipe p=%d\", \"threads\": %d, \"steps\": %d, \"step_ms_median\": %.4f, \"step_ms_min\": %.4f, "
      "\"loss_first\": %.6f, \"loss_last\": %.6f}\n",
      Ranks, Ranks, steps, sorted[sorted.size() / 2], sorted.front(), losses.front(), losses.back());
  return 0;
}

int dump(const char* path) {
  net m = make_net();
  std::vector<input> in;
  std::vector<target> t;
  make_data(in, t);
  constexpr auto stages = ctpipe::partition<net, 2>();
  std::ofstream f(path, std::ios::binary);
  const auto put = [&](const void* p, std::size_t n) {
    f.write(static_cast<const char*>(p), static_cast<std::streamsize>(n));
  };
  const std::int32_t header[] = {static_cast<std::int32_t>(net::size),
                                 2,
                                 stages.first[0],
                                 stages.first[1],
                                 stages.first[2],
                                 static_cast<std::int32_t>(micro),
                                 static_cast<std::int32_t>(features),
                                 static_cast<std::int32_t>(hidden),
                                 static_cast<std::int32_t>(classes),
                                 chunks};
  put(header, sizeof header);
  ctpipe::for_each_layer(m, [&](auto& l) { put(l.params.data(), l.params.size() * sizeof(float)); });
  for (const auto& x : in) put(x.v.data(), x.v.size() * sizeof(float));
  for (const auto& x : t) put(x.data(), x.size() * sizeof(int));
  if (!f) {
    std::fprintf(stderr, "bench_pipe_mlp: cannot write %s\n", path);
    return 2;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int steps = 20, ranks = 2;
  double rate = 0.05;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--dump" && i + 1 < argc) return dump(argv[++i]);
    if (a == "--steps" && i + 1 < argc)
      steps = std::atoi(argv[++i]);
    else if (a == "--ranks" && i + 1 < argc)
      ranks = std::atoi(argv[++i]);
    else if (a == "--rate" && i + 1 < argc)
      rate = std::atof(argv[++i]);
    else {
      std::fprintf(stderr, "usage: bench_pipe_mlp [--steps N] [--ranks 1|2] [--rate R] | --dump FILE\n");
      return 2;
    }
  }
  if (steps < 1) {
    std::fprintf(stderr, "bench_pipe_mlp: --steps must be at least 1\n");
    return 2;
  }
  if (ranks == 1) return train<1>(steps, rate);
  if (ranks == 2) return train<2>(steps, rate);
  std::fprintf(stderr, "bench_pipe_mlp: --ranks must be 1 or 2\n");
  return 2;
}
