// ctpipe::optimizer and its rules: the per-tensor view of a layer's parameters, the rules'
// arithmetic (SGD, SGD with momentum, Adam, AdamW) against their definitions, global clipping,
// the step skipped on a non-finite gradient, a shared parameter counted once, the per-layer form
// the asynchronous executor calls, and a model split across places. (Every executor trains with
// an optimizer in its numerics sweep: tests/support/numerics.hpp and the others.)
#include "support/mlp.hpp"  // test::parameters, and ctpipe with its reference layers

#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <vector>

namespace {

using ctpipe::layers::activation;
using ctpipe::layers::dense;
using tiny = ctpipe::model<dense<1, 3, 2>, ctpipe::layers::relu<1, 2>, ctpipe::layers::layer_norm<1, 2>,
                           dense<1, 2, 2, activation::none>>;

// A layer with parameters that does not name its tensors.
struct plain {
  using input_type = ctpipe::layers::matrix<1, 2>;
  using output_type = input_type;
  static constexpr double cost = 1;
  std::array<float, 5> w{}, g{};
  std::span<float> parameters() { return w; }
  std::span<float> gradients() { return g; }
  void forward(const input_type& x, output_type& y) const { y = x; }
  void backward(const input_type&, const output_type&, const output_type& dy, input_type& dx) const { dx = dy; }
};
static_assert(ctpipe::layer<plain>);
// One whose tensors do not cover its parameters.
struct short_tensors : plain {
  static constexpr std::array parameter_tensors{ctpipe::parameter_tensor{"a", {2, 2}}};
};

template <class M>
void fill_gradients(M& m, float v) {
  ctpipe::for_each_parameter(m, [&](auto, auto g) {
    for (float& x : g) x = v;
  });
}
template <class M>
std::size_t parameter_count(M& m) {
  std::size_t n = 0;
  ctpipe::for_each_parameter(m, [&](auto p, auto) { n += p.size(); });
  return n;
}

}  // namespace

static_assert(ctpipe::declares_parameter_tensors<dense<1, 3, 2>>);
static_assert(!ctpipe::declares_parameter_tensors<plain>);
static_assert(dense<1, 3, 2>::parameter_tensors[0].size() == 6 && dense<1, 3, 2>::parameter_tensors[0].dims == 2);
static_assert(ctpipe::optimizer_rule<ctpipe::adam, float> && ctpipe::optimizer_rule<ctpipe::sgd_momentum, double>);
static_assert(ctpipe::optimizer_rule<ctpipe::sgd, float> && ctpipe::state_count_v<ctpipe::adamw> == 2);
static_assert(!ctpipe::optimizer_rule<int, float>);
// The built-in rules have an element form (the device optimizer's); a span-only rule does not.
static_assert(ctpipe::element_rule<ctpipe::sgd, float> && ctpipe::element_rule<ctpipe::sgd_momentum, double> &&
              ctpipe::element_rule<ctpipe::adam, float> && ctpipe::element_rule<ctpipe::adamw, double>);
struct span_only {
  static constexpr std::array<std::string_view, 0> state_names{};
  template <class T>
  void operator()(const ctpipe::update_info&, std::span<T>, std::span<const T>) const {}
};
static_assert(ctpipe::optimizer_rule<span_only, float> && !ctpipe::element_rule<span_only, float>);
static_assert(ctpipe::detail::norm_scratch(0) == 0 && ctpipe::detail::norm_scratch(1024) == 1 &&
              ctpipe::detail::norm_scratch(1025) == 3 && ctpipe::detail::norm_scratch(1024 * 1024 + 1) == 1025 + 2 + 1);

TEST_CASE("parameter tensors: named and shaped where a layer says, one flat tensor where it does not") {
  dense<1, 3, 2> d;
  const auto s = ctpipe::tensor_slices(d, 4);
  REQUIRE(s.size() == 2);
  CHECK(s[0].tensor.name == "weight");
  CHECK((s[0].tensor.dims == 2 && s[0].tensor.shape[0] == 2 && s[0].tensor.shape[1] == 3));
  CHECK((s[0].offset == 0 && s[1].offset == 6 && s[1].size() == 2));
  CHECK(s[1].tensor.name == "bias");
  plain p;
  const auto q = ctpipe::tensor_slices(p, 0);
  REQUIRE(q.size() == 1);
  CHECK((q[0].tensor.name == "parameters" && q[0].size() == 5 && q[0].tensor.dims == 1));
  short_tensors bad;
  CHECK_THROWS_WITH_AS(ctpipe::tensor_slices(bad, 3),
                       "ctpipe: layer 3's parameter_tensors hold 4 values, its parameters() 5", std::invalid_argument);
  ctpipe::layers::relu<1, 2> r;
  CHECK(ctpipe::tensor_slices(r, 1).empty());
}

