// The planner: which schedule, pipeline depth, data-parallel width, microbatch count, chunks and
// recomputation to run a model with, predicted before anything runs (constexpr, run time too).
#pragma once

#include <ctpipe/planner/calibrate.hpp>
#include <ctpipe/planner/predict.hpp>
#include <ctpipe/planner/request.hpp>
#include <ctpipe/planner/search.hpp>
#include <ctpipe/planner/synthesis_inputs.hpp>
