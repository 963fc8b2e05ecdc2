// Every schedule at p = 3, one process per rank, bitwise against sequential training; and V-Min and
// V-Half.
#include "mpi_numerics.hpp"

CTPIPE_MPI_SCHEDULES(3, table_walk)

// V-Min (its block's gap: 3 divides p) and V-Half (odd p: no gap), the controllable-memory orders.
TEST_CASE("mpi executor: v_min p=3") {
  test::check_schedule_mpi<ctpipe::v_min(3, test::microbatches), ctpipe::dispatch::table_walk>();
}
TEST_CASE("mpi executor: v_half p=3") {
  test::check_schedule_mpi<ctpipe::v_half(3, test::microbatches), ctpipe::dispatch::table_walk>();
}
