// The umbrella header: everything in ctpipe that needs neither CUDA nor NCCL (the reference layers
// in ctpipe/layers/ are included on their own). The constexpr part alone, without Boost or
// threads, is ctpipe/schedules.hpp.
#pragma once

#include <ctpipe/schedules.hpp>

#include <ctpipe/model/crossings.hpp>
#include <ctpipe/model/layer.hpp>
#include <ctpipe/model/model.hpp>
#include <ctpipe/model/partition.hpp>
#include <ctpipe/model/sequential.hpp>
#include <ctpipe/model/shared_parameters.hpp>
#include <ctpipe/optim/checkpoint.hpp>
#include <ctpipe/optim/optimizer.hpp>

#include <ctpipe/elastic.hpp>
#include <ctpipe/exec/async.hpp>
#include <ctpipe/exec/core.hpp>
#include <ctpipe/exec/host.hpp>
#include <ctpipe/exec/plan.hpp>
