// A residual that skips stages, sent directly against carried through the stages between
// (bench/README.md, "Skip connections"), on the host executor: the two models of
// bench/skip_models.hpp. Both compute the same losses and gradients (checked before timing); what
// differs is what crosses each boundary. Counters: bytes sent between ranks per step (both
// directions), and the time of a step.
#include <benchmark/benchmark.h>

#include <cstring>
#include <stdexcept>
#include <vector>

#include "skip_models.hpp"

namespace {

// The two ways compute the same step: losses and the head's gradients, to the bit.
template <class M>
void check_same() {
  auto dn = M::template make_net<typename M::direct_net>();
  auto rn = M::template make_net<typename M::relayed_net>();
  typename M::loss l;
  const typename M::batch_data d;
  ctpipe::host_executor<M::direct_table, typename M::direct_net, M::direct_stages, typename M::loss> de(dn, l);
  ctpipe::host_executor<M::relayed_table, typename M::relayed_net, M::relayed_stages, typename M::loss> re(rn, l);
  const auto sa = de.step(d.inputs, d.targets);
  const std::vector<double> a(sa.begin(), sa.end());
  const auto b = re.step(d.inputs, d.targets);
  const auto ga = dn.template layer<4>().gradients();
  const auto gb = rn.template layer<4>().gradients();
  if (!std::equal(a.begin(), a.end(), b.begin()) || std::memcmp(ga.data(), gb.data(), ga.size() * sizeof(float)) != 0)
    throw std::logic_error("bench_skip: the direct and relayed models do not compute the same step");
}

// A step of way Direct on the host executor.
template <class M, bool Direct>
void step(benchmark::State& state) {
  using exec = ctpipe::host_executor<M::template table_of<Direct>, typename M::template net_of<Direct>,
                                     M::template stages_of<Direct>, typename M::loss>;
  M::template time_steps<Direct, exec>(state);
}

using small = skip_bench::models<16>;   // 16 KB a tensor
using large = skip_bench::models<256>;  // 256 KB a tensor
// (Relayed first in each group: the report gives direct's figures as ratios to it.)
BENCHMARK(step<small, false>)->Name("skip/host_16KB/relayed")->UseRealTime()->MinTime(0.5);
BENCHMARK(step<small, true>)->Name("skip/host_16KB/direct")->UseRealTime()->MinTime(0.5);
BENCHMARK(step<large, false>)->Name("skip/host_256KB/relayed")->UseRealTime()->MinTime(0.5);
BENCHMARK(step<large, true>)->Name("skip/host_256KB/direct")->UseRealTime()->MinTime(0.5);

}  // namespace

int main(int argc, char** argv) {
  check_same<small>();
  check_same<large>();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
}
