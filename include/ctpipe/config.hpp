// Compiler detection and named workarounds live here and nowhere else.
#pragma once

#include <type_traits>  // std::remove_cvref_t, for CTPIPE_NTTP_TYPE

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

// A function of a rare path (a failure, a report, a set-up), kept out of line and compiled for
// size: a program's compile spends less on it, and its hot code stays compact.
#if defined(__GNUC__) || defined(__clang__)
#define CTPIPE_COLD __attribute__((cold, noinline))
#else
#define CTPIPE_COLD
#endif

// Marks a point the program never reaches (the index switch's impossible cases).
#if defined(__GNUC__) || defined(__clang__)
#define CTPIPE_UNREACHABLE() __builtin_unreachable()
#elif defined(_MSC_VER)
#define CTPIPE_UNREACHABLE() __assume(0)
#else
#define CTPIPE_UNREACHABLE() ((void)0)
#endif

// Tells the core a thread is spinning (the host executor's waits): x86's pause, nothing elsewhere.
// The compiler's builtin, not <immintrin.h>: every header includes this one, and the schedule
// layer stays free of intrinsics headers (tests/packaging/consumer checks it).
#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#define CTPIPE_CPU_RELAX() __builtin_ia32_pause()
#else
#define CTPIPE_CPU_RELAX() ((void)0)
#endif

// CTPIPE_TSAN: 1 in a ThreadSanitizer build. TSan does not model standalone fences (g++ refuses
// them under -fsanitize=thread), so such a build wakes the host executor's threads through
// read-modify-writes alone.
#if defined(__SANITIZE_THREAD__)
#define CTPIPE_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define CTPIPE_TSAN 1
#endif
#endif
#ifndef CTPIPE_TSAN
#define CTPIPE_TSAN 0
#endif

// ---- Named compiler workarounds -----------------------------------------------------------------

// CTPIPE_WORKAROUND_NVCC_NTTP_DECLTYPE: nvcc's front end (cudafe++, CUDA 13.0) gives decltype(P) of
// a class-type template parameter P as `const T&`, so `decltype(P)::member` fails ("'static_ranks'
// is not a member of 'const ctpipe::task_table<4, 4, 16>&'"). ctpipe names the type of such a
// parameter through CTPIPE_NTTP_TYPE(P), which strips the reference on every compiler.
#if defined(__CUDACC__) && !defined(__clang__)
#define CTPIPE_WORKAROUND_NVCC_NTTP_DECLTYPE 1
#else
#define CTPIPE_WORKAROUND_NVCC_NTTP_DECLTYPE 0
#endif
#define CTPIPE_NTTP_TYPE(P) std::remove_cvref_t<decltype(P)>

// No macro, a rule: nvcc 13's front end mistranslates a using-declaration that names several
// dependent types at once (`using typename B::x, typename B::y;`: "'__T13' was not declared"
// further on), so ctpipe's headers declare such types one alias at a time.
