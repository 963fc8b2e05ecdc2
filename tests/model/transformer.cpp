// The transformer layers on a BLAS (ctpipe/layers/linear.hpp, gelu.hpp, embedding.hpp,
// causal_attention_qkv.hpp) and the GPT made of them (ctpipe/layers/gpt.hpp): each layer's
// gradients against central differences, over all rows and over a microbatch's extent (whose other
// rows stay untouched); the split backward (I, then W) against the full backward, bit for bit; and
// the whole GPT's loss and gradients against a straightforward double-precision GPT
// (tests/support/gpt_reference.hpp).
#include <ctpipe/ctpipe.hpp>
#include <ctpipe/layers/dense.hpp>
#include <ctpipe/layers/gpt.hpp>
#include <ctpipe/model/measure_layers.hpp>

#include <doctest/doctest.h>

#include "support/gpt_reference.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <stdexcept>
#include <vector>

namespace {

namespace l = ctpipe::layers;
using ctpipe::context;

float next_value(std::uint64_t& s) {
  s = s * 6364136223846793005ull + 1442695040888963407ull;
  return static_cast<float>(static_cast<double>(s >> 40) / static_cast<double>(1ull << 24) - 0.5);
}

constexpr float sentinel = 1234.5f;

template <class L>
struct probe {
  L layer;
  context c;
  std::size_t rows_used;  // rows of the extent (all rows where the layer is rows::fixed)

  // L = sum over the used rows of y * r (r = dL/dy).
  double loss(const L& at, const typename L::input_type& x, const typename L::output_type& r) const {
    auto y = std::make_unique<typename L::output_type>();
    auto s = std::make_unique<ctpipe::saved_t<L>>();
    L copy = at;
    ctpipe::detail::call_forward(
        copy, [&] { return c; }, x, *y, *s);
    const std::size_t n = rows_used * L::output_type::cols;
    double sum = 0.0;
    for (std::size_t i = 0; i < n; ++i) sum += static_cast<double>(y->v[i]) * r.v[i];
    return sum;
  }

  // Checks dx (every `stride`-th input) and the parameter gradients (every `stride`-th) against
  // central differences; x's rows beyond the extent and dx's stay as they were.
  // (Token ids have no gradient: no dx to check.)
  void check(typename L::input_type x, std::uint64_t seed, bool input_gradient, std::size_t stride) {
    auto r = std::make_unique<typename L::output_type>();
    for (auto& v : r->v) v = next_value(seed);
    auto y = std::make_unique<typename L::output_type>();
    auto dx = std::make_unique<typename L::input_type>();
    y->v.fill(sentinel);
    if constexpr (requires { dx->v.fill(sentinel); }) dx->v.fill(sentinel);
    auto s = std::make_unique<ctpipe::saved_t<L>>();
    if constexpr (ctpipe::has_parameters<L>) std::fill(layer.grads.begin(), layer.grads.end(), 0.0f);
    ctpipe::detail::call_forward(
        layer, [&] { return c; }, x, *y, *s);
    ctpipe::detail::call_backward<false>(
        layer, [&] { return c; }, x, *y, *s, *r, *dx);
    for (std::size_t i = rows_used * L::output_type::cols; i < y->v.size(); ++i) REQUIRE(y->v[i] == sentinel);
    const float h = 1e-2f;
    if constexpr (requires { L::input_type::cols; }) {
      const std::size_t cols = L::input_type::cols;
      REQUIRE(input_gradient);
      for (std::size_t i = rows_used * cols; i < dx->v.size(); ++i) REQUIRE(dx->v[i] == sentinel);
      for (std::size_t i = 0; i < rows_used * cols; i += stride) {
        auto up = x, down = x;
        up.v[i] += h;
        down.v[i] -= h;
        const double numeric = (loss(layer, up, *r) - loss(layer, down, *r)) / (2.0 * h);
        CHECK(dx->v[i] == doctest::Approx(numeric).epsilon(0.02).scale(1.0));
      }
    }
    if constexpr (ctpipe::has_parameters<L>)
      for (std::size_t i = 0; i < layer.params.size(); i += stride) {
        L up = layer, down = layer;
        up.params[i] += h;
        down.params[i] -= h;
        const double numeric = (loss(up, x, *r) - loss(down, x, *r)) / (2.0 * h);
        CHECK(layer.grads[i] == doctest::Approx(numeric).epsilon(0.02).scale(1.0));
      }
  }

