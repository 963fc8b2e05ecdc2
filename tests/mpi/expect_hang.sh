#!/usr/bin/env bash
# expect_hang.sh SCENARIO DEADLINE TOOL COMMAND... : runs the job (tests/mpi/hangs.cpp under
# mpirun, or tests/nccl/hangs.cpp on the NCCL stand-in) with the hang report on, which cannot
# finish a step as SCENARIO says; passes when the fault happened (the job says so), the job ended
# non-zero within DEADLINE seconds (never hangs), and `TOOL hang-report` names the process and task
# at fault, and why. Prints the time it took and the report.
scenario="$1"
deadline="$2"
tool="$3"
shift 3
dir=$(mktemp -d)
log=$(mktemp)
trap 'rm -rf "$dir" "$log"' EXIT
export CTPIPE_REPORT_DIR="$dir"
start=$EPOCHREALTIME
timeout "$deadline" "$@" "$scenario" >"$log" 2>&1
rc=$?
cat "$log"
took=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
echo "expect_hang: $scenario: exit code $rc after ${took} s (deadline ${deadline} s)"
fail() {
  echo "expect_hang: $scenario: $*" >&2
  exit 1
}
[ "$rc" -eq 124 ] && fail "the job hung"
grep -Eq "ctpipe_(mpi|nccl)_hangs: process 1 $scenario" "$log" || fail "the fault never happened (the job failed for another reason)"
[ "$rc" -eq 0 ] && fail "the job succeeded although a process could not go on"
ls -l "$dir"
report=$("$tool" hang-report "$dir")
trc=$?
echo "$report"
[ "$trc" -eq 0 ] || fail "ctpipe hang-report exited with $trc"
"$tool" hang-report --format json "$dir" >/dev/null || fail "ctpipe hang-report --format json failed"
# The process at fault (rank 1) and its task: in the third step, F of stage 1, microbatch 0, task 1
# of its program (after RECV_F); one that left never ran task 0.
first="The first task that never completed: process 1 (rank 1, replica 0)"
case "$scenario" in
  killed) want="$first, task 1, F stage 1 microbatch 0. Why: it died in task 1" ;;
  hangs) want="$first, task 1, F stage 1 microbatch 0. Why: it hangs in task 1, F stage 1 microbatch 0: running it for" ;;
  leaves) want="$first, task 0, RECV_F stage 1 microbatch 0. Why: it left: its executor was destroyed after step 2" ;;
  throws) want="$first, task 1, F stage 1 microbatch 0. Why: a layer threw in task 1, F stage 1 microbatch 0:" ;;
  *) fail "unknown scenario" ;;
esac
grep -qF "$want" <<<"$report" || fail "the report does not say: $want"
grep -q "process 0 (rank 0, replica 0): .*process 1" <<<"$report" || [ "$scenario" = throws ] ||
  fail "the report does not say that process 0 waits for process 1"
echo "expect_hang: $scenario: passed"
