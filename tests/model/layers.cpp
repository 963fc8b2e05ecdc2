// The reference layers that keep saved state (layers/layer_norm.hpp, layers/attention.hpp): their
// gradients against central differences, and their split backward (I, then W) against their full
// backward, bit for bit.
#include <ctpipe/layers/attention.hpp>
#include <ctpipe/layers/layer_norm.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

namespace {

float next_value(std::uint64_t& s) {
  s = s * 6364136223846793005ull + 1442695040888963407ull;
  return static_cast<float>(static_cast<double>(s >> 40) / static_cast<double>(1ull << 24) - 0.5);
}

// L = sum(y * r): dL/dy = r. Checks dL/dx and dL/dw from backward against central differences.
template <class L>
void check_gradients(L layer, std::uint64_t seed) {
  typename L::input_type x;
  typename L::output_type r, y;
  typename L::saved_type s;
  for (auto& v : x.v) v = 2.0f * next_value(seed);
  for (auto& v : r.v) v = next_value(seed);
  auto loss = [&](L& l, const typename L::input_type& in) {
    typename L::output_type out;
    typename L::saved_type st;
    l.forward(in, out, st);
    double sum = 0.0;
    for (std::size_t i = 0; i < out.v.size(); ++i) sum += static_cast<double>(out.v[i]) * r.v[i];
    return sum;
  };
  layer.forward(x, y, s);
  typename L::input_type dx;
  std::fill(layer.grads.begin(), layer.grads.end(), 0.0f);
  layer.backward(x, y, s, r, dx);
  const float h = 1e-2f;
  for (std::size_t i = 0; i < x.v.size(); ++i) {
    auto up = x, down = x;
    up.v[i] += h;
    down.v[i] -= h;
    const double numeric = (loss(layer, up) - loss(layer, down)) / (2.0 * h);
    CHECK(dx.v[i] == doctest::Approx(numeric).epsilon(0.02).scale(1.0));
  }
  for (std::size_t i = 0; i < layer.params.size(); i += 7) {  // every 7th parameter
    L up = layer, down = layer;
    up.params[i] += h;
    down.params[i] -= h;
    const double numeric = (loss(up, x) - loss(down, x)) / (2.0 * h);
    CHECK(layer.grads[i] == doctest::Approx(numeric).epsilon(0.02).scale(1.0));
  }
}

// I then W gives backward's bits: dx, and the weight gradients added to those already there.
template <class L>
void check_split(L layer, std::uint64_t seed) {
  typename L::input_type x;
  typename L::output_type dy, y;
  typename L::saved_type s;
  for (auto& v : x.v) v = next_value(seed);
  for (auto& v : dy.v) v = next_value(seed);
  for (auto& g : layer.grads) g = next_value(seed);  // gradients of earlier microbatches
  layer.forward(x, y, s);
  L full = layer, split = layer;
  typename L::input_type dx_full, dx_split;
  full.backward(x, y, s, dy, dx_full);
  typename L::saved_type kept = s;
  split.backward_input(x, y, kept, dy, dx_split);
  split.backward_weight(x, y, kept, dy);
  CHECK(std::memcmp(&dx_full, &dx_split, sizeof dx_full) == 0);
  CHECK(full.grads == split.grads);
}

}  // namespace

TEST_CASE("layer_norm: gradients match central differences, and I then W equals backward bitwise") {
  ctpipe::layers::layer_norm<3, 8> norm;
  std::uint64_t seed = 5;
  for (auto& p : norm.params) p += 0.3f * next_value(seed);
  check_gradients(norm, 11);
  check_split(norm, 12);
}

TEST_CASE("causal_attention: gradients match central differences, and I then W equals backward bitwise") {
  SUBCASE("one sequence, one head") {
    ctpipe::layers::causal_attention<4, 8> a;
    a.init(3);
    check_gradients(a, 21);
    check_split(a, 22);
  }
  SUBCASE("two sequences of 3 tokens, two heads") {
    ctpipe::layers::causal_attention<6, 8, 3, 2> a;
    a.init(4);
    check_gradients(a, 31);
    check_split(a, 32);
  }
}