  // I then W gives backward's bits: dx, and the weight gradients added to those already there.
  void check_split(const typename L::input_type& x, std::uint64_t seed) {
    typename L::output_type dy, y;
    ctpipe::saved_t<L> s;
    for (auto& v : dy.v) v = next_value(seed);
    for (auto& g : layer.grads) g = next_value(seed);  // gradients of earlier microbatches
    ctpipe::detail::call_forward(
        layer, [&] { return c; }, x, y, s);
    L full = layer, split = layer;
    typename L::input_type dx_full{}, dx_split{};
    ctpipe::detail::call_backward<false>(
        full, [&] { return c; }, x, y, s, dy, dx_full);
    ctpipe::detail::call_backward<true>(
        split, [&] { return c; }, x, y, s, dy, dx_split);
    ctpipe::detail::call_backward_weight(
        split, [&] { return c; }, x, y, s, dy);
    CHECK(std::memcmp(&dx_full, &dx_split, sizeof dx_full) == 0);
    CHECK(full.grads == split.grads);
  }
};

template <class M>
M random_matrix(std::uint64_t seed, float scale = 2.0f) {
  M m;
  for (auto& v : m.v) v = scale * next_value(seed);
  return m;
}

constexpr auto tk = l::rows::tokens;

}  // namespace

TEST_CASE("linear: gradients match central differences, over all rows and over an extent, and I then W is backward") {
  SUBCASE("with a bias, all rows") {
    probe<l::linear<5, 7, 6>> p{{}, {}, 5};
    p.layer.init(3);
    std::uint64_t s = 9;
    for (auto& v : p.layer.params) v += 0.1f * next_value(s);  // a bias that is not zero
    p.check(random_matrix<l::matrix<5, 7>>(1), 2, true, 1);
    p.check_split(random_matrix<l::matrix<5, 7>>(3), 4);
  }
  SUBCASE("without a bias, the first 3 of 6 rows (rows::tokens)") {
    probe<l::linear<6, 5, 4, l::bias::no, tk>> p{{}, {.extent = 3}, 3};
    p.layer.init(5);
    CHECK(p.layer.params.size() == 20);
    p.check(random_matrix<l::matrix<6, 5, tk>>(6), 7, true, 1);
    p.check_split(random_matrix<l::matrix<6, 5, tk>>(8), 9);
  }
}

TEST_CASE("gelu: its gradient matches central differences, and it is GPT-2's tanh form") {
  probe<l::gelu<4, 6, tk>> p{{}, {.extent = 3}, 3};
  p.check(random_matrix<l::matrix<4, 6, tk>>(11, 6.0f), 12, true, 1);
  l::matrix<4, 6, tk> x, y;
  x.v[0] = 1.0f, x.v[1] = -2.0f, x.v[2] = 0.0f;
  p.layer.forward(context{}, x, y);
  CHECK(y.v[0] == doctest::Approx(0.8411920).epsilon(1e-6));  // torch.nn.functional.gelu(1, approximate="tanh")
  CHECK(y.v[1] == doctest::Approx(-0.0454023).epsilon(1e-5));
  CHECK(y.v[2] == 0.0f);
}

TEST_CASE("gelu: its tanh is within 4e-7 of tanh, odd, and within 4e-7 of +-1 at the ends") {
  double worst = 0.0;
  for (int i = -120000; i <= 120000; ++i) {
    const float x = static_cast<float>(i) * 1e-4f;
    worst = std::max(worst, std::fabs(l::detail::tanh_rational(x) - std::tanh(static_cast<double>(x))));
    REQUIRE(l::detail::tanh_rational(-x) == -l::detail::tanh_rational(x));
  }
  CHECK(worst < 4e-7);
  // Far out, the clamp's value: tanh(7.9053) is 1 - 2.7e-7 (the compilers round it differently).
  CHECK(std::fabs(l::detail::tanh_rational(1e30f) - 1.0) < 4e-7);
  CHECK(std::fabs(l::detail::tanh_rational(-1e30f) + 1.0) < 4e-7);
}

TEST_CASE("embedding: token and position vectors, its W adds each row's gradient to both, I then W is backward") {
  using E = l::embedding<3, 2, 5, 4, tk>;  // 3 positions, 2 sequences, 5 ids, width 4
  probe<E> p{{}, {.extent = 4}, 4};        // 2 tokens of each sequence
  p.layer.init(13, 0.5f);
  E::input_type ids;
  ids.v = {4, 0, 2, 2, 1, 3};  // rows t * 2 + b
  l::matrix<6, 4, tk> y;
  p.layer.forward(p.c, ids, y);
  for (std::size_t r = 0; r < 4; ++r)
    for (std::size_t k = 0; k < 4; ++k)
      CHECK(y(r, k) ==
            p.layer.params[static_cast<std::size_t>(ids.v[r]) * 4 + k] + p.layer.params[(5 + r / 2) * 4 + k]);
  p.check(ids, 14, false, 1);
  // Rows of position 2 (beyond the extent) add nothing: wpe's third row keeps a zero gradient.
  for (std::size_t k = 0; k < 4; ++k) CHECK(p.layer.grads[(5 + 2) * 4 + k] == 0.0f);
  p.check_split(ids, 15);
}

