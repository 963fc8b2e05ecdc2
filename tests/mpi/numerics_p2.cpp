// Every schedule at p = 2, one process per rank, bitwise against sequential training.
#include "mpi_numerics.hpp"

CTPIPE_MPI_SCHEDULES(2, table_walk)
