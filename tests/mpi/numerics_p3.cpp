// Every schedule at p = 3, one process per rank, bitwise against sequential training.
#include "mpi_numerics.hpp"

CTPIPE_MPI_SCHEDULES(3, table_walk)
