// Arithmetic that rounds every operation once, to the nearest, and never fuses a product into a
// sum: the same bits on the host and in a CUDA kernel. nvcc contracts `a * b + c` into a fused
// multiply-add by default (--fmad=true), which rounds once where the host rounds twice; the
// device's intrinsics `__fmul_rn`, `__fadd_rn`, ... are never contracted. An optimizer rule's
// element function (optim/rules.hpp) is written with these, so that its kernel and its host loop
// agree to the bit. Float and double; sqrt and division are correctly rounded on both sides (the
// device's defaults, -prec-div and -prec-sqrt, which --use_fast_math turns off: do not build a
// rule's kernel with it).
//
// On the host, these are the plain operators: a host compiler contracts only where it is allowed
// to and the target has FMA (g++ -march=native, whose -ffp-contract=fast is the default in GNU
// mode). ctpipe's builds do neither; a program that does gets host results that may differ from
// the device's in the last bit.
#pragma once

#include <cmath>

#include <ctpipe/config.hpp>  // CTPIPE_HOST_DEVICE

namespace ctpipe::rn {

CTPIPE_HOST_DEVICE inline float add(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
CTPIPE_HOST_DEVICE inline double add(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dadd_rn(a, b);
#else
  return a + b;
#endif
}
CTPIPE_HOST_DEVICE inline float sub(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}
CTPIPE_HOST_DEVICE inline double sub(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dsub_rn(a, b);
#else
  return a - b;
#endif
}
CTPIPE_HOST_DEVICE inline float mul(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
CTPIPE_HOST_DEVICE inline double mul(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}
CTPIPE_HOST_DEVICE inline float div(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}
CTPIPE_HOST_DEVICE inline double div(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __ddiv_rn(a, b);
#else
  return a / b;
#endif
}
CTPIPE_HOST_DEVICE inline float sqrt(float a) {
#if defined(__CUDA_ARCH__)
  return __fsqrt_rn(a);
#else
  return std::sqrt(a);
#endif
}
CTPIPE_HOST_DEVICE inline double sqrt(double a) {
#if defined(__CUDA_ARCH__)
  return __dsqrt_rn(a);
#else
  return std::sqrt(a);
#endif
}

}  // namespace ctpipe::rn
