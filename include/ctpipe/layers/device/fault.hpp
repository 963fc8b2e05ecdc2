// How a device layer reports bad data it can only see in a kernel (a token id, a target class): a
// kernel of one thread scans the task's values in order and records the first out of range, with
// the task's rank, stage and microbatch, in the layer's device memory; once the step is done, the
// executor calls the layer's report(), which throws the host layer's message, naming them, and
// clears the record. The layer computes NaN where the value was bad, so nothing downstream reads a
// number made of it as if it were one (the device optimizer skips a non-finite step).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <ctpipe/layers/device/memory.hpp>

namespace ctpipe::layers::device {

namespace detail {
/// The first of the rows in use whose value is outside [0, limit), recorded (where nothing is yet)
/// as {1, rank, stage, microbatch, row, value}.
struct first_out_of_range {
  const std::int32_t* values;
  std::size_t rows, per_row;  // the values' rows, and a row's (a token's) values: its first is checked
  const int* extent;
  int limit;
  int* record;
  int rank, stage, microbatch;
  CTPIPE_HOST_DEVICE void operator()(std::size_t) const {
    if (record[0] != 0) return;
    const std::size_t n = rows_in_use(extent, rows);
    for (std::size_t r = 0; r < n; ++r) {
      const std::int32_t v = values[r * per_row];
      if (v < 0 || v >= limit) {
        record[1] = rank, record[2] = stage, record[3] = microbatch;
        record[4] = static_cast<int>(r), record[5] = v;
        record[0] = 1;
        return;
      }
    }
  }
};
}  // namespace detail

/// What a kernel found out of range in a step: where (rank, stage, microbatch), which row, and its
/// value.
struct fault {
  int rank = 0, stage = 0, microbatch = 0, row = 0, value = 0;
};

/// A layer's record of the first value out of range, in device memory.
template <device_ops Ops>
class fault_record {
 public:
  /// Scans `rows` values (rows::tokens: those in use) on c's stream.
  void check(const ctpipe::cuda::context& c, const std::int32_t* values, std::size_t rows, const int* extent,
             int limit) const {
    Ops::for_each(
        c, 1, detail::first_out_of_range{values, rows, 1, extent, limit, words_.data(), c.rank, c.stage, c.microbatch});
  }
  /// What the last steps found, cleared (none: set false). Between steps only.
  bool take(fault& f) {
    const std::vector<int> w = words_.download();
    if (w[0] == 0) return false;
    f = {w[1], w[2], w[3], w[4], w[5]};
    words_.upload(std::vector<int>(6, 0));
    return true;
  }
  void place(int d) { words_.place(d); }
  /// "rank r, stage s: " for a fault's message.
  static std::string where(const fault& f) {
    return "rank " + std::to_string(f.rank) + ", stage " + std::to_string(f.stage) + ": ";
  }

 private:
  array<Ops, int> words_{6};
};

}  // namespace ctpipe::layers::device
