#!/usr/bin/env bash
# CheckConversion.sh CONVERTER REPLAY BACKEND MODE INPUT WORKDIR
#
# Converts fuzz input INPUT, which fails on BACKEND, with CONVERTER
# (drt-fuzz-to-scenario) and checks the regression it writes:
#  MODE divergence: REPLAY is drt-replay; the scenario fails on BACKEND and
#                   passes on the fake device;
#  MODE crash:      REPLAY is the converter itself (--run-scenario); the
#                   scenario crashes BACKEND, passes on the fake device, and
#                   was shrunk.
#  MODE stuck:      REPLAY is the converter itself; a step of the scenario
#                   never returns on BACKEND (the runner reports it stuck),
#                   it passes on the fake device, and was shrunk.
#  MODE intermittent: REPLAY is the converter itself; BACKEND fails the
#                   scenario on some runs only: it fails within 100 runs
#                   there, passes 100 runs on the fake device, and its
#                   replay command asks for 100 runs when it is timing
#                   dependent (a command issued with '&');
#  MODE flaky:      as intermittent, for an input with no command issued
#                   with '&' whose first run passes: the replay command
#                   asks for 100 runs all the same.
#  MODE rare-crash: as crash, for a crash that one run in 300 shows: the
#                   replay command asks for at least 3,000 runs, in which
#                   the scenario crashes BACKEND.
#  MODE rare-divergence: as intermittent, for a divergence that one run in
#                   300 shows: the replay command asks for at least 1,000
#                   runs (ten times what the search in process took, which
#                   counts devices from where the shrink left off), in which
#                   the scenario fails on BACKEND, and it was shrunk.
set -uo pipefail
converter=$1 replay=$2 backend=$3 mode=$4 input=$5 work=$6
rm -rf "$work" && mkdir -p "$work"
fail() { echo "FAIL: $*"; exit 1; }

"$converter" "$input" --backend "$backend" --out "$work" --name found \
  > "$work/convert.out" 2>&1
status=$?
cat "$work/convert.out"
[[ $status -eq 0 ]] || fail "drt-fuzz-to-scenario exited with $status"
scn="$work/found.scn"
[[ -f "$scn" ]] || fail "no scenario written at $scn"
echo "--- $scn"; cat "$scn"
grep -q "^# replay: drt-replay $scn --backend $backend" "$scn" ||
  fail "no replay command in the scenario's header"
grep -q "^replay: drt-replay $scn --backend $backend" "$work/convert.out" ||
  fail "no replay command printed"
[[ -z $(ls "$work" | grep -v -e '^found.scn$' -e '^convert.out$') ]] ||
  fail "files left behind: $(ls "$work")"

if [[ $mode == divergence ]]; then
  grep -q "^# step [0-9]*: " "$scn" || fail "no divergence in the header"
  "$replay" "$scn" --backend "$backend" > /dev/null
  [[ $? -eq 1 ]] || fail "the scenario does not fail on $backend"
  "$replay" "$scn" --backend fake || fail "the scenario fails on fake"
elif [[ $mode == intermittent || $mode == flaky ]]; then
  grep -q "^# step [0-9]*: " "$scn" || fail "no divergence in the header"
  "$replay" --run-scenario "$scn" --backend "$backend" --repeat 100 \
    > /dev/null 2>&1
  status=$?
  [[ $status -eq 3 ]] ||
    fail "the scenario does not fail on $backend in 100 runs (exit $status)"
  "$replay" --run-scenario "$scn" --backend fake --repeat 100 > /dev/null ||
    fail "the scenario fails on fake"
  if [[ $mode == flaky ]] || grep -q ' &$' "$scn"; then
    grep -q "^# replay: .* --repeat 100$" "$scn" ||
      fail "a timing-dependent scenario's replay does not ask for 100 runs"
  fi
elif [[ $mode == rare-divergence ]]; then
  grep -q "^# step [0-9]*: " "$scn" || fail "no divergence in the header"
  runs=$(grep -m1 -oE '^# replay: .* --repeat [0-9]+$' "$scn" | grep -oE '[0-9]+$')
  (( ${runs:-0} >= 1000 )) ||
    fail "the replay command asks for ${runs:-no} repeats, fewer than 1000"
  "$replay" --run-scenario "$scn" --backend "$backend" --repeat "$runs" \
    > /dev/null 2>&1
  status=$?
  [[ $status -eq 3 ]] ||
    fail "the scenario does not fail on $backend in $runs runs (exit $status)"
  "$replay" --run-scenario "$scn" --backend fake --repeat "$runs" > /dev/null ||
    fail "the scenario fails on fake"
  commands=$(grep -cv -e '^#' -e '^device' -e '^$' "$scn")
  (( commands <= 3 )) || fail "not shrunk: $commands commands"
elif [[ $mode == stuck ]]; then
  grep -q "^# stuck at step [0-9]*: " "$scn" || fail "no stuck step in the header"
  "$replay" --run-scenario "$scn" --backend "$backend" --stuck-after-ms 2000 \
    > /dev/null 2>&1
  status=$?
  [[ $status -eq 5 ]] || fail "the scenario does not get stuck on $backend (exit $status)"
  "$replay" --run-scenario "$scn" --backend fake ||
    fail "the scenario fails on fake"
  commands=$(grep -cv -e '^#' -e '^device' -e '^$' "$scn")
  (( commands <= 3 )) || fail "not shrunk: $commands commands"
else
  grep -q "^# the backend crashed: killed by signal 6" "$scn" ||
    fail "no crash in the header"
  repeat=()
  if [[ $mode == rare-crash ]]; then
    runs=$(grep -m1 -oE '^# replay: .* --repeat [0-9]+$' "$scn" | grep -oE '[0-9]+$')
    (( ${runs:-0} >= 3000 )) ||
      fail "the replay command asks for ${runs:-no} repeats, fewer than 3000"
    repeat=(--repeat "$runs")
  fi
  "$replay" --run-scenario "$scn" --backend "$backend" "${repeat[@]}" \
    > /dev/null 2>&1
  status=$?
  [[ $status -ne 0 && $status -ne 3 && $status -ne 4 ]] ||
    fail "the scenario does not crash $backend (exit $status)"
  "$replay" --run-scenario "$scn" --backend fake "${repeat[@]}" > /dev/null ||
    fail "the scenario fails on fake"
  commands=$(grep -cv -e '^#' -e '^device' -e '^$' "$scn")
  (( commands <= 3 )) || fail "not shrunk: $commands commands"
fi
echo "PASS"
