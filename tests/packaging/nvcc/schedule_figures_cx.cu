// The compile-time figures test (static_asserts, and its run-time test case) compiled by nvcc: the
// constexpr part of ctpipe as a CUDA user's translation unit sees it.
#include "../../schedule/figures_cx.cpp"