TEST_CASE("embedding: an id outside the vocabulary and an extent that splits a sequence are refused, by name") {
  using E = l::embedding<3, 2, 5, 4, tk>;
  E e;
  E::input_type ids;
  l::matrix<6, 4, tk> y;
  ids.v = {0, 1, 5, 0, 0, 0};
  CHECK_THROWS_WITH_AS(e.forward(context{.microbatch = 3}, ids, y),
                       "ctpipe::layers::embedding: microbatch 3, row 2: token id 5 is outside the vocabulary (0 to 4)",
                       std::out_of_range);
  ids.v[2] = 1;
  CHECK_THROWS_WITH_AS(e.forward(context{.microbatch = 1, .extent = 3}, ids, y),
                       "ctpipe::layers::embedding: microbatch 1 has extent 3, not a multiple of its 2 sequences (the "
                       "extent counts the tokens of all of them)",
                       std::invalid_argument);
}

TEST_CASE("causal_attention_qkv: gradients match central differences, and a token sees only its own sequence's past") {
  SUBCASE("one sequence, one head, all rows") {
    probe<l::causal_attention_qkv<4, 1, 4, 1>> p{{}, {}, 4};
    p.check(random_matrix<l::matrix<4, 12>>(21), 22, true, 1);
  }
  SUBCASE("3 sequences, 2 heads, 3 of 4 tokens each (rows::tokens)") {
    probe<l::causal_attention_qkv<4, 3, 8, 2, tk>> p{{}, {.extent = 9}, 9};
    p.check(random_matrix<l::matrix<12, 24, tk>>(23), 24, true, 1);
  }
  SUBCASE("causality") {
    using A = l::causal_attention_qkv<3, 2, 4, 2>;
    A a;
    auto x = random_matrix<A::input_type>(25);
    A::output_type y, y2;
    A::saved_type s;
    a.forward(context{}, x, y, s);
    auto x2 = x;
    for (std::size_t c = 0; c < 12; ++c) x2(2, c) += 1.0f;  // token 1 of sequence 0 (row 1 * 2 + 0)
    a.forward(context{}, x2, y2, s);
    for (std::size_t r : {0u, 1u, 3u, 5u})  // earlier tokens of sequence 0, and all of sequence 1
      for (std::size_t c = 0; c < 4; ++c) CHECK(y2(r, c) == y(r, c));
    for (std::size_t c = 0; c < 4; ++c) CHECK(y2(4, c) != y(4, c));  // token 2 of sequence 0 sees it
  }
}

namespace {
// The test GPT: 2 blocks, 2 heads, width 16, 2 sequences of up to 8 tokens, 24 ids.
constexpr l::gpt_shape tiny{.vocab = 24, .tokens = 8, .batch = 2, .width = 16, .heads = 2, .blocks = 2};
using tiny_gpt = l::gpt<tiny>;

// The spans of the layers with parameters, in layer order (the head's last).
std::vector<std::span<float>> parameter_spans(tiny_gpt::model& m, bool gradients) {
  std::vector<std::span<float>> out;
  ctpipe::for_each_parameter(m, [&](std::span<float> p, std::span<float> g) { out.push_back(gradients ? g : p); });
  return out;
}
}  // namespace

