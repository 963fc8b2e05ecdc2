// The constructors of what holds CUDA, NCCL or MPI resources (the CUDA engine, the transports):
// acquire them all, or release what was acquired and rethrow.
#pragma once

namespace ctpipe::detail {

template <class Acquire, class Release>
void acquire_or_release(Acquire acquire, Release release) {
  try {
    acquire();
  } catch (...) {
    release();
    throw;
  }
}

}  // namespace ctpipe::detail
