#!/usr/bin/env bash
# Runs the residency fuzz target against each self-test backend mutant for up
# to SECONDS and checks what it finds:
#   fuzz/measure-mutants.sh SECONDS [SEEDS] [MUTANT...]
# SEEDS: "ci" (default) seeds with fuzz/corpus/residency and the stored
# scenarios, as ci/fuzz does; "none" starts from an empty corpus. MUTANT
# defaults to every backend mutant (DRT_BACKEND_MUTANTS). Needs the fuzz
# preset's build (drt-fuzz-residency, drt-fuzz-to-scenario) and the default
# preset's drt-replay. For each mutant it prints one Markdown table row:
#   | mutant | found | seconds to find | inputs run | commands | replay on mutant | on reference |
# where a finding is converted by drt-fuzz-to-scenario, and the scenario must
# fail under drt-replay on the mutant and pass on the reference backend (fake,
# or opencl for an OpenCL mutant), each run as its replay command says
# (--repeat 100 for a timing-dependent scenario). Work goes to
# build/fuzz/mutants/NAME.
set -uo pipefail
cd "$(dirname "$0")/.."
seconds=${1:?usage: fuzz/measure-mutants.sh SECONDS [ci|none] [MUTANT...]}
seeds=${2:-ci}
shift $(( $# >= 2 ? 2 : 1 ))
mutants=("$@")
if [[ ${#mutants[@]} -eq 0 ]]; then
  mutants=($(sed -E 's/#.*//' conformance/CMakeLists.txt |
    sed -nE '/^set\(DRT_BACKEND_MUTANTS/,/\)/p' |
    sed -E 's/set\(DRT_BACKEND_MUTANTS//; s/\)//'))
  mutants+=(opencl-read-not-waited)
fi
# FUZZ_BUILD: the fuzz preset's build folder (default build/fuzz).
fuzz_build=${FUZZ_BUILD:-build/fuzz}
fuzzer=$fuzz_build/fuzz/drt-fuzz-residency
convert=$fuzz_build/fuzz/drt-fuzz-to-scenario
replay=build/default/conformance/drt-replay
export POCL_CACHE_DIR="$PWD/build/fuzz/pocl-cache"
# As ci/fuzz: one frame of allocation stack while fuzzing.
fuzz_asan_options="${ASAN_OPTIONS:-detect_leaks=1:quarantine_size_mb=16:malloc_context_size=1}"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}"
export LSAN_OPTIONS="suppressions=$PWD/ci/lsan.supp"

echo "| mutant | found | seconds to find | inputs run | commands | replay on mutant | on reference |"
echo "|---|---|---|---|---|---|---|"
for m in "${mutants[@]}"; do
  work=build/fuzz/mutants/$m
  rm -rf "$work" && mkdir -p "$work/corpus" "$work/findings"
  corpus=("$work/corpus")
  [[ $seeds == ci ]] && corpus+=(fuzz/corpus/residency conformance/scenarios)
  reference=fake
  [[ $m == opencl-* ]] && reference=opencl
  start=$(date +%s%N)
  ASAN_OPTIONS="$fuzz_asan_options" DRT_FUZZ_BACKEND=mutant:$m "$fuzzer" "${corpus[@]}" -max_total_time="$seconds" \
    -max_len=4096 -timeout=30 -rss_limit_mb=2048 -entropic=0 \
    -dict=fuzz/scenario.dict -artifact_prefix="$work/findings/" \
    -print_final_stats=1 > "$work/log" 2>&1
  elapsed=$(( ($(date +%s%N) - start) / 1000000 ))
  finding=$(find "$work/findings" -type f | head -1)
  runs=$(sed -nE 's/^stat::number_of_executed_units: *([0-9]+)/\1/p' "$work/log")
  if [[ -z $finding ]]; then
    echo "| $m | no | – | ${runs:-?} | – | – | – |"
    continue
  fi
  found_s=$(awk -v ms="$elapsed" 'BEGIN{printf "%.1f", ms/1000}')
  "$convert" "$finding" --backend "mutant:$m" --out "$work" --name found \
    > "$work/convert.log" 2>&1
  scn=$work/found.scn
  if [[ ! -f $scn ]]; then
    echo "| $m | yes | $found_s | ${runs:-?} | not converted | – | – |"
    continue
  fi
  commands=$(grep -cv -e '^#' -e '^device' -e '^$' "$scn")
  # A timing-dependent scenario's replay command asks for several runs.
  repeat=($(sed -nE 's/^# replay: .*(--repeat [0-9]+).*/\1/p' "$scn"))
  # A crash reproduces as the signal that ends drt-replay (status 128+N).
  "$replay" "$scn" --backend "mutant:$m" "${repeat[@]}" \
    > "$work/replay-mutant.log" 2>&1
  status=$?
  on_mutant=$([[ $status -eq 1 ]] && echo fails ||
    { [[ $status -gt 128 ]] && echo "crashes (signal $((status - 128)))"; } ||
    echo "DOES NOT FAIL")
  "$replay" "$scn" --backend "$reference" "${repeat[@]}" \
    > "$work/replay-reference.log" 2>&1
  on_reference=$([[ $? -eq 0 ]] && echo "passes ($reference)" || echo "FAILS ($reference)")
  echo "| $m | yes | $found_s | ${runs:-?} | $commands | $on_mutant | $on_reference |"
done
