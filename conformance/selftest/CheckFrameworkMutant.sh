#!/usr/bin/env bash
# Runs the conformance suite on the fake device with a mutant build of the
# framework and passes only if the suite fails, reports a minimal scenario,
# and that scenario fails again under drt-replay on the mutant while passing
# on the real framework.
#   CheckFrameworkMutant.sh NAME MUTANT_DIR DRT_CONFORMANCE DRT_REPLAY
set -u
name=$1 dir=$2 conformance=$3 replay=$4
if [[ -f $dir/PATCH_FAILED ]]; then
  cat "$dir/PATCH_FAILED"
  exit 1
fi
work=$dir/run
rm -rf "$work" && mkdir -p "$work"
start=$(date +%s%N)
LD_LIBRARY_PATH=$dir/lib timeout 300 "$conformance" --backend fake \
  --failures-dir "$work" > "$work/conformance.log" 2>&1
rc=$?
elapsed_ms=$(( ($(date +%s%N) - start) / 1000000 ))
if [[ $rc -eq 0 ]]; then
  echo "mutant $name survived: the suite passed on it"
  exit 1
fi
line=$(grep -m1 -oE 'replay: drt-replay [^ ]+ --backend [^ ]+' "$work/conformance.log")
if [[ -z $line ]]; then
  echo "mutant $name: the suite exited $rc without a replayable scenario"
  tail -n 20 "$work/conformance.log"
  exit 1
fi
file=$(awk '{print $3}' <<< "$line")
steps=$(grep -m1 -oE 'minimal scenario \([0-9]+ steps' "$work/conformance.log" | grep -oE '[0-9]+')
if LD_LIBRARY_PATH=$dir/lib "$replay" "$file" --backend fake > "$work/replay-mutant.log" 2>&1; then
  echo "mutant $name: $file passes under drt-replay on the mutant"
  exit 1
fi
if ! "$replay" "$file" --backend fake > "$work/replay-real.log" 2>&1; then
  echo "mutant $name: $file fails on the real framework too"
  cat "$work/replay-real.log"
  exit 1
fi
grep -m1 -E '^\[ *[0-9]+/[0-9]+\] .*failed' "$work/conformance.log"
echo "mutant $name killed in ${elapsed_ms} ms; minimal scenario of ${steps:-?} steps: $file"
