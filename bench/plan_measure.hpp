// What the planner benchmarks share (bench_plan_vs_measured, bench_gpt_plans): a reporter that
// keeps each benchmark's real time per iteration, a plan's row of predicted against measured, and
// Spearman's rank correlation.
#pragma once

#include <benchmark/benchmark.h>

#include <ctpipe/planner.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

namespace bench {

// Keeps each benchmark's real time per iteration, in seconds, by name: with repetitions, their
// median.
class collect : public benchmark::ConsoleReporter {
 public:
  std::map<std::string, double> seconds;
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const auto& r : runs)
      if (r.run_type == Run::RT_Iteration || (r.run_type == Run::RT_Aggregate && r.aggregate_name == "median"))
        seconds[r.run_name.function_name] = r.GetAdjustedRealTime() / benchmark::GetTimeUnitMultiplier(r.time_unit);
    ConsoleReporter::ReportRuns(runs);
  }
};

// Each value's rank, 1 for the least; ties share their mean rank.
inline std::vector<double> ranks_of(const std::vector<double>& v) {
  std::vector<std::size_t> order(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return v[a] < v[b]; });
  std::vector<double> r(v.size());
  for (std::size_t i = 0; i < order.size();) {
    std::size_t j = i;
    while (j + 1 < order.size() && v[order[j + 1]] == v[order[i]]) ++j;
    for (std::size_t k = i; k <= j; ++k) r[order[k]] = (static_cast<double>(i + j) / 2.0) + 1.0;
    i = j + 1;
  }
  return r;
}

inline double pearson(const std::vector<double>& x, const std::vector<double>& y) {
  const double n = static_cast<double>(x.size());
  double mx = 0, my = 0;
  for (std::size_t i = 0; i < x.size(); ++i) mx += x[i] / n, my += y[i] / n;
  double sxy = 0, sxx = 0, syy = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    sxy += (x[i] - mx) * (y[i] - my);
    sxx += (x[i] - mx) * (x[i] - mx);
    syy += (y[i] - my) * (y[i] - my);
  }
  return sxy / std::sqrt(sxx * syy);
}

// Spearman's rank correlation: Pearson's of the ranks.
inline double spearman(const std::vector<double>& x, const std::vector<double>& y) {
  return pearson(ranks_of(x), ranks_of(y));
}

// Predicts plan c of q, prints its Markdown row (times in 1 / unit seconds, with `digits` decimals;
// whether the executor's stages are the planner's), and keeps the two times, in seconds.
inline void plan_row(const std::string& name, const ctpipe::plan_request& q, const ctpipe::plan_choice& c,
                     const std::vector<int>& executor_split, double measured, double unit, int digits,
                     std::vector<double>& predicted_all, std::vector<double>& measured_all) {
  const auto f = ctpipe::predict(q, c);
  std::vector<int> split(executor_split.size());
  ctpipe::stage_split(q, c, split.data());
  predicted_all.push_back(f.step_time);
  measured_all.push_back(measured);
  std::printf("| %s | %.*f | %.*f | %.2f | %s |\n", name.c_str(), digits, f.step_time * unit, digits, measured * unit,
              measured / f.step_time, split == executor_split ? "yes" : "no");
}

}  // namespace bench
