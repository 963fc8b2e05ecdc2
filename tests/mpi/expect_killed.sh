#!/usr/bin/env bash
# expect_killed.sh DEADLINE MPIEXEC... : runs the job, which kills one of its processes mid-step,
# and passes when it ends non-zero within DEADLINE seconds (never hangs). Prints the time it took.
deadline="$1"
shift
start=$EPOCHREALTIME
timeout "$deadline" "$@"
rc=$?
took=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
echo "expect_killed: exit code $rc after ${took} s (deadline ${deadline} s)"
if [ "$rc" -eq 124 ]; then
  echo "expect_killed: the job hung" >&2
  exit 1
fi
if [ "$rc" -eq 0 ]; then
  echo "expect_killed: the job succeeded although a process was killed" >&2
  exit 1
fi
exit 0
