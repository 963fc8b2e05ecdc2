// Compiler detection and named workarounds live here and nowhere else.
#pragma once

#include <ctpipe/version.hpp>

#if __cplusplus < 202002L && !defined(_MSVC_LANG)
#error "ctpipe needs C++20 (-std=c++20 or later)"
#endif

// Execution-space macro: reduces to nothing without CUDA so host code never needs CUDA headers.
#if defined(__CUDACC__)
#define CTPIPE_HOST_DEVICE __host__ __device__
#else
#define CTPIPE_HOST_DEVICE
#endif

// Keeps a function out of line (the executors' blocks of unrolled tasks).
#if defined(__GNUC__) || defined(__clang__)
#define CTPIPE_NOINLINE __attribute__((noinline))
#elif defined(_MSC_VER)
#define CTPIPE_NOINLINE __declspec(noinline)
#else
#define CTPIPE_NOINLINE
#endif
