// The GPT example's 1F1B trainers (1, 2 and 4 ranks).
#include "train.hpp"

namespace gpt_example {
int train_one_f_one_b(const options& o, const corpus& c) {
  switch (o.ranks) {
    case 1:
      return train<ctpipe::one_f_one_b(1, microbatches)>(o, c);
    case 2:
      return train<ctpipe::one_f_one_b(2, microbatches)>(o, c);
    case 4:
      return train<ctpipe::one_f_one_b(4, microbatches)>(o, c);
    default:
      return -1;
  }
}
}  // namespace gpt_example
