// The GPU GPT example's trainer (gpu_train.cuh) in single precision: IEEE float products (cuBLAS
// without TF32). gpu_bf16.cu is its bf16 twin, a file of its own so that the two build side by side.
#include "gpu_train.cuh"

namespace gpt_example {

int train_gpu(const options& o, const corpus& c, bool graph) { return gpu::train_in<gpu::precision::f32>(o, c, graph); }

}  // namespace gpt_example
