// The GPT example's interleaved 1F1B trainer (2 ranks, 2 chunks each).
#include "train.hpp"

namespace gpt_example {
int train_interleaved(const options& o, const corpus& c) {
  return o.ranks == 2 ? train<ctpipe::interleaved(2, microbatches, 2)>(o, c) : -1;
}
}  // namespace gpt_example