TEST_CASE("causal_attention: a token attends to itself and the tokens before it, in its own sequence") {
  ctpipe::layers::causal_attention<6, 4, 3, 2> a;
  a.init(9);
  ctpipe::layers::matrix<6, 4> x, y, y2;
  std::uint64_t seed = 1;
  for (auto& v : x.v) v = next_value(seed);
  decltype(a)::saved_type s;
  a.forward(x, y, s);
  // Changing token 2 of sequence 0 (row 2) changes no earlier row, and nothing of sequence 1.
  auto x2 = x;
  for (std::size_t c = 0; c < 4; ++c) x2(2, c) += 1.0f;
  a.forward(x2, y2, s);
  for (std::size_t r : {0u, 1u, 3u, 4u, 5u})
    for (std::size_t c = 0; c < 4; ++c) CHECK(y2(r, c) == y(r, c));
  // Each probability row sums to 1 over the keys at or before the query.
  for (std::size_t n = 0; n < 2; ++n)
    for (std::size_t h = 0; h < 2; ++h)
      for (std::size_t i = 0; i < 3; ++i) {
        float sum = 0.0f;
        for (std::size_t j = 0; j < 3; ++j) {
          const float p = s.p[((n * 2 + h) * 3 + i) * 3 + j];
          if (j > i) CHECK(p == 0.0f);
          sum += p;
        }
        CHECK(sum == doctest::Approx(1.0f));
      }
}

// ---- rows::tokens: a layer over a microbatch's extent ---------------------------------------
#include <ctpipe/layers/add.hpp>
#include <ctpipe/layers/dense.hpp>
#include <ctpipe/layers/dropout.hpp>
#include <ctpipe/layers/relu.hpp>
#include <ctpipe/model/detail/call.hpp>
#include <ctpipe/model/extent.hpp>
#include <ctpipe/model/tensors.hpp>

#include <limits>

