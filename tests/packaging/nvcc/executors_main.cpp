// Runs what tests/packaging/nvcc/executors.cu (compiled by nvcc) built.
#include <doctest/doctest.h>

bool nvcc_host_step_matches_sequential();
bool nvcc_split_host_step_matches_sequential();
bool nvcc_graph_host_step_matches_sequential();
bool nvcc_split_cuda_step_matches_sequential();
bool nvcc_graph_cuda_step_matches_sequential();
bool nvcc_mirror_cuda_step_matches_sequential();
bool nvcc_nccl_step_matches_sequential();

TEST_CASE("nvcc: a host executor compiled by nvcc trains like the sequential reference, bit for bit") {
  CHECK(nvcc_host_step_matches_sequential());
}

TEST_CASE("nvcc: the host executor runs I, W and F&B (DualPipeV) compiled by nvcc, bit for bit") {
  CHECK(nvcc_split_host_step_matches_sequential());
}

TEST_CASE("nvcc: the host executor runs a residual that skips a stage (skip messages) compiled by nvcc, bit for bit") {
  CHECK(nvcc_graph_host_step_matches_sequential());
}

TEST_CASE("nvcc: the CUDA executor runs I, W and F&B on two streams (simulated) compiled by nvcc, bit for bit") {
  CHECK(nvcc_split_cuda_step_matches_sequential());
}

TEST_CASE("nvcc: the CUDA executor runs a graph model, a skip message across devices (simulated), compiled by nvcc") {
  CHECK(nvcc_graph_cuda_step_matches_sequential());
}

TEST_CASE("nvcc: the CUDA executor runs DualPipe with a mirror model on two devices (simulated), compiled by nvcc") {
  CHECK(nvcc_mirror_cuda_step_matches_sequential());
}

TEST_CASE(
    "nvcc: the NCCL executor runs DualPipe (two simulated processes, NCCL stand-in) compiled by nvcc, bit for bit") {
  CHECK(nvcc_nccl_step_matches_sequential());
}
