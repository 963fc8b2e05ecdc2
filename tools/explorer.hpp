// The schedule explorer's logic, callable in-process (tests) and from main (the ctpipe tool).
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include <ctpipe/schedules.hpp>

namespace ctpipe::explorer {

/// Runs the explorer on `args` (without the program name). Returns the exit code: 0 success,
/// 1 a table that breaks a rule (check), 2 bad arguments or malformed input (one line on `err`).
int run(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

/// Parses the whole of `text` as a number (std::stod's syntax); false when it is not one.
bool parse_number(const std::string& text, double& value);

/// Parses "F=1,B=2,I=1,W=1,comm=0" (any subset, any order); throws std::invalid_argument.
cost_model parse_costs(const std::string& spec);

/// Reads a table from the explorer's JSON (the shape `show --format json` writes); throws format_error.
dynamic_table read_json(std::istream& in);

}  // namespace ctpipe::explorer
