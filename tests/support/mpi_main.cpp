// doctest under MPI: every process runs the same test cases in the same order (each case is
// collective); a process exits with its own result, and mpirun fails when any process does.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
#include <mpi.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  doctest::Context context(argc, argv);
  const int rc = context.run();
  MPI_Finalize();
  return rc;
}
