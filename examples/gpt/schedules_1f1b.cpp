// The GPT example's 1F1B trainers (1, 2 and 4 ranks), and the planner's calibration by 1F1B on 2
// ranks.
#include "train.hpp"

#include <algorithm>

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

stage_measures measure_stages(const options& o, const corpus& c) {
  constexpr auto schedule = ctpipe::one_f_one_b(2, microbatches);
  constexpr auto stages = ctpipe::partition<net::model, schedule.stages()>();  // as train<> splits it
  constexpr auto table = ctpipe::make_table<schedule, ctpipe::model_crossings<net::model, stages>()>();
  using executor = executor_for<false, table, stages>::type;  // train<>'s: nothing more to compile
  auto model = std::make_unique<net::model>();
  net::init(*model, o.seed);
  net::loss loss;
  executor exec(*model, loss);
  batch b;
  validation_batch(c, b);  // full-length microbatches, as the layers were measured
  std::vector<std::vector<ctpipe::stage_time>> runs;
  for (int step = 0; step < 7; ++step) {
    exec.record_steps(step >= 2);  // two steps to warm up
    (void)exec.step(std::span<const net::input_type>(b.inputs), std::span<const net::target_type>(b.targets),
                    std::span<const int>(b.extents));
    if (step >= 2) runs.push_back(ctpipe::stage_times(table, exec.recorded_step()));
  }
  stage_measures out;
  for (std::size_t s = 0; s < runs[0].size(); ++s) {
    out.first.push_back(stages.first[s]);
    std::vector<double> f, w;
    for (const auto& r : runs) f.push_back(r[s].forward), w.push_back(r[s].backward);
    std::nth_element(f.begin(), f.begin() + static_cast<std::ptrdiff_t>(f.size() / 2), f.end());
    std::nth_element(w.begin(), w.begin() + static_cast<std::ptrdiff_t>(w.size() / 2), w.end());
    out.times.push_back({f[f.size() / 2], w[w.size() / 2]});
  }
  return out;
}
}  // namespace gpt_example
