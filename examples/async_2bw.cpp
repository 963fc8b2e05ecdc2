// PipeDream-2BW: the quickstart's MLP trained by an asynchronous pipeline (no flush between steps)
// that keeps two weight versions per stage and updates once per step of 8 microbatches. Every F
// and B of step k uses the weights of update k - 1 (one update stale): W(t+1) = W(t) - lr grad f(W(t-1)).
// Beside it, the memory PipeDream's weight stashing would keep instead (p - s versions on stage s).
#include <ctpipe/ctpipe.hpp>
#include <ctpipe/layers/dense.hpp>

#include <cstdio>
#include <vector>

namespace {

using ctpipe::layers::activation;
using ctpipe::layers::dense;

constexpr std::size_t batch = 8, width = 32;
using hidden = dense<batch, width, width>;
using net = ctpipe::model<hidden, hidden, hidden, hidden, hidden, hidden, hidden, hidden,
                          dense<batch, width, 4, activation::none>>;
using loss = ctpipe::layers::softmax_cross_entropy<batch, 4>;

constexpr auto stages = ctpipe::partition<net, 4>();
constexpr auto schedule = ctpipe::pipedream_2bw(4, 8);  // 4 ranks, 8 microbatches a step
static_assert(ctpipe::check<ctpipe::make_table<schedule>()>());
using executor = ctpipe::async_executor<schedule, net, stages, loss, ctpipe::sgd>;
using stashing = ctpipe::async_executor<ctpipe::pipedream(4, 8), net, stages, loss, ctpipe::sgd>;
static_assert(executor::version_slots == std::array<int, 4>{2, 2, 2, 2});

// Four Gaussian blobs: sample b of microbatch i (of step k) is of class (i + b + k) % 4.
void make_step(int k, std::vector<net::input_type>& in, std::vector<loss::target_type>& t) {
  unsigned long long s = 42 + static_cast<unsigned long long>(k);
  for (std::size_t i = 0; i < in.size(); ++i)
    for (std::size_t b = 0; b < batch; ++b) {
      const int c = static_cast<int>((i + b + static_cast<std::size_t>(k)) % 4);
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
  std::printf(
      "PipeDream-2BW: 4 ranks, 8 microbatches a step, no flush; every microbatch's weights are one update "
      "stale\n");
  for (int s = 0; s < 4; ++s)
    std::printf(
        "stage %d: %d weight versions (%zu bytes; weight stashing would keep %d: %zu bytes)\n", s,
        executor::version_slots[static_cast<std::size_t>(s)], executor::weight_bytes()[static_cast<std::size_t>(s)],
        stashing::version_slots[static_cast<std::size_t>(s)], stashing::weight_bytes()[static_cast<std::size_t>(s)]);

  net model;
  int seed = 1;
  ctpipe::for_each_layer(model, [&](auto& l) { l.init(static_cast<unsigned>(seed++)); });
  loss l;
  ctpipe::sgd opt{0.01};
  executor exec(model, l, opt);
  std::vector<net::input_type> in(8);
  std::vector<loss::target_type> t(8);
  double first = 0.0, last = 0.0;
  for (int k = 0; k < 40; ++k) {
    make_step(k, in, t);
    const auto losses = exec.step(in, t);
    double mean = 0.0;
    for (double x : losses) mean += x / static_cast<double>(losses.size());
    (k == 0 ? first : last) = mean;
    if (k % 5 == 0 || k == 39) std::printf("step %2d  loss %.6f\n", k, mean);
  }
  exec.finish();  // the backwards still in flight, their update, and the newest weights into `model`
  std::printf("drained after %d steps: the model holds the weights of the last update\n", 40);
  const bool learned = last < 0.5 * first;
  std::printf("the loss fell from %.4f to %.4f: %s\n", first, last, learned ? "trained" : "DID NOT TRAIN");
  return learned ? 0 : 1;
}