TEST_CASE("gpt: the model's shape, and its loss and gradients against a straightforward double-precision GPT") {
  static_assert(tiny_gpt::layer_count == 2 + 2 * tiny_gpt::block_layers + 2);
  static_assert(tiny_gpt::model::token_capacity == 16);
  static_assert(!tiny_gpt::model::is_chain);
  auto m = std::make_unique<tiny_gpt::model>();
  tiny_gpt::init(*m, 7);
  std::uint64_t seed = 3;
  for (auto p : parameter_spans(*m, false))  // away from 1 and 0, so that every parameter matters
    for (float& v : p) v += 0.2f * next_value(seed);
  ctpipe::tie_parameters(*m);
  tiny_gpt::loss loss;
  std::vector<tiny_gpt::input_type> in(2);
  std::vector<tiny_gpt::target_type> targets(2);
  for (std::size_t mb = 0; mb < 2; ++mb)
    for (std::size_t r = 0; r < tiny_gpt::rows; ++r) {
      in[mb].v[r] = static_cast<std::int32_t>((r * 5 + mb * 3 + 1) % tiny.vocab);
      targets[mb][r] = static_cast<int>((r * 7 + mb) % tiny.vocab);
    }
  const std::vector<int> extents{16, 10};  // 8 and 5 tokens per sequence
  std::vector<double> losses(2);
  ctpipe::sequential_step(*m, loss, std::span<const tiny_gpt::input_type>(in),
                          std::span<const tiny_gpt::target_type>(targets), std::span<const int>(extents),
                          std::span<double>(losses));

  test_support::gpt_reference ref{tiny.vocab, tiny.tokens, tiny.batch, tiny.width, tiny.heads, tiny.blocks, {}};
  ref.load(parameter_spans(*m, false));
  const auto total = [&](const test_support::gpt_reference& r) {
    return r.loss(in[0].v.data(), targets[0].data(), 8) + r.loss(in[1].v.data(), targets[1].data(), 5);
  };
  CHECK(losses[0] + losses[1] == doctest::Approx(total(ref)).epsilon(1e-5));

  // Gradients: every tensor of every layer but the head (tied: its gradient is the embedding's),
  // 6 entries each, against central differences of the reference.
  const auto grads = parameter_spans(*m, true);
  const auto& tensors_of = [&](std::size_t layer) -> std::vector<std::size_t> {  // each tensor's length
    const std::size_t W = tiny.width, n = ref.p[layer].size();
    if (layer == 0) return {tiny.vocab * W, tiny.tokens * W};
    if (n == 2 * W) return {W, W};                                                                // a layer norm
    const std::size_t out = n == 3 * W * W + 3 * W ? 3 * W : n == 4 * W * W + 4 * W ? 4 * W : W;  // a linear layer
    return {n - out, out};
  };
  int checked = 0;
  for (std::size_t layer = 0; layer + 1 < grads.size(); ++layer) {
    std::size_t offset = 0;
    for (std::size_t len : tensors_of(layer)) {
      for (std::size_t k = 0; k < 6; ++k) {
        const std::size_t i = offset + (k * 7919 + layer * 31) % len;
        test_support::gpt_reference up = ref, down = ref;
        const double h = 1e-5;
        up.p[layer][i] += h;
        down.p[layer][i] -= h;
        const double numeric = (total(up) - total(down)) / (2 * h);
        INFO("layer " << layer << ", parameter " << i);
        CHECK(grads[layer][i] == doctest::Approx(numeric).epsilon(2e-3).scale(1.0));
        ++checked;
      }
      offset += len;
    }
  }
  CHECK(checked == 6 * 2 * (1 + 6 * 2 + 1));
}

TEST_CASE("measure_layers: every GPT layer timed, its sizes, the tied head and the residuals' sources") {
  auto m = std::make_unique<tiny_gpt::model>();
  tiny_gpt::init(*m, 7);
  tiny_gpt::loss loss;
  tiny_gpt::input_type in{};
  tiny_gpt::target_type target{};
  for (std::size_t r = 0; r < tiny_gpt::rows; ++r) {
    in.v[r] = static_cast<std::int32_t>(r % tiny.vocab);
    target[r] = static_cast<int>((r + 1) % tiny.vocab);
  }
  const auto before = parameter_spans(*m, false);
  std::vector<std::vector<float>> kept;
  for (auto p : before) kept.emplace_back(p.begin(), p.end());
  const auto layers = ctpipe::measure_layers(*m, loss, in, target, 16, 2);
  REQUIRE(layers.size() == tiny_gpt::layer_count);
  for (std::size_t k = 0; k < layers.size(); ++k) {
    INFO(tiny_gpt::layer_name(k));
    CHECK(layers[k].forward > 0.0);
    CHECK(layers[k].backward_input > 0.0);
    CHECK(layers[k].output_bytes > 0);
  }
  const std::size_t W = tiny.width;
  CHECK(tiny_gpt::layer_name(0) == "embedding");
  CHECK(tiny_gpt::layer_name(3) == "block0.qkv");
  CHECK(tiny_gpt::layer_name(2 + 12 + 11) == "block1.add2");
  CHECK(tiny_gpt::layer_name(tiny_gpt::layer_count - 1) == "head");
  // Sizes: the embedding's two tables; a split layer's W timed; a whole one's (layer norm) none.
  CHECK(layers[0].parameter_bytes == sizeof(float) * (tiny.vocab + tiny.tokens) * W);
  CHECK(layers[0].output_bytes == sizeof(float) * tiny_gpt::rows * W);
  CHECK(layers[3].backward_weight > 0.0);
  CHECK(layers[3].parameter_bytes == sizeof(float) * (W * 3 * W + 3 * W));
  CHECK(layers[4].saved_bytes > 0);  // attention keeps its probabilities
  // The head shares the embedding's token table; each residual add also reads 6 layers back.
  CHECK(layers.back().shares_with == 0);
  CHECK(layers.back().parameter_bytes == sizeof(float) * tiny.vocab * W);
  CHECK(layers[7].skip == 6);
  CHECK(layers[13].skip == 6);
  CHECK(layers[6].skip == 0);
  // Measuring trains nothing: the parameters are as they were, the gradients zero.
  const auto after = parameter_spans(*m, false);
  for (std::size_t l = 0; l < after.size(); ++l)
    CHECK(std::equal(after[l].begin(), after[l].end(), kept[l].begin(), kept[l].end()));
  for (auto g : parameter_spans(*m, true)) CHECK(std::all_of(g.begin(), g.end(), [](float v) { return v == 0.0f; }));
}

