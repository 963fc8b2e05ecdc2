// What the benchmarks run as two MPI processes share (bench_mpi, bench_gpt_plans): a barrier that
// waits without spinning, and a reporter for the process that does not report.
#pragma once

#include <benchmark/benchmark.h>
#include <mpi.h>

#include <chrono>
#include <thread>
#include <vector>

namespace bench {

// Waits for the other processes without spinning (a host executor's threads need the cores).
inline void idle_barrier() {
  MPI_Request r = MPI_REQUEST_NULL;
  MPI_Ibarrier(MPI_COMM_WORLD, &r);
  for (int done = 0; !done;) {
    MPI_Test(&r, &done, MPI_STATUS_IGNORE);
    if (!done) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

// Says nothing: the reporter of every process but process 0.
class silent : public benchmark::BenchmarkReporter {
 public:
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>&) override {}
};

}  // namespace bench
