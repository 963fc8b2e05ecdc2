// The umbrella header: everything in ctpipe that needs neither CUDA nor NCCL (the
// reference layers in ctpipe/layers/ are included on their own).
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

#include <ctpipe/model/layer.hpp>
#include <ctpipe/model/model.hpp>
#include <ctpipe/model/partition.hpp>
#include <ctpipe/model/sequential.hpp>

#include <ctpipe/exec/host.hpp>
#include <ctpipe/exec/plan.hpp>
