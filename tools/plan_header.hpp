// The planner's best plan as a C++ header a program includes to run exactly that plan (`ctpipe plan
// --emit-header FILE`): the schedule, its sizes and the stage boundaries the planner balanced.
#pragma once

#include <string>

#include <ctpipe/planner.hpp>

namespace ctpipe::explorer {

/// Whether `name` can name the header's namespace: a C++ identifier (letters, digits, '_', not
/// starting with a digit), or several joined by "::".
bool namespace_name_ok(const std::string& name);

/// The header for plan `f` of request `q` (whose layers the plan's stages split), in namespace
/// `ns`; `source` says where it came from (the model file and the command).
std::string plan_header_text(const plan_request& q, const plan_figures& f, const std::string& ns,
                             const std::string& source);

}  // namespace ctpipe::explorer
