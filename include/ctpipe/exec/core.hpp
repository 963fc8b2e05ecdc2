// The executor core: what every executor is made of, whatever moves its tensors.
//
//  - requirements (exec/detail/requirements.hpp): the compile-time rules on the table, the model and
//    the stage plan, one list with one wording for every executor, and the microbatch-count check;
//  - programs (exec/detail/program.hpp): the tasks one thread runs or issues, built at compile time
//    from the execution plan (exec/plan.hpp): a rank's program (make_rank_program), or any order an
//    executor computes (the CUDA executor's global issue order);
//  - dispatch (exec/dispatch.hpp, exec/detail/run.hpp): run_program expands a program unrolled (in
//    blocks of 256 tasks) or as a table walk (an index switch per task), on a runner;
//  - the per-stage layout and tensor types (exec/detail/stages.hpp);
//  - failure reporting (exec/failure.hpp): task_failure names the executor, rank, stage,
//    microbatch and op.
//
// An executor is the core plus what really differs: its runner (how a task is run or issued) and
// its hand-off (how a tensor crosses a rank boundary: a ring between threads, a pointer or a peer
// copy between streams, a message between processes). See README.md, "Architecture".
#pragma once

#include <ctpipe/exec/detail/program.hpp>
#include <ctpipe/exec/detail/requirements.hpp>
#include <ctpipe/exec/detail/run.hpp>
#include <ctpipe/exec/detail/stages.hpp>
#include <ctpipe/exec/dispatch.hpp>
#include <ctpipe/exec/failure.hpp>
#include <ctpipe/exec/plan.hpp>
#include <ctpipe/make_table.hpp>       // the entry points executors are used with
#include <ctpipe/optim/optimizer.hpp>  // what their users update the parameters with