TEST_CASE("rules: SGD, SGD with momentum, Adam and AdamW follow their definitions") {
  std::vector<float> w0{0.5f, -1.0f, 2.0f}, g0{0.25f, -0.5f, 1.0f};
  SUBCASE("sgd with weight decay") {
    std::vector<float> w = w0;
    ctpipe::sgd{.lr = 0.1, .weight_decay = 0.01}(ctpipe::update_info{}, std::span<float>(w),
                                                 std::span<const float>(g0));
    for (std::size_t i = 0; i < w.size(); ++i) CHECK(w[i] == w0[i] - 0.1f * (g0[i] + 0.01f * w0[i]));
  }
  SUBCASE("momentum: the buffer starts as the gradient, then decays") {
    std::vector<float> w = w0, b(3, 99.0f);
    const ctpipe::sgd_momentum r{.lr = 0.1, .momentum = 0.9};
    r({0, "t", 1}, std::span<float>(w), std::span<const float>(g0), std::span<float>(b));
    for (std::size_t i = 0; i < 3; ++i) CHECK((b[i] == g0[i] && w[i] == w0[i] - 0.1f * g0[i]));
    const std::vector<float> w1 = w;
    r({0, "t", 2}, std::span<float>(w), std::span<const float>(g0), std::span<float>(b));
    for (std::size_t i = 0; i < 3; ++i) {
      CHECK(b[i] == 0.9f * g0[i] + 1.0f * g0[i]);
      CHECK(w[i] == w1[i] - 0.1f * b[i]);
    }
  }
  SUBCASE("adam and adamw against a double-precision evaluation of the definition") {
    for (const bool decoupled : {false, true}) {
      std::vector<float> w = w0, m(3, 0.0f), v(3, 0.0f);
      std::vector<double> wd(w0.begin(), w0.end()), md(3, 0.0), vd(3, 0.0);
      const double lr = 0.01, b1 = 0.9, b2 = 0.999, eps = 1e-8, decay = 0.1;
      for (std::uint64_t t = 1; t <= 3; ++t) {
        if (decoupled)
          ctpipe::adamw{.lr = lr, .weight_decay = decay}({0, "t", t}, std::span<float>(w), std::span<const float>(g0),
                                                         std::span<float>(m), std::span<float>(v));
        else
          ctpipe::adam{.lr = lr, .weight_decay = decay}({0, "t", t}, std::span<float>(w), std::span<const float>(g0),
                                                        std::span<float>(m), std::span<float>(v));
        for (std::size_t i = 0; i < 3; ++i) {
          double g = g0[i];
          if (decoupled)
            wd[i] *= 1 - lr * decay;
          else
            g += decay * wd[i];
          md[i] = b1 * md[i] + (1 - b1) * g;
          vd[i] = b2 * vd[i] + (1 - b2) * g * g;
          const double mhat = md[i] / (1 - std::pow(b1, double(t))), vhat = vd[i] / (1 - std::pow(b2, double(t)));
          wd[i] -= lr * mhat / (std::sqrt(vhat) + eps);
        }
      }
      for (std::size_t i = 0; i < 3; ++i) CHECK(w[i] == doctest::Approx(wd[i]).epsilon(1e-5));
    }
  }
}

