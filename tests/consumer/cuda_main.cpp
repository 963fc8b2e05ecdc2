// A consumer of ctpipe::cuda: the CUDA executor's header compiles and links against the CUDA
// runtime from the consumer's side (the plan is checked at compile time; nothing runs).
#include <ctpipe/cuda.hpp>

constexpr auto table = ctpipe::make_table<ctpipe::one_f_one_b(2, 4)>();
constexpr auto plan = ctpipe::make_execution_plan<table>();
constexpr auto issue = ctpipe::cuda::make_issue_plan<plan, ctpipe::cuda::one_device<2>().device>();
static_assert(issue.forward[0] == ctpipe::cuda::handoff::pointer);

int main() {
  int devices = 0;
  (void)cudaGetDeviceCount(&devices);  // links libcudart
  return 0;
}
