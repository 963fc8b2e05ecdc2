// The one place the transformer layers call a BLAS: row-major single-precision matrix products
// through CBLAS (cblas.h; link a BLAS that carries the C interface: Debian's OpenBLAS or reference
// BLAS, libblas.so.3, which CMake's ctpipe::blas target names). A BLAS gives the same bits for the
// same call on the same machine and thread count, which is what a pipelined step's bitwise
// agreement with a sequential one needs: both make the same calls with the same shapes.
#pragma once

#include <cblas.h>

#include <cstddef>
#include <limits>
#include <stdexcept>

namespace ctpipe::layers::detail {

/// The BLAS's integer for `n`, refused where it does not fit.
inline int blas_int(std::size_t n) {
  if (n > static_cast<std::size_t>(std::numeric_limits<int>::max()))
    throw std::length_error("ctpipe::layers: a matrix dimension exceeds the BLAS's int");
  return static_cast<int>(n);
}

/// Row-major C (m x n, leading dimension ldc) = alpha op(A) op(B) + beta C, where op(A) is m x k
/// (A^T where `ta`) and op(B) is k x n (B^T where `tb`). A call with m, n or k zero does nothing
/// beyond scaling C, as the BLAS defines it; we skip it outright.
inline void gemm(bool ta, bool tb, std::size_t m, std::size_t n, std::size_t k, float alpha, const float* a,
                 std::size_t lda, const float* b, std::size_t ldb, float beta, float* c, std::size_t ldc) {
  if (m == 0 || n == 0) return;
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, blas_int(m), blas_int(n),
              blas_int(k), alpha, a, blas_int(lda), b, blas_int(ldb), beta, c, blas_int(ldc));
}

}  // namespace ctpipe::layers::detail