namespace {

// Each part of tensor `t` (a matrix, or ctpipe::tensors of them), as f(part).
template <class T, class F>
void each_matrix(T& t, F&& f) {
  [&]<std::size_t... P>(std::index_sequence<P...>) { (f(ctpipe::part<P>(t)), ...); }
  (std::make_index_sequence<ctpipe::parts_v<std::remove_const_t<T>>>{});
}
template <class T, class U, class F>
void each_matrix_pair(T& a, U& b, F&& f) {
  [&]<std::size_t... P>(std::index_sequence<P...>) { (f(ctpipe::part<P>(a), ctpipe::part<P>(b)), ...); }
  (std::make_index_sequence<ctpipe::parts_v<std::remove_const_t<T>>>{});
}
// Token flavour `t` (capacity rows, rows past E not a number) and fixed flavour `f` of exactly E
// rows take the same first E rows.
template <std::size_t E, class T, class F>
void same_rows(T& t, F& f, std::uint64_t& seed) {
  each_matrix_pair(t, f, [&](auto& a, auto& b) {
    a.v.fill(std::numeric_limits<float>::quiet_NaN());
    for (std::size_t i = 0; i < b.v.size(); ++i) a.v[i] = b.v[i] = next_value(seed);
  });
}
template <std::size_t E, class T, class F>
bool used_rows_equal(const T& t, const F& f) {
  bool same = true;
  each_matrix_pair(t, f, [&](const auto& a, const auto& b) {
    same = same && std::memcmp(a.v.data(), b.v.data(), b.v.size() * sizeof(float)) == 0;
  });
  return same;
}

// A rows::tokens layer T at extent E computes, on its first E rows, the bits its rows::fixed twin F
// of exactly E rows computes, never reading the rows past E (they hold NaN); its split backward
// gives its full backward's bits.
template <std::size_t E, class T, class F>
void check_extent(std::uint64_t seed) {
  T t;
  F f;
  if constexpr (requires { t.params; }) {
    for (auto& p : t.params) p = next_value(seed);
    f.params = t.params;
    t.grads.fill(0.0f);
    f.grads.fill(0.0f);
  }
  ctpipe::context tc{}, fc{};
  tc.extent = static_cast<int>(E);
  const auto t_ctx = [&] { return tc; };
  const auto f_ctx = [&] { return fc; };
  typename T::input_type x{}, dx{};
  typename F::input_type xf{}, dxf{};
  typename T::output_type y{}, dy{};
  typename F::output_type yf{}, dyf{};
  ctpipe::saved_t<T> s{};
  ctpipe::saved_t<F> sf{};
  same_rows<E>(x, xf, seed);
  same_rows<E>(dy, dyf, seed);
  ctpipe::detail::call_forward(t, t_ctx, x, y, s);
  ctpipe::detail::call_forward(f, f_ctx, xf, yf, sf);
  CHECK(used_rows_equal<E>(y, yf));
  T split = t;
  ctpipe::saved_t<T> kept = s;
  typename T::input_type dx_split{};
  ctpipe::detail::call_backward<false>(t, t_ctx, x, y, s, dy, dx);
  ctpipe::detail::call_backward<false>(f, f_ctx, xf, yf, sf, dyf, dxf);
  CHECK(used_rows_equal<E>(dx, dxf));
  if constexpr (requires { t.grads; }) CHECK(t.grads == f.grads);
  if constexpr (ctpipe::splittable_layer<T>) {
    ctpipe::detail::call_backward<true>(split, t_ctx, x, y, kept, dy, dx_split);
    ctpipe::detail::call_backward_weight(split, t_ctx, x, y, kept, dy);
    CHECK(used_rows_equal<E>(dx_split, dxf));
    CHECK(split.grads == t.grads);
  }
}

template <std::size_t E>
void check_every_layer() {
  using ctpipe::layers::activation, ctpipe::layers::rows;
  namespace l = ctpipe::layers;
  constexpr auto tk = rows::tokens;
  check_extent<E, l::dense<5, 8, 6, activation::relu, tk>, l::dense<E, 8, 6>>(1);
  check_extent<E, l::layer_norm<5, 8, tk>, l::layer_norm<E, 8>>(2);
  check_extent<E, l::causal_attention<5, 8, 5, 2, tk>, l::causal_attention<E, 8, E, 2>>(3);
  check_extent<E, l::add<5, 8, tk>, l::add<E, 8>>(4);
  check_extent<E, l::relu<5, 8, tk>, l::relu<E, 8>>(5);
  check_extent<E, l::dropout<5, 8, 300, tk>, l::dropout<E, 8, 300>>(6);
}

}  // namespace

TEST_CASE("rows::tokens layers: over an extent of E tokens, the bits of the layer built for E rows") {
  static_assert(ctpipe::token_major<ctpipe::layers::matrix<5, 8, ctpipe::layers::rows::tokens>>);
  static_assert(!ctpipe::token_major<ctpipe::layers::matrix<5, 8>>);
  check_every_layer<1>();
  check_every_layer<3>();
  check_every_layer<5>();
}

TEST_CASE("rows::tokens softmax cross-entropy: the sum over the extent's tokens, its gradient unscaled") {
  namespace l = ctpipe::layers;
  std::uint64_t seed = 9;
  l::matrix<5, 4, l::rows::tokens> y, dy;
  l::matrix<3, 4> yf, dyf;
  same_rows<3>(y, yf, seed);
  std::array<int, 5> t{1, 3, 0, 2, 2};
  std::array<int, 3> tf{1, 3, 0};
  ctpipe::context c{};
  c.extent = 3;
  const double sum = l::softmax_cross_entropy<5, 4, l::rows::tokens>{}(c, y, t, dy);
  const double mean = l::softmax_cross_entropy<3, 4>{}(yf, tf, dyf);
  CHECK(sum == doctest::Approx(3.0 * mean));
  for (std::size_t i = 0; i < dyf.v.size(); ++i) CHECK(dy.v[i] == doctest::Approx(3.0f * dyf.v[i]));
  CHECK(ctpipe::loss_function<l::softmax_cross_entropy<5, 4, l::rows::tokens>, decltype(y)>);
}

