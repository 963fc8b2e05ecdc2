// ix(i): an index or a count (int, mostly: ranks, stages, microbatches, positions are ints in the
// task IR) as the std::size_t that std::array, spans and buffers take. One spelling for the
// conversion in the executors and formats; a floating-point argument does not compile.
//
// Not in code that walks whole tables in constant evaluation (schedule, analysis, the execution and
// issue plans, the slot allocator): there every call is evaluation steps against clang's
// -fconstexpr-steps budget, and ix() pushed the 12,032-task budget test (tests/schedule/budget_cx.cpp) over
// clang 14's default limit. Those keep static_cast<std::size_t>.
#pragma once

#include <cstddef>
#include <type_traits>

#include <ctpipe/config.hpp>  // CTPIPE_HOST_DEVICE

namespace ctpipe::detail {

template <class T>
requires(std::is_integral_v<T> || std::is_enum_v<T>) CTPIPE_HOST_DEVICE constexpr std::size_t ix(T i) noexcept {
  return static_cast<std::size_t>(i);
}

}  // namespace ctpipe::detail
