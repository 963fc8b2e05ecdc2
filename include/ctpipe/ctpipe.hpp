// The umbrella header: everything in ctpipe that needs neither CUDA nor NCCL.
#pragma once

#include <ctpipe/config.hpp>
#include <ctpipe/version.hpp>

#include <ctpipe/schedule/generate.hpp>
#include <ctpipe/schedule/schedule.hpp>
#include <ctpipe/schedule/table.hpp>
#include <ctpipe/schedule/task.hpp>

#include <ctpipe/analysis/analyse.hpp>
#include <ctpipe/analysis/check.hpp>
#include <ctpipe/analysis/lower.hpp>
#include <ctpipe/analysis/verify.hpp>

#include <ctpipe/format/csv.hpp>
#include <ctpipe/format/json.hpp>
#include <ctpipe/format/text.hpp>
