// The GPT example's zero-bubble trainers: ZB-H1 (2 and 4 ranks), ZB-V and DualPipeV (2 ranks).
#include "train.hpp"

namespace gpt_example {
int train_zb_h1(const options& o, const corpus& c) {
  switch (o.ranks) {
    case 2:
      return train<ctpipe::zb_h1(2, microbatches)>(o, c);
    case 4:
      return train<ctpipe::zb_h1(4, microbatches)>(o, c);
    default:
      return -1;
  }
}
int train_v(const options& o, const corpus& c) {
  if (o.ranks != 2) return -1;
  return o.schedule == "zb-v" ? train<ctpipe::zb_v(2, microbatches)>(o, c)
                              : train<ctpipe::dualpipe_v(2, microbatches)>(o, c);
}
}  // namespace gpt_example
