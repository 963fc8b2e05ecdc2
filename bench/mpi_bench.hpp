// What the benchmarks run as two MPI processes share (bench_mpi, bench_gpt_plans): MPI started and
// finalized, a barrier that waits without spinning, and a reporter for the process that does not
// report.
#pragma once

#include <benchmark/benchmark.h>
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

namespace bench {

// MPI for the benchmark's life: started on construction, finalized on destruction.
struct two_processes {
  int process = 0, processes = 0;
  two_processes(int& argc, char**& argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &process);
    MPI_Comm_size(MPI_COMM_WORLD, &processes);
  }
  ~two_processes() { MPI_Finalize(); }
  two_processes(const two_processes&) = delete;
  two_processes& operator=(const two_processes&) = delete;
  // Are there two? If not, process 0 says so in one line.
  bool ok(const char* program) const {
    if (processes != 2 && process == 0) std::fprintf(stderr, "%s: run it as 2 processes (mpirun -np 2)\n", program);
    return processes == 2;
  }
};

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
