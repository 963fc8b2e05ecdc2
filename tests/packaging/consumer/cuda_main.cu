// A consumer of ctpipe::cuda as CUDA users write it: one .cu file, compiled by nvcc, with ctpipe's
// compile-time code, the CUDA executor's plan and a kernel side by side (nothing runs on a GPU:
// it only has to build and link against the CUDA runtime).
#include <ctpipe/ctpipe.hpp>
#include <ctpipe/cuda.hpp>

constexpr auto table = ctpipe::make_table<ctpipe::one_f_one_b(4, 8)>();
static_assert(ctpipe::check<table>());
static_assert(ctpipe::analyse(table, ctpipe::cost_model{1.0, 2.0}).makespan == 33.0);
constexpr auto plan = ctpipe::make_execution_plan<table>();
constexpr auto issue = ctpipe::cuda::make_issue_plan<plan, ctpipe::cuda::one_device<4>().device>();
static_assert(issue.forward[0] == ctpipe::cuda::handoff::pointer);

__global__ void scale(float* x, float a) { x[threadIdx.x] *= a; }

int main() {
  int devices = 0;
  (void)cudaGetDeviceCount(&devices);  // links libcudart
  if (devices > 0) {
    float* x = nullptr;
    if (cudaMalloc(&x, 32 * sizeof(float)) == cudaSuccess) {
      scale<<<1, 32>>>(x, 2.0f);
      (void)cudaDeviceSynchronize();
      (void)cudaFree(x);
    }
  }
  return 0;
}
