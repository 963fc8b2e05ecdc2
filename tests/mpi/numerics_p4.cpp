// Every schedule at p = 4, one process per rank, bitwise against sequential training.
#include "mpi_numerics.hpp"

CTPIPE_MPI_SCHEDULES(4, table_walk)
