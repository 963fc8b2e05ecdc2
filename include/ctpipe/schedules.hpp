// The constexpr part of ctpipe alone: schedules and their tables, verification, analysis and the
// formats, and the planner. Plain C++20: no threads, no intrinsics, no Boost (CMake target
// ctpipe::schedule), and the same code at compile time and at run time.
#pragma once

#include <ctpipe/config.hpp>
#include <ctpipe/version.hpp>

#include <ctpipe/make_table.hpp>
#include <ctpipe/schedule/generate.hpp>
#include <ctpipe/schedule/schedule.hpp>
#include <ctpipe/schedule/table.hpp>
#include <ctpipe/schedule/task.hpp>

#include <ctpipe/analysis/analyse.hpp>
#include <ctpipe/analysis/check.hpp>
#include <ctpipe/analysis/lower.hpp>
#include <ctpipe/analysis/measured.hpp>
#include <ctpipe/analysis/uneven.hpp>
#include <ctpipe/analysis/verify.hpp>

#include <ctpipe/format/csv.hpp>
#include <ctpipe/format/json.hpp>
#include <ctpipe/format/measured.hpp>
#include <ctpipe/format/svg.hpp>
#include <ctpipe/format/text.hpp>
#include <ctpipe/format/trace.hpp>

#include <ctpipe/planner.hpp>
