// Split backward with layers that do not split: such a layer runs its whole backward at I and
// nothing at W, and training stays bitwise equal to the sequential reference.
#include "support/numerics.hpp"

namespace {

// A dense layer that offers only the full backward.
template <class Dense>
struct unsplit {
  using input_type = typename Dense::input_type;
  using output_type = typename Dense::output_type;
  static constexpr double cost = Dense::cost;
  Dense inner;
  void init(std::uint64_t seed) { inner.init(seed); }
  std::span<float> parameters() { return inner.parameters(); }
  std::span<float> gradients() { return inner.gradients(); }
  void forward(const input_type& x, output_type& y) const { inner.forward(x, y); }
  void backward(const input_type& x, const output_type& y, const output_type& dy, input_type& dx) {
    inner.backward(x, y, dy, dx);
  }
};

using ctpipe::layers::activation;
using ctpipe::layers::dense;
using test::batch, test::classes, test::features, test::hidden;
using mixed = ctpipe::model<dense<batch, features, hidden>, unsplit<dense<batch, hidden, hidden>>,
                            dense<batch, hidden, hidden>, unsplit<dense<batch, hidden, classes, activation::none>>>;
static_assert(ctpipe::splittable_layer<mixed::layer_type<0>> && !ctpipe::splittable_layer<mixed::layer_type<1>>);

template <auto Table, ctpipe::dispatch Dispatch>
void train_mixed() {
  constexpr auto stages = ctpipe::partition<mixed, Table.stages()>();
  mixed seq, pipe;
  std::uint64_t k = 1, j = 1;
  ctpipe::for_each_layer(seq, [&](auto& l) { l.init(k++); });
  ctpipe::for_each_layer(pipe, [&](auto& l) { l.init(j++); });
  test::loss l;
  const auto d = test::make_data(Table.params.microbatches);
  std::vector<double> seq_losses(d.inputs.size());
  ctpipe::host_executor<Table, mixed, stages, test::loss, Dispatch> exec(pipe, l);
  for (int step = 0; step < 10; ++step) {
    ctpipe::sequential_step(seq, l, std::span<const test::input>(d.inputs), std::span<const test::target>(d.targets),
                            std::span<double>(seq_losses));
    const auto losses = exec.step(d.inputs, d.targets);
    for (std::size_t i = 0; i < seq_losses.size(); ++i) REQUIRE(losses[i] == seq_losses[i]);
    REQUIRE(test::bitwise_equal(test::gradients(seq), test::gradients(pipe)));
    ctpipe::sgd_step(seq, 0.02);
    ctpipe::sgd_step(pipe, 0.02);
  }
  CHECK(test::bitwise_equal(test::parameters(seq), test::parameters(pipe)));
}

}  // namespace

TEST_CASE("host executor: split backward with layers that do not split, bitwise") {
  train_mixed<ctpipe::make_table<ctpipe::zb_h1(2, test::microbatches)>(), ctpipe::dispatch::unrolled>();
  train_mixed<ctpipe::make_table<ctpipe::zb_v(2, test::microbatches)>(), ctpipe::dispatch::table_walk>();
  train_mixed<ctpipe::make_table<ctpipe::dualpipe_v(2, test::microbatches)>(), ctpipe::dispatch::unrolled>();
}
