// A consumer of ctpipe::schedule alone: schedules, proof and figures with no Boost, no threads and
// no intrinsics (its project is configured with Boost hidden: tests/packaging/consumer/run.cmake).
#include <ctpipe/schedules.hpp>

#if defined(BOOST_HANA_CONFIG_HPP) || defined(BOOST_CONFIG_HPP)
#error "ctpipe/schedules.hpp brought in Boost"
#endif
#if defined(_GLIBCXX_THREAD) || defined(_LIBCPP_THREAD)
#error "ctpipe/schedules.hpp brought in <thread>"
#endif
#if defined(_IMMINTRIN_H_INCLUDED) || defined(__IMMINTRIN_H)
#error "ctpipe/schedules.hpp brought in <immintrin.h>"
#endif

constexpr auto table = ctpipe::make_table<ctpipe::one_f_one_b(4, 8)>();
static_assert(ctpipe::check<table>());
static_assert(ctpipe::analyse(table, ctpipe::cost_model{1.0, 2.0}).makespan == 33.0);

int main() { return ctpipe::verify(ctpipe::generate(ctpipe::one_f_one_b(4, 8))).ok() ? 0 : 1; }
