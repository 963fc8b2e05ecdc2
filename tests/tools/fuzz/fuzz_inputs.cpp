// libFuzzer target (clang): the explorer's readers and commands on any bytes. The first byte picks
// what the rest is fed to ('0' and every fourth byte after it: `ctpipe check -`, a table as CSV or
// JSON; '1': `ctpipe check - --format svg`; '2': `ctpipe plan -` on 4 devices, a model file as JSON
// or CSV; '3': a measured step for `ctpipe compare`, against a 1F1B table of 2 ranks and 3
// microbatches); 's': a safetensors header (ctpipe/format/safetensors.hpp: read, and what it read
// written and read again to the same). No input may crash, hang, or end with an exit code other
// than 0, 1 or 2; exit 2 says one line. CTest runs it for a bounded time on the seed corpus in
// tests/tools/fuzz/corpus.
#include <cstddef>
#include <cstdint>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <ctpipe/format/safetensors.hpp>
#include <ctpipe/schedules.hpp>

#include "explorer.hpp"

namespace {

// Runs the explorer on `args` with `input` as its standard input; returns the exit code.
int run_with_input(const std::vector<std::string>& args, const std::string& input, std::string& err) {
  std::istringstream in(input);
  std::ostringstream out, e;
  std::streambuf* const old = std::cin.rdbuf(in.rdbuf());
  const int rc = ctpipe::explorer::run(args, out, e);
  std::cin.rdbuf(old);
  err = e.str();
  return rc;
}

int compare_measured(const std::string& input, std::string& err) {
  static const ctpipe::dynamic_table table = ctpipe::generate(ctpipe::one_f_one_b(2, 3));
  try {
    std::istringstream in(input);
    const ctpipe::measured_step m = ctpipe::read_measured_csv(in);
    const auto c = ctpipe::compare_measured(table, m);
    return ctpipe::comparison_text(c).empty() ? 1 : 0;
  } catch (const std::exception& e) {
    err = std::string("ctpipe: ") + e.what() + "\n";
    return 2;
  }
}

// A safetensors header (the rest of the input after its first 8 bytes, which say how many bytes
// the tensors take): read strictly; what it read is written and read back to the same.
int safetensors_header(const std::string& input, std::string& err) {
  if (input.size() < 8) return 1;
  std::uint64_t bytes = 0;
  for (int i = 7; i >= 0; --i) bytes = bytes << 8 | static_cast<unsigned char>(input[static_cast<std::size_t>(i)]);
  try {
    const ctpipe::safetensors::header h = ctpipe::safetensors::read_header(std::string_view(input).substr(8), bytes);
    const ctpipe::safetensors::header again =
        ctpipe::safetensors::read_header(ctpipe::safetensors::write_header(h), bytes);
    if (!(again.tensors == h.tensors) || again.metadata != h.metadata) __builtin_trap();
    return 0;
  } catch (const ctpipe::format_error& e) {
    err = std::string("ctpipe: ") + e.what() + "\n";
    if (err.find('\n') != err.size() - 1) err = "ctpipe: a malformed header\n";  // (names may hold a newline)
    return 2;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string input(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::string err;
  int rc = 0;
  if (data[0] == 's') {
    rc = safetensors_header(input, err);
  } else {
    switch (data[0] % 4) {
      case 0:
        rc = run_with_input({"check", "-"}, input, err);
        break;
      case 1:
        rc = run_with_input({"check", "-", "--format", "svg"}, input, err);
        break;
      case 2:
        rc = run_with_input({"plan", "-", "-n", "4", "-b", "16", "--max-microbatches", "16"}, input, err);
        break;
      default:
        rc = compare_measured(input, err);
        break;
    }
  }
  if (rc < 0 || rc > 2) __builtin_trap();  // an exit code the tool must not give
  if (rc == 2 && (err.empty() || err.find('\n') != err.size() - 1)) __builtin_trap();  // one line
  return 0;
}
