// `ctpipe synth`: a schedule synthesised for given costs and a memory limit
// (ctpipe/schedule/synthesis.hpp), printed as `show` prints a built-in one, after a line giving the
// heuristic's own span beside the order chosen.
#pragma once

#include <string>

#include <ctpipe/schedules.hpp>

namespace CLI {
class App;
}

namespace ctpipe::explorer {

struct synth_options {
  int ranks = 0, microbatches = 0, memory = 0;
  std::string costs = "F=1,I=1,W=1,comm=0";  // every stage's, in whole units
  std::string stage_costs;                   // or each stage's: F,I,W/F,I,W/...
  int activation = 1, weight_stash = -1;     // memory a microbatch holds from F, and from I to W (-1: all of it)
  bool heuristic_only = false;
  std::string placement = "one";  // "one" stage a rank, or "v": stages r and 2p-1-r
};

/// Adds the `synth` command to `app`; its options go to `o` (its format and --compute-only are
/// `show`'s, added by the caller).
CLI::App* add_synth_command(CLI::App& app, synth_options& o);

struct synth_result {
  dynamic_table table;
  cost_model costs;     // stage 0's, for the figures printed with the table
  std::string summary;  // the synthesis line(s)
};

/// Synthesises the schedule `o` asks for; throws std::invalid_argument (exit code 2) for bad options
/// or parameters (schedule_error's words).
synth_result synthesise_from(const synth_options& o);

}  // namespace ctpipe::explorer
