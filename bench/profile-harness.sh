#!/usr/bin/env bash
# profile-harness.sh [BENCHMARK]
#
# Records where the conformance harness spends its time in one benchmark of
# drt-bench-harness (default BM_GeneratedSteps/fake: generate, annotate and
# run scenarios on the fake device) and prints the top functions by
# inclusive and by self cost. Uses perf (sampling the cpu-clock) when the
# machine lets perf count instructions, else valgrind's callgrind
# (instructions executed, about 50 times slower, collected inside the
# benchmark's timed loop only: ScenarioBench.cpp's timedIteration).
#
# Environment:
#   TOP       functions per table (default 25)
#   PROFILER  perf or callgrind, to choose instead of the check
#   OUT_DIR   where the profile goes (default build/profile-harness)
#   WIDTH     columns a function line is cut to (default 200)
set -euo pipefail

program=profile-harness.sh
die() {
  echo "$program: $*" >&2
  exit 1
}
[[ ${1:-} != -h && ${1:-} != --help ]] ||
  {
    sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' >&2
    exit 2
  }
benchmark=${1:-BM_GeneratedSteps/fake}
top=${TOP:-25}
width=${WIDTH:-200}
[[ $top =~ ^[1-9][0-9]*$ ]] || die "TOP must be a positive number, not '$top'"
[[ $width =~ ^[1-9][0-9]*$ ]] || die "WIDTH must be a positive number, not '$width'"
# The function that runs the benchmark: its name up to the first '/'.
function_name=${benchmark%%/*}
[[ $function_name =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]] ||
  die "'$benchmark' is not a benchmark name such as BM_GeneratedSteps/fake"

script_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(git -C "$script_dir" rev-parse --show-toplevel 2>/dev/null) ||
  die "$script_dir is not inside a git checkout"
out=${OUT_DIR:-$root/build/profile-harness}
mkdir -p "$out" || die "cannot create the output folder $out"

profiler=${PROFILER:-}
if [[ -z $profiler ]]; then
  profiler=callgrind
  if command -v perf >/dev/null &&
    perf stat -x, -e instructions true 2>&1 >/dev/null |
    grep -Eq '^[0-9]+,'; then
    profiler=perf
  fi
fi
case $profiler in
perf) command -v perf >/dev/null || die "perf is not on PATH" ;;
callgrind)
  for tool in valgrind callgrind_annotate; do
    command -v "$tool" >/dev/null || die "'$tool' is needed but not on PATH"
  done
  ;;
*) die "PROFILER must be perf or callgrind, not '$profiler'" ;;
esac

echo "$program: building drt-bench-harness in $root/build/default" >&2
if [[ ! -f $root/build/default/CMakeCache.txt ]]; then
  (cd "$root" && cmake --preset default) >"$out/configure.log" 2>&1 ||
    die "configuring failed; see $out/configure.log"
fi
cmake --build "$root/build/default" -j 2 --target drt-bench-harness \
  >"$out/build.log" 2>&1 || die "building failed; see $out/build.log"
bench=$root/build/default/bench/drt-bench-harness
filter="^$benchmark(/process_time)?(/real_time)?\$"
listed=$("$bench" --benchmark_list_tests --benchmark_filter="$filter") ||
  die "drt-bench-harness does not start"
[[ -n $listed ]] || die "drt-bench-harness has no benchmark '$benchmark'"

# Prints the first $top rows of a table on stdin, cut to $width columns;
# reads all of it, so that the writer never fails on a closed pipe.
first_rows() {
  awk -v rows="$top" 'NR <= rows' | cut -c "1-$width"
}

echo "$program: profiling $benchmark with $profiler; output in $out" >&2
if [[ $profiler == perf ]]; then
  perf record -q -e cpu-clock --call-graph dwarf -o "$out/perf.data" -- "$bench" \
    --benchmark_filter="$filter" >"$out/bench.txt" 2>"$out/perf-record.log" ||
    die "perf record failed; see $out/perf-record.log"
  report() {
    perf report -i "$out/perf.data" --stdio -g none --sort symbol "$@" \
      2>/dev/null | grep -v '^#' | grep -v '^[[:space:]]*$'
  }
  echo "## $benchmark: top $top functions by inclusive time (perf, cpu-clock)"
  echo
  report --children | first_rows
  echo
  echo "## $benchmark: top $top functions by self time (perf, cpu-clock)"
  echo
  report --no-children | first_rows
else
  # One iteration is plenty under callgrind; cost is counted inside the
  # timed loop only, so start-up and the benchmark's set-up stay out.
  valgrind --tool=callgrind --callgrind-out-file="$out/callgrind.out" \
    --toggle-collect='*timedIteration*' "$bench" --benchmark_filter="$filter" \
    --benchmark_min_time=0.001 >"$out/bench.txt" 2>"$out/valgrind.log" ||
    die "valgrind failed; see $out/valgrind.log"
  # The function table of callgrind_annotate: the rows after the header
  # line that names the event (Ir).
  annotate() {
    callgrind_annotate --threshold=100 "$@" "$out/callgrind.out" |
      awk '/^-+$/ { rule++ } rule >= 3 && /^ *[0-9,]+ / { print }'
  }
  total=$(callgrind_annotate "$out/callgrind.out" |
    awk '/PROGRAM TOTALS/ { print $1 }')
  echo "## $benchmark: top $top functions by inclusive cost (callgrind, instructions; total $total)"
  echo
  # Rows of the whole total are the callers of the timed work (main, the
  # benchmark library, the benchmark function): left out.
  annotate --inclusive=yes | awk -v total="$total" '$1 != total' | first_rows
  echo
  echo "## $benchmark: top $top functions by self cost (callgrind, instructions)"
  echo
  annotate --inclusive=no | first_rows
fi
echo
echo "The benchmark's own figures under the profiler (slowed down):"
grep -E "^$function_name" "$out/bench.txt" || true
