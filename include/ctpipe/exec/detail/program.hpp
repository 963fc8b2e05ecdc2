// A program: the tasks one thread of an executor runs (or issues), in order, as the executor core's
// dispatch expands it. Each task is a code (rank, op, stage: what its code is) and arguments (its
// microbatch, buffer slots, message numbers: what the code reads). Executors build their programs at
// compile time from the execution plan; plain constexpr.
#pragma once

#include <array>
#include <cstddef>

#include <ctpipe/config.hpp>  // CTPIPE_NTTP_TYPE
#include <ctpipe/exec/plan.hpp>
#include <ctpipe/schedule/task.hpp>

namespace ctpipe::detail {

/// Which code a task runs: its op on its stage, for its rank. The table walk branches on this.
struct task_code {
  int rank = 0;
  op_kind op{};
  int stage = 0;
  int other = -1;  // a skip message's far stage
  constexpr bool operator==(const task_code&) const = default;
};

/// What the host executor's task code reads besides its op and stage: its microbatch and buffer
/// slots (as in task_slots; -1 where unused).
struct task_args {
  int microbatch = 0;
  int stash = -1, local_in = -1, local_out = -1, message = -1;
  constexpr bool operator==(const task_args&) const = default;
};

/// One task of a program, before the codes are numbered.
template <class Args>
struct program_task {
  task_code code{};
  Args args{};
};

template <class Args>
struct program_entry {
  int code = 0;  // index into program::codes
  Args args{};
};

/// A program as the core runs it: its distinct codes in order of first use, and per task (in order)
/// the index of its code and its arguments.
template <class Args, std::size_t Codes, std::size_t Length>
struct program {
  using args_type = Args;
  static constexpr std::size_t code_count = Codes, length = Length;
  std::array<task_code, Codes> codes{};
  std::array<program_entry<Args>, Length> entries{};
};

// Against the codes found so far, which are few (ops x stages x peers): linear in the program's
// length, so that a table of thousands of tasks stays within a compiler's constexpr step limit
// (clang's 1,048,576 by default; comparing every task with every earlier one went past it at 1,024).
template <auto Tasks>
consteval std::size_t distinct_codes() {
  std::array<task_code, Tasks.size()> found{};
  std::size_t n = 0;
  for (std::size_t i = 0; i < Tasks.size(); ++i) {
    std::size_t k = 0;
    while (k < n && !(found[k] == Tasks[i].code)) ++k;
    if (k == n) found[n++] = Tasks[i].code;
  }
  return n;
}

/// The program of `Tasks` (a std::array of program_task), codes numbered in order of first use.
template <auto Tasks>
consteval auto make_program() {
  using args_t = decltype(CTPIPE_NTTP_TYPE(Tasks){}[0].args);
  program<args_t, distinct_codes<Tasks>(), Tasks.size()> p{};
  std::size_t codes = 0;
  for (std::size_t i = 0; i < Tasks.size(); ++i) {
    std::size_t k = 0;
    while (k < codes && !(p.codes[k] == Tasks[i].code)) ++k;
    if (k == codes) p.codes[codes++] = Tasks[i].code;
    p.entries[i] = {static_cast<int>(k), Tasks[i].args};
  }
  return p;
}

constexpr task_args args_of(const task& t, const task_slots& x) {
  return {t.microbatch, x.stash, x.local_in, x.local_out, x.message};
}

template <auto ExecPlan, int R>
consteval auto rank_tasks() {
  constexpr auto r = static_cast<std::size_t>(R);
  std::array<program_task<task_args>, static_cast<std::size_t>(ExecPlan.table.length[r])> tasks{};
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    const task& t = ExecPlan.table.programs[r][i];
    tasks[i] = {{R, t.op, t.stage, t.other}, args_of(t, ExecPlan.slots[r][i])};
  }
  return tasks;
}

/// Rank R's program of execution plan ExecPlan: its tasks in table order, with the plan's slots. The
/// program of an executor that runs each rank on a thread (or a process) of its own.
template <auto ExecPlan, int R>
consteval auto make_rank_program() {
  return make_program<rank_tasks<ExecPlan, R>()>();
}

/// Per stage, the index in rank R's program of its last B or W (after which the stage's gradients
/// are final for the step: where data parallelism starts summing them), or -1 for another rank's.
template <auto ExecPlan, int R>
inline constexpr auto last_weight_op = [] {
  constexpr auto stages = CTPIPE_NTTP_TYPE(ExecPlan.table)::static_stages;
  std::array<std::ptrdiff_t, stages> last{};
  last.fill(-1);
  const auto& p = ExecPlan.table.programs[static_cast<std::size_t>(R)];
  for (int i = 0; i < ExecPlan.table.length[static_cast<std::size_t>(R)]; ++i) {
    const task& t = p[static_cast<std::size_t>(i)];
    if (t.op == op_kind::backward || t.op == op_kind::backward_weight) last[static_cast<std::size_t>(t.stage)] = i;
  }
  return last;
}();

}  // namespace ctpipe::detail
