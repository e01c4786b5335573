#!/usr/bin/env bash
# Where a transfer benchmark's time goes between the OpenCL driver, each
# thread and the waits for locks, on a machine without a profiler:
#   bench/opencl-call-times.sh BUILD_DIR BENCHMARK [MIN_TIME]
# runs the one benchmark BENCHMARK of drt-bench-transfer (an exact name,
# chain/drt_resident/16/16384 say) with the drt-opencl-call-times library
# preloaded, and prints, for each thread and OpenCL call, the calls and the
# microseconds per kernel launch (every chain launches one kernel a run,
# raw or drt, so the figures of two mechanisms compare run for run).
set -euo pipefail
build="${1:?usage: bench/opencl-call-times.sh BUILD_DIR BENCHMARK [MIN_TIME]}"
name="${2:?usage: bench/opencl-call-times.sh BUILD_DIR BENCHMARK [MIN_TIME]}"
library="$build/bench/libdrt-opencl-call-times.so"
[[ -e "$library" ]] || { echo "no $library: build the bench folder" >&2; exit 2; }
times="$(mktemp)"
trap 'rm -f "$times"' EXIT
# Regular-expression characters in a benchmark's name are its own.
filter="^$(printf '%s' "$name" | sed 's/[][().*+?^$|\\]/\\&/g')\$"
DRT_CALL_TIMES="$times" LD_PRELOAD="$library" \
  "$build/bench/drt-bench-transfer" --benchmark_filter="$filter" \
  --benchmark_min_time="${3:-0.5}" >&2
awk -v name="$name" '
  { thread = $2; call = $3; for (i = 4; $i != "calls"; ++i) call = call " " $i
    calls[thread, call] = $(i + 1); us[thread, call] = $(i + 3)
    if (!(thread in seen)) { seen[thread] = 1; order[++threads] = thread }
    if (call == "clEnqueueNDRangeKernel") launches += $(i + 1) }
  END {
    if (!launches) { print "no kernel launches in " name > "/dev/stderr"; exit 1 }
    printf "%s: %d kernel launches; per launch:\n", name, launches
    printf "| thread | call | calls | us |\n|---|---|---|---|\n"
    # Threads in the order of their first timed call (a benchmark makes a
    # device, and with it a completion thread, for each of its rounds),
    # each with its calls by time spent, those under 0.01 us a launch left
    # out of the rows but not of its total.
    for (t = 1; t <= threads; ++t) {
      total = 0; rows = 0
      for (key in calls) {
        split(key, k, SUBSEP)
        if (k[1] != order[t]) continue
        total += us[key]
        if (us[key] / launches < 0.01) continue
        row[++rows] = key
      }
      if (total / launches < 0.01) continue
      for (i = 1; i <= rows; ++i)
        for (j = i + 1; j <= rows; ++j)
          if (us[row[j]] > us[row[i]]) { x = row[i]; row[i] = row[j]; row[j] = x }
      for (i = 1; i <= rows; ++i) {
        split(row[i], k, SUBSEP)
        printf "| %s | %s | %.2f | %.2f |\n", k[1], k[2],
               calls[row[i]] / launches, us[row[i]] / launches
      }
      printf "| %s | all | | %.2f |\n", order[t], total / launches
    }
  }' "$times"
