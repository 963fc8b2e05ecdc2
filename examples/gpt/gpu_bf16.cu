// The GPU GPT example's trainer (gpu_train.cuh) in bf16: every product of bf16 operands (its linear
// layers' weights a bf16 copy of their float parameters, rewritten after each update), float sums;
// layer norms, softmax, GELU, the loss, the gradients and AdamW in float.
#include "gpu_train.cuh"

namespace gpt_example {

int train_gpu_bf16(const options& o, const corpus& c, bool graph) {
  return gpu::train_in<gpu::precision::bf16>(o, c, graph);
}

}  // namespace gpt_example
