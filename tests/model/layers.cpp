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
