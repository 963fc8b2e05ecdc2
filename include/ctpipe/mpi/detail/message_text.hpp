// What the MPI executor's waits say of a message where an error needs it (a timeout, a refused
// transfer): one function for every route and rank, called only then. A lambda per call site had
// compiled the text's code again for every route of every rank's engine (a fifth of the code of
// the MPI sweeps' objects).
#pragma once

#include <string>

#include <ctpipe/config.hpp>  // CTPIPE_NOINLINE
#include <ctpipe/detail/lazy_text.hpp>

namespace ctpipe::mpi::detail {

/// "the activations of microbatch 3 across stages 1 and 2", "the values of microbatch 0 that skip
/// from stage 0 to stage 2".
struct route_text {
  bool backward = false, skip = false;
  int lower = 0, upper = 0, microbatch = 0;
  CTPIPE_NOINLINE std::string operator()() const {
    return std::string(backward ? "the gradients"
                       : skip   ? "the values"
                                : "the activations") +
           " of microbatch " + std::to_string(microbatch) +
           (skip ? " that skip from stage " + std::to_string(lower) + " to stage " + std::to_string(upper)
                 : " across stages " + std::to_string(lower) + " and " + std::to_string(upper));
  }
};

/// "<verb><what> (rank r)": "waiting for the gradients of microbatch 1 across stages 0 and 1 (rank 1)".
struct peer_text {
  const char* verb;
  ctpipe::detail::lazy_text what;
  int rank;
  CTPIPE_NOINLINE std::string operator()() const { return verb + what() + " (rank " + std::to_string(rank) + ")"; }
};

}  // namespace ctpipe::mpi::detail