TEST_CASE("measure_layers: a chain's layers, whole backwards as I") {
  using ctpipe::layers::dense;
  using mlp = ctpipe::model<dense<4, 8, 16>, dense<4, 16, 2, ctpipe::layers::activation::none>>;
  mlp m;
  ctpipe::for_each_layer(m, [](auto& l) { l.init(3); });
  ctpipe::layers::softmax_cross_entropy<4, 2> loss;
  mlp::input_type in{};
  for (std::size_t i = 0; i < in.v.size(); ++i) in.v[i] = 0.1f * static_cast<float>(i % 5);
  const auto layers = ctpipe::measure_layers(m, loss, in, {0, 1, 1, 0});
  REQUIRE(layers.size() == 2);
  CHECK(layers[0].forward > 0.0);
  CHECK(layers[1].backward_input > 0.0);
  CHECK(layers[0].parameter_bytes == sizeof(float) * (8 * 16 + 16));
  CHECK(layers[1].output_bytes == sizeof(float) * 4 * 2);
  CHECK(layers[1].skip == 0);
  CHECK(layers[1].shares_with == -1);
}

TEST_CASE("gpt: ZB-V on 2 ranks trains bitwise equal to sequential_step, over mixed extents with dropout") {
  constexpr auto schedule = ctpipe::zb_v(2, 4);
  constexpr auto stages = ctpipe::partition<tiny_gpt::model, schedule.stages()>();
  constexpr auto table = ctpipe::make_table<schedule, ctpipe::model_crossings<tiny_gpt::model, stages>()>();
  auto piped = std::make_unique<tiny_gpt::model>(), reference = std::make_unique<tiny_gpt::model>();
  for (auto* m : {piped.get(), reference.get()}) {
    tiny_gpt::init(*m, 5);
    tiny_gpt::set_dropout(*m, 100);
  }
  tiny_gpt::loss loss;
  ctpipe::host_executor<table, tiny_gpt::model, stages, tiny_gpt::loss> exec(*piped, loss);
  std::vector<tiny_gpt::input_type> in(4);
  std::vector<tiny_gpt::target_type> targets(4);
  for (std::size_t mb = 0; mb < 4; ++mb)
    for (std::size_t r = 0; r < tiny_gpt::rows; ++r) {
      in[mb].v[r] = static_cast<std::int32_t>((r * 11 + mb * 5 + 2) % tiny.vocab);
      targets[mb][r] = static_cast<int>((r * 3 + mb * 7) % tiny.vocab);
    }
  const std::vector<int> extents{16, 10, 4, 12};
  std::vector<double> expected(4);
  for (std::uint64_t step = 0; step < 2; ++step) {  // two steps: two dropout masks
    const ctpipe::token_losses got = exec.step(in, targets, extents);
    ctpipe::sequential_step(*reference, loss, std::span<const tiny_gpt::input_type>(in),
                            std::span<const tiny_gpt::target_type>(targets), std::span<const int>(extents),
                            std::span<double>(expected), {.step = step});
    for (std::size_t mb = 0; mb < 4; ++mb) CHECK(got.losses[mb] == expected[mb]);
    const auto a = parameter_spans(*piped, true), b = parameter_spans(*reference, true);
    REQUIRE(a.size() == b.size());
    for (std::size_t k = 0; k < a.size(); ++k) {
      INFO("layer with parameters " << k);
      CHECK(std::memcmp(a[k].data(), b[k].data(), a[k].size_bytes()) == 0);
    }
  }
}