TEST_CASE("the norm's order: blocks of 1,024 squares in eight lanes, then their sums likewise, a shared part out") {
  // Written here from the definition, one block at a time; square_term reads whole blocks through
  // a pointer and must give the same bits, around a skipped part that falls inside a block.
  std::vector<float> g(40'000);
  for (std::size_t i = 0; i < g.size(); ++i) g[i] = 1e-3f * static_cast<float>((i * 7919) % 2003) - 0.9f;
  for (const auto& skip : {std::pair<std::size_t, std::size_t>{0, 0}, {5'000, 7'500}, {39'000, 40'000}}) {
    const std::size_t from = skip.first, to = skip.second;  // (not a structured binding: clang 14 cannot capture one)
    CAPTURE(from);
    std::vector<double> counted;
    for (std::size_t i = 0; i < g.size(); ++i)
      if (i < from || i >= to) counted.push_back(static_cast<double>(g[i]));
    const auto blocks = [](const std::vector<double>& v) {
      std::vector<double> sums;
      for (std::size_t b = 0; b * 1024 < v.size(); ++b) {
        double lane[8] = {};
        for (std::size_t j = b * 1024; j < std::min(v.size(), (b + 1) * 1024); ++j) lane[j % 8] += v[j];
        double s = lane[0];
        for (int k = 1; k < 8; ++k) s += lane[k];
        sums.push_back(s);
      }
      return sums;
    };
    for (double& x : counted) x *= x;
    std::vector<double> level = blocks(counted);
    while (level.size() > 1) level = blocks(level);
    const ctpipe::detail::counted_range c{g.size(), from, to};
    std::vector<double> scratch(ctpipe::detail::norm_scratch(c.count()));
    const double got = ctpipe::detail::square_term(g.data(), c, scratch.data());
    CHECK(std::memcmp(&got, &level[0], sizeof got) == 0);
  }
}

TEST_CASE("optimizer: state per tensor, allocated at construction, and the norm of every layer in order") {
  tiny m;
  ctpipe::for_each_layer(m, [s = 1u](auto& l) mutable {
    if constexpr (requires { l.init(s); }) l.init(s++);
  });
  ctpipe::optimizer opt(m, ctpipe::adam{.lr = 0.01}, {.max_norm = 0.0, .skip_nonfinite = true});
  CHECK(opt.tensors<0>().size() == 2);
  CHECK(opt.tensors<1>().empty());
  CHECK(opt.tensors<2>()[0].tensor.name == "weight");
  CHECK(opt.state<3>(1, 1).size() == 2);
  fill_gradients(m, 0.5f);
  const double expected = std::sqrt(0.25 * static_cast<double>(parameter_count(m)));
  const ctpipe::update_result r = opt.step();
  CHECK(r.applied);
  CHECK(r.norm == doctest::Approx(expected));
  CHECK(r.scale == 1.0);
  CHECK(opt.updates() == 1);
  CHECK(opt.layer_updates(0) == 1);
  CHECK(opt.layer_updates(1) == 0);
  for (const float x : opt.state<0>(0, 0)) CHECK(x == 0.1f * 0.5f);  // exp_avg after one update
}

TEST_CASE("optimizer: clipping scales every gradient by max_norm / (norm + 1e-6) where the norm exceeds it") {
  tiny m;
  const std::vector<float> before = test::parameters(m);
  SUBCASE("triggers") {
    ctpipe::optimizer opt(m, ctpipe::sgd{.lr = 1.0}, {.max_norm = 1.0});
    fill_gradients(m, 1.0f);
    const double norm = std::sqrt(static_cast<double>(parameter_count(m)));
    const ctpipe::update_result r = opt.step();
    CHECK(r.norm == norm);
    CHECK(r.scale == 1.0 / (norm + 1e-6));
    const float g = 1.0f * static_cast<float>(r.scale);
    CHECK(m.layer<0>().grads[0] == g);
    const std::vector<float> after = test::parameters(m);
    for (std::size_t i = 0; i < after.size(); ++i) CHECK(after[i] == before[i] - g);
  }
  SUBCASE("does not trigger below max_norm: the gradients are untouched") {
    ctpipe::optimizer opt(m, ctpipe::sgd{.lr = 1.0}, {.max_norm = 100.0});
    fill_gradients(m, 0.25f);
    const ctpipe::update_result r = opt.step();
    CHECK((r.applied && r.scale == 1.0));
    CHECK(m.layer<3>().grads[1] == 0.25f);
  }
  SUBCASE("neither asked: no norm") {
    ctpipe::optimizer opt(m, ctpipe::sgd{.lr = 1.0}, {.skip_nonfinite = false});
    fill_gradients(m, 0.25f);
    CHECK(opt.step().norm == 0.0);
  }
}

TEST_CASE("optimizer: a NaN or an infinity in any gradient skips the step, and nothing changes") {
  tiny m;
  ctpipe::for_each_layer(m, [s = 1u](auto& l) mutable {
    if constexpr (requires { l.init(s); }) l.init(s++);
  });
  ctpipe::optimizer opt(m, ctpipe::adamw{.lr = 0.01}, {.max_norm = 1.0});
  fill_gradients(m, 0.5f);
  REQUIRE(opt.step().applied);
  const std::vector<float> w = test::parameters(m);
  const std::vector<float> state(opt.state<0>(0, 1).begin(), opt.state<0>(0, 1).end());
  for (const float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    fill_gradients(m, 0.5f);
    m.layer<3>().grads[1] = bad;
    const ctpipe::update_result r = opt.step();
    CHECK_FALSE(r.applied);
    CHECK_FALSE(std::isfinite(r.norm));
    const std::vector<float> after = test::parameters(m);
    CHECK(std::memcmp(after.data(), w.data(), w.size() * sizeof(float)) == 0);
    CHECK(std::memcmp(state.data(), opt.state<0>(0, 1).data(), state.size() * sizeof(float)) == 0);
    CHECK(opt.updates() == 1);
    CHECK(opt.layer_updates(3) == 1);
  }
  fill_gradients(m, 0.5f);
  CHECK(opt.step().applied);
  CHECK(opt.layer_updates(0) == 2);
}

TEST_CASE("optimizer: a shared parameter counts once in the norm, and each member keeps its copy's state") {
  using tied = ctpipe::model<dense<1, 2, 2>, dense<1, 2, 2>, ctpipe::shared_with<0, dense<1, 2, 2>>>;
  tied m;
  ctpipe::tie_parameters(m);
  ctpipe::optimizer opt(m, ctpipe::sgd_momentum{.lr = 0.1}, {.max_norm = 1e9});
  fill_gradients(m, 1.0f);
  // 6 + 6 + the last member's bias (2): its weights are layer 0's
  CHECK(opt.step().norm == std::sqrt(14.0));
  CHECK(std::memcmp(m.layer<0>().params.data(), m.layer<2>().params.data(), 4 * sizeof(float)) == 0);
}

TEST_CASE("optimizer: opt(layer, parameters, gradients) updates one layer with its own state and count") {
  tiny m;
  ctpipe::optimizer opt(m, ctpipe::adam{.lr = 0.01});
  std::array<float, 8> w{}, g{};
  g.fill(1.0f);
  opt(0, std::span<float>(w), std::span<const float>(g));
  opt(0, std::span<float>(w), std::span<const float>(g));
  CHECK(opt.layer_updates(0) == 2);
  CHECK(opt.layer_updates(3) == 0);
  CHECK(opt.updates() == 0);
  CHECK(w[0] == doctest::Approx(-0.02).epsilon(1e-4));
  std::array<float, 3> wrong{};
  CHECK_THROWS_WITH_AS(opt(0, std::span<float>(wrong), std::span<const float>(wrong)),
                       "ctpipe::optimizer: layer 0 has 8 parameters, not 3", std::invalid_argument);
  CHECK_THROWS_AS(opt(9, std::span<float>(w), std::span<const float>(g)), std::invalid_argument);
}

namespace {
// Two places of one model, as two processes would hold it: this one updates layers 0 and 1, the
// other layers 2 and 3; the sum adds what the other place counts (its terms, computed apart).
struct half_place {
  bool first = true;
  std::vector<double> other;  // the other place's terms, as an all-reduce would bring them
  mutable int sums = 0;
  bool updates_layer(std::size_t k) const { return first == (k < 2); }
  bool counts_layer(std::size_t k) const { return updates_layer(k); }
  bool leads() const { return first; }
  void sum_norm_terms(std::span<double> t) const {
    ++sums;
    for (std::size_t i = 0; i < t.size(); ++i) t[i] += other[i];
  }
};
}  // namespace

TEST_CASE("optimizer: a model split across places updates only its layers, with the norm of all") {
  tiny whole, mine;
  fill_gradients(whole, 0.5f);
  fill_gradients(mine, 0.5f);
  ctpipe::optimizer all(whole, ctpipe::sgd{.lr = 1.0}, {.max_norm = 1.0});
  half_place place{true, std::vector<double>(tiny::size + 1, 0.0)};  // (the last: a non-finite flag)
  place.other[2] = 4 * 0.25;                                         // layer 2's squares: 4 values of 0.5
  place.other[3] = 6 * 0.25;                                         // layer 3's: 6
  ctpipe::optimizer part(mine, place, ctpipe::sgd{.lr = 1.0}, {.max_norm = 1.0});
  CHECK(part.holds(0));
  CHECK_FALSE(part.holds(2));
  CHECK(part.state<2>(0, 0).empty());
  const ctpipe::update_result a = all.step(), b = part.step();
  CHECK(place.sums == 1);
  CHECK(a.norm == b.norm);
  CHECK(a.scale == b.scale);
  CHECK(mine.layer<0>().params == whole.layer<0>().params);
  CHECK(mine.layer<3>().params != whole.layer<3>().params);  // not this place's: untouched
  CHECK(mine.layer<3>().params[0] == 0.0f);
}

TEST_CASE("optimizer: step(gradient_scale) scales the gradients before the norm and the update, as by hand") {
  using net = ctpipe::model<dense<2, 3, 4>, dense<2, 4, 2, activation::none>>;
  net by_hand, scaled;
  ctpipe::for_each_layer(by_hand, [seed = 1u](auto& l) mutable { l.init(seed++); });
  scaled = by_hand;
  float v = 0.37f;
  const auto fill = [&](net& m) {
    v = 0.37f;
    ctpipe::for_each_parameter(m, [&](std::span<float>, std::span<float> g) {
      for (float& x : g) x = (v = v * 1.7f - static_cast<float>(static_cast<int>(v * 1.7f))) - 0.5f;
    });
  };
  fill(by_hand);
  fill(scaled);
  const double s = 1.0 / 48.0;  // a per-token mean over 48 tokens
  ctpipe::for_each_parameter(by_hand, [&](std::span<float>, std::span<float> g) {
    for (float& x : g) x *= static_cast<float>(s);
  });
  ctpipe::optimizer a(by_hand, ctpipe::adamw{.lr = 1e-2}, {.max_norm = 0.01});
  ctpipe::optimizer b(scaled, ctpipe::adamw{.lr = 1e-2}, {.max_norm = 0.01});
  const auto ra = a.step();
  const auto rb = b.step(s);
  CHECK(ra.norm == rb.norm);
  CHECK(ra.scale == rb.scale);
  CHECK(ra.norm > 0.01);  // the scaled norm (about 0.03) still exceeds max_norm: clipped after the scale
  CHECK(ra.scale < 1.0);
  CHECK(test::parameters(by_hand) == test::parameters(scaled));
}

TEST_CASE("bf16: round to the nearest, ties to even, as CUDA's __float2bfloat16_rn, read back exactly") {
  const auto bits = [](float x) { return ctpipe::bf16(x).bits; };
  CHECK(bits(1.0f) == 0x3f80);
  CHECK(bits(-2.0f) == 0xc000);
  CHECK(bits(1.0f / 3.0f) == 0x3eab);                        // 0x3eaaaaab: above the half, up
  CHECK(bits(std::bit_cast<float>(0x3f808000u)) == 0x3f80);  // a tie, to the even 0x3f80
  CHECK(bits(std::bit_cast<float>(0x3f818000u)) == 0x3f82);  // a tie, to the even 0x3f82
  CHECK(bits(std::bit_cast<float>(0x3f807fffu)) == 0x3f80);  // below the half
  CHECK(bits(std::numeric_limits<float>::infinity()) == 0x7f80);
  CHECK(bits(std::numeric_limits<float>::max()) == 0x7f80);  // rounds past the largest bf16: infinity
  CHECK(bits(std::bit_cast<float>(0x00010000u)) == 0x0001);  // the smallest subnormal, kept
  const ctpipe::bf16 nan(std::numeric_limits<float>::quiet_NaN());
  CHECK(std::isnan(static_cast<float>(nan)));
  CHECK(std::isnan(
      static_cast<float>(ctpipe::bf16(std::bit_cast<float>(0x7f800001u)))));  // a NaN that would round to inf
  for (const float x : {0.0f, -0.0f, 1.5f, -3.25f, 1e-20f, 3e38f}) {
    const ctpipe::bf16 h(x);
    CHECK(ctpipe::bf16(static_cast<float>(h)) == h);  // a bf16 read back and rounded again is itself
  }
}

TEST_CASE("optimizer: a layer computing with a bf16 copy updates its float master and rewrites the copy") {
  using layer = test::mixed<dense<1, 3, 2, activation::none>>;
  ctpipe::model<layer> m;
  m.layer<0>().init(5);
  auto& l = m.layer<0>();
  for (std::size_t i = 0; i < l.size; ++i)
    CHECK(static_cast<float>(l.copy[i]) == static_cast<float>(ctpipe::bf16(l.master[i])));
  ctpipe::optimizer opt(m, ctpipe::sgd{.lr = 1e-3}, {.max_norm = 0.0, .skip_nonfinite = true});
  const std::array<float, layer::size> before = l.master;
  for (float& g : l.gradients()) g = 0.5f;
  CHECK(opt.step().applied);
  for (std::size_t i = 0; i < l.size; ++i) {
    CHECK(l.master[i] == before[i] - 1e-3f * 0.5f);  // the float master moved
    CHECK(l.copy[i] == ctpipe::bf16(l.master[i]));   // and the copy follows it
  }
  l.gradients()[0] = std::numeric_limits<float>::quiet_NaN();  // a skipped step leaves both
  const auto master = l.master;
  const auto copy = l.copy;
  CHECK_FALSE(opt.step().applied);
  CHECK(l.master == master);
  CHECK(l.copy == copy);
}
