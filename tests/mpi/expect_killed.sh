#!/usr/bin/env bash
# expect_killed.sh DEADLINE MPIEXEC... : runs the job, which kills one of its processes mid-step,
# and passes when the kill happened (the job says so) and the job ended non-zero within DEADLINE
# seconds (never hangs). Prints the time it took.
deadline="$1"
shift
log=$(mktemp)
trap 'rm -f "$log"' EXIT
start=$EPOCHREALTIME
timeout "$deadline" "$@" >"$log" 2>&1
rc=$?
cat "$log"
took=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
echo "expect_killed: exit code $rc after ${took} s (deadline ${deadline} s)"
if [ "$rc" -eq 124 ]; then
  echo "expect_killed: the job hung" >&2
  exit 1
fi
if ! grep -q "raises SIGKILL" "$log"; then
  echo "expect_killed: the process never killed itself (the job failed for another reason)" >&2
  exit 1
fi
if [ "$rc" -eq 0 ]; then
  echo "expect_killed: the job succeeded although a process was killed" >&2
  exit 1
fi
exit 0
