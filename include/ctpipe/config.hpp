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
