// The planner's model file: a model described layer by layer, in JSON or CSV (see README, "The
// planner"). Run time only (the tool's): nlohmann-json for JSON, a plain reader for CSV.
#pragma once

#include <iosfwd>
#include <vector>

#include <ctpipe/planner.hpp>

namespace ctpipe::explorer {

struct model_file {
  std::vector<layer_profile> layers;
  double input_bytes = 0.0;  // per sample
};

/// Reads a model file (JSON when its first character is '{', CSV otherwise); throws format_error
/// with the line or layer and the field at fault.
model_file read_model(std::istream& in);

}  // namespace ctpipe::explorer
