// The tables of the dispatch benchmark: 1F1B on one rank, m microbatches, 2m tasks (16 to 4096).
#pragma once
#include <ctpipe/ctpipe.hpp>

#include <utility>

namespace bench {

#ifdef CTPIPE_BENCH_BUILD_ONLY  // CI compiles the same code at the smaller sizes only (bench/CMakeLists.txt)
using dispatch_sizes = std::integer_sequence<int, 8, 32, 128>;
#else
using dispatch_sizes = std::integer_sequence<int, 8, 32, 128, 512, 2048>;
#endif

template <int M>
constexpr auto dispatch_table = ctpipe::make_table<ctpipe::one_f_one_b(1, M)>();

}  // namespace bench