#include <ctpipe/model/sequential.hpp>

#include <stdexcept>

TEST_CASE("softmax cross-entropy: a target that is not a class is refused by name, before anything is written") {
  namespace l = ctpipe::layers;
  SUBCASE("rows::fixed, with and without the context") {
    l::matrix<3, 4> y, dy;
    for (float& v : dy.v) v = 7.0f;
    std::array<int, 3> t{1, 4, 0};
    const l::softmax_cross_entropy<3, 4> loss;
    CHECK_THROWS_WITH_AS(loss(y, t, dy), "ctpipe::layers::softmax_cross_entropy: sample 1: target 4 is not a class (0 to 3)",
                         std::out_of_range);
    t = {1, 2, -1};
    CHECK_THROWS_WITH_AS(loss(ctpipe::context{.microbatch = 6}, y, t, dy),
                         "ctpipe::layers::softmax_cross_entropy: microbatch 6, sample 2: target -1 is not a class (0 to 3)",
                         std::out_of_range);
    for (const float v : dy.v) CHECK(v == 7.0f);  // nothing written
    t = {1, 2, 3};
    CHECK(loss(ctpipe::context{.microbatch = 6}, y, t, dy) == loss(y, t, dy));  // both forms: the same loss
  }
  SUBCASE("rows::tokens: the extent's tokens are checked, and only they") {
    l::matrix<5, 4, l::rows::tokens> y, dy;
    std::array<int, 5> t{1, 3, 0, -7, 99};  // tokens 3 and 4 lie past an extent of 3
    const l::softmax_cross_entropy<5, 4, l::rows::tokens> loss;
    CHECK_NOTHROW((void)loss(ctpipe::context{.microbatch = 2, .extent = 3}, y, t, dy));
    CHECK_THROWS_WITH_AS(loss(ctpipe::context{.microbatch = 2, .extent = 4}, y, t, dy),
                         "ctpipe::layers::softmax_cross_entropy: microbatch 2, token 3: target -7 is not a class (0 to 3)",
                         std::out_of_range);
  }
  SUBCASE("sequential_step and sequential_evaluate name the microbatch, and update no parameter") {
    using net = ctpipe::model<l::dense<2, 3, 4>, l::dense<2, 4, 3, l::activation::none>>;
    using loss_t = l::softmax_cross_entropy<2, 3>;
    net m;
    ctpipe::for_each_layer(m, [s = 1u](auto& layer) mutable { layer.init(s++); });
    const net before = m;
    loss_t loss;
    std::vector<net::input_type> x(3);
    std::vector<loss_t::target_type> t{{0, 1}, {2, 2}, {1, 3}};
    std::vector<double> losses(3);
    CHECK_THROWS_WITH_AS(ctpipe::sequential_step(m, loss, std::span<const net::input_type>(x),
                                                 std::span<const loss_t::target_type>(t), std::span<double>(losses)),
                         "ctpipe::layers::softmax_cross_entropy: microbatch 2, sample 1: target 3 is not a class (0 to 2)",
                         std::out_of_range);
    CHECK(m.layer<0>().params == before.layer<0>().params);
    CHECK(m.layer<1>().params == before.layer<1>().params);
    CHECK_THROWS_WITH_AS(ctpipe::sequential_evaluate(m, loss, std::span<const net::input_type>(x),
                                                     std::span<const loss_t::target_type>(t), std::span<double>(losses)),
                         "ctpipe::layers::softmax_cross_entropy: microbatch 2, sample 1: target 3 is not a class (0 to 2)",
                         std::out_of_range);
  }
}
