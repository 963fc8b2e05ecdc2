// PipeTransformer's elastic freezing: the quickstart's MLP on 4 devices (threads), starting as a
// 4-stage pipeline. At the end of each epoch AutoFreeze's geometric schedule says how many leading
// layers to freeze; the trainer moves to the precomputed freeze point at or below it, where the
// active layers are re-partitioned over a shorter pipeline and the freed devices become more
// data-parallel replicas (4 x 1 -> 2 x 2 -> 1 x 4). The data repeats every epoch, so the frozen
// layers' output comes from the cache after the first epoch at each point.
#include <ctpipe/ctpipe.hpp>
#include <ctpipe/layers/dense.hpp>

#include <array>
#include <cstdio>
#include <numeric>
#include <vector>

namespace {

using ctpipe::layers::activation;
using ctpipe::layers::dense;

constexpr std::size_t batch = 8, width = 32;
using hidden = dense<batch, width, width>;
using net = ctpipe::model<hidden, hidden, hidden, hidden, hidden, hidden, hidden, hidden,
                          dense<batch, width, 4, activation::none>>;
using loss = ctpipe::layers::softmax_cross_entropy<batch, 4>;

// 4 devices, a 4-stage pipeline to start, 8 microbatches a step, freeze points after 0, 4 and 6
// layers, the frozen prefix costing nothing once cached. Every figure below is a compile-time one.
using plan = ctpipe::elastic_plan<net, 4, 4, 8, std::array{0, 4, 6}, true>;
static_assert(plan::points[1].ranks == 2 && plan::points[1].replicas == 2);
static_assert(plan::points[2].ranks == 1 && plan::points[2].replicas == 4);

constexpr int steps_per_epoch = 4, epoch_microbatches = steps_per_epoch * 8;

void make_data(std::vector<net::input_type>& in, std::vector<loss::target_type>& t) {
  unsigned long long s = 42;
  for (std::size_t i = 0; i < in.size(); ++i)
    for (std::size_t b = 0; b < batch; ++b) {
      const int c = static_cast<int>((i + b) % 4);
      t[i][b] = c;
      for (std::size_t f = 0; f < width; ++f) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        const float noise = static_cast<float>(static_cast<double>(s >> 40) / static_cast<double>(1ull << 24) - 0.5);
        in[i](b, f) = (f % 4 == static_cast<std::size_t>(c) ? 1.0f : 0.0f) + 0.5f * noise;
      }
    }
}

}  // namespace

int main() {
  std::printf("elastic freezing: 9 layers on 4 devices; freeze points (layers frozen: stages x replicas):");
  for (const auto& p : plan::points) std::printf("  %d: %d x %d", p.frozen, p.ranks, p.replicas);
  std::printf("\n");
  net model;
  int seed = 1;
  ctpipe::for_each_layer(model, [&](auto& l) { l.init(static_cast<unsigned>(seed++)); });
  loss l;
  ctpipe::sgd opt{0.01};
  ctpipe::elastic_trainer<plan, loss, ctpipe::sgd> train(model, l, opt);
  std::vector<net::input_type> in(epoch_microbatches);
  std::vector<loss::target_type> t(epoch_microbatches);
  make_data(in, t);
  std::vector<std::size_t> ids(epoch_microbatches);
  std::iota(ids.begin(), ids.end(), 0);
  const ctpipe::geometric_freezing autofreeze{0.3};
  double first = 0.0, last = 0.0;
  for (int epoch = 0; epoch < 6; ++epoch) {
    double mean = 0.0;
    for (int k = 0; k < steps_per_epoch; ++k) {
      const auto at = static_cast<std::size_t>(k * 8);
      const auto losses =
          train.step(std::span<const net::input_type>(&in[at], 8), std::span<const loss::target_type>(&t[at], 8),
                     std::span<const std::size_t>(&ids[at], 8));
      for (double x : losses) mean += x / epoch_microbatches;
    }
    (epoch == 0 ? first : last) = mean;
    const auto before = train.point();
    const int frozen = train.end_epoch(autofreeze);
    std::printf("epoch %d  loss %.6f  ran on %d x %d with %d layers frozen; now %d frozen (%d x %d)\n", epoch + 1, mean,
                before.ranks, before.replicas, before.frozen, frozen, train.point().ranks, train.point().replicas);
  }
  const bool learned = last < 0.5 * first;
  std::printf("the loss fell from %.4f to %.4f: %s\n", first, last, learned ? "trained" : "DID NOT TRAIN");
  return learned ? 0 : 1;
}
