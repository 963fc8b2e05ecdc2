// model/context.hpp: the counter-based random stream (Philox4x32-10 against its published answers)
// and the context a layer gets; layers/dropout.hpp draws from it.
#include <ctpipe/layers/dropout.hpp>
#include <ctpipe/model/context.hpp>

#include <doctest/doctest.h>

namespace {

using block = ctpipe::counter_random::block;
// The known answers of Philox4x32 with 10 rounds (Random123's test vectors).
static_assert(ctpipe::counter_random::generate({0, 0, 0, 0}, {0, 0}) ==
              block{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8});
static_assert(ctpipe::counter_random::generate({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
                                               {0xffffffff, 0xffffffff}) ==
              block{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd});
static_assert(ctpipe::counter_random::generate({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
                                               {0xa4093822, 0x299f31d0}) ==
              block{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1});

// A stream walks the counter: four numbers a block, the next block from the next counter.
constexpr bool walks_counter() {
  ctpipe::counter_random r({3, 4}, {0, 5, 6, 7});
  const block b0 = ctpipe::counter_random::generate({0, 5, 6, 7}, {3, 4});
  const block b1 = ctpipe::counter_random::generate({1, 5, 6, 7}, {3, 4});
  for (int i = 0; i < 4; ++i)
    if (r.next() != b0[static_cast<std::size_t>(i)]) return false;
  return r.next() == b1[0];
}
static_assert(walks_counter());

// The stream of a context depends on step, microbatch, layer and stream, not on rank, stage or op.
constexpr std::uint32_t first(const ctpipe::context& c, std::uint32_t stream = 0) { return c.random(stream).next(); }
constexpr ctpipe::context base{
    .rank = 0, .stage = 0, .layer = 3, .microbatch = 5, .op = ctpipe::op_kind::forward, .step = 9};
constexpr ctpipe::context elsewhere{
    .rank = 2, .stage = 6, .layer = 3, .microbatch = 5, .op = ctpipe::op_kind::backward_weight, .step = 9};
static_assert(first(base) == first(elsewhere));
static_assert(first(base) != first({.layer = 4, .microbatch = 5, .step = 9}));
static_assert(first(base) != first({.layer = 3, .microbatch = 6, .step = 9}));
static_assert(first(base) != first({.layer = 3, .microbatch = 5, .step = 10}));
static_assert(first(base) != first({.layer = 3, .microbatch = 5, .step = 9 + (std::uint64_t{1} << 32)}));
static_assert(first(base) != first(base, 1));

// at(i): random access into a stream, as a kernel's thread i draws: the i-th number next() gives,
// whatever has been drawn since; the stream of counter_random::of is ctpipe::context::random's and
// ctpipe::cuda::context::random's.
constexpr bool at_is_next() {
  ctpipe::counter_random walk = ctpipe::counter_random::of(3, 5, 9, 2);
  const ctpipe::counter_random fresh = walk;
  for (std::uint64_t i = 0; i < 11; ++i)
    if (walk.next() != fresh.at(i) || walk.at(i) != fresh.at(i)) return false;
  return ctpipe::counter_random::to_uniform(fresh.at(6)) == [] {
    auto r = ctpipe::counter_random::of(3, 5, 9, 2);
    for (int i = 0; i < 6; ++i) r.next();
    return r.uniform();
  }();
}
static_assert(at_is_next());
static_assert(first(base, 2) == ctpipe::counter_random::of(3, 5, 9, 2).at(0));

}  // namespace

TEST_CASE("context: uniform numbers u satisfy 0 <= u < 1 and average one half") {
  ctpipe::counter_random r({1, 2}, {0, 0, 0, 0});
  double sum = 0.0;
  for (int i = 0; i < 100000; ++i) {
    const float u = r.uniform();
    REQUIRE(u >= 0.0f);
    REQUIRE(u < 1.0f);
    sum += u;
  }
  CHECK(sum / 100000.0 == doctest::Approx(0.5).epsilon(0.01));
}

TEST_CASE("dropout: drops its share, scales the rest, and its backward drops the forward's elements") {
  using drop = ctpipe::layers::dropout<16, 64, 250>;
  drop d;
  drop::input_type ones, y, y_again, y_next_step, dx;
  ones.v.fill(1.0f);
  const ctpipe::context c{.layer = 2, .microbatch = 7, .step = 3};
  d.forward(c, ones, y);
  int zeros = 0;
  for (float v : y.v) {
    CHECK((v == 0.0f || v == 1000.0f / 750.0f));
    zeros += v == 0.0f;
  }
  CHECK(zeros > 16 * 64 * 20 / 100);  // 25% expected of 1,024
  CHECK(zeros < 16 * 64 * 30 / 100);
  // The same context draws the same mask (a recomputed forward, another rank); the backward too.
  d.forward(
      ctpipe::context{.rank = 1, .stage = 3, .layer = 2, .microbatch = 7, .op = ctpipe::op_kind::backward, .step = 3},
      ones, y_again);
  CHECK(y_again == y);
  d.backward(c, ones, y, ones, dx);
  CHECK(dx == y);
  // Another step, another mask.
  d.forward(ctpipe::context{.layer = 2, .microbatch = 7, .step = 4}, ones, y_next_step);
  CHECK(!(y_next_step == y));
}

TEST_CASE("dropout: in a forward-only pass (context::training false) it passes its input through") {
  using drop = ctpipe::layers::dropout<16, 64, 250>;
  drop d;
  drop::input_type x, y;
  for (std::size_t i = 0; i < x.v.size(); ++i) x.v[i] = static_cast<float>(i) * 0.5f - 3.0f;
  d.forward(ctpipe::context{.layer = 2, .microbatch = 7, .step = 3, .training = false}, x, y);
  CHECK(y == x);
  d.forward(ctpipe::context{.layer = 2, .microbatch = 7, .step = 3}, x, y);  // training: drops
  CHECK(!(y == x));
}

TEST_CASE("dropout: the rate is the run's to set, at 0 it copies, and a rate of 1000 or more is refused") {
  using drop = ctpipe::layers::dropout<16, 64, 250>;
  drop d;
  drop::input_type x, y, dx;
  for (std::size_t i = 0; i < x.v.size(); ++i) x.v[i] = static_cast<float>(i) * 0.5f - 3.0f;
  const ctpipe::context c{.layer = 2, .microbatch = 7, .step = 3};
  d.per_mille = 0;
  d.forward(c, x, y);
  CHECK(y == x);
  d.backward(c, x, y, x, dx);
  CHECK(dx == x);
  d.per_mille = 500;  // half: more zeros than at 250
  d.forward(c, x, y);
  int zeros = 0;
  for (float v : y.v) zeros += v == 0.0f;
  CHECK(zeros > 16 * 64 * 45 / 100);
  CHECK(zeros < 16 * 64 * 55 / 100);
  d.per_mille = 1000;
  CHECK_THROWS_WITH_AS(d.forward(c, x, y), doctest::Contains("a rate is below 1000 thousandths"),
                       std::invalid_argument);
}
