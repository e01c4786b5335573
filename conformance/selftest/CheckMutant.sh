#!/usr/bin/env bash
# Runs the conformance suite against one mutant and passes only if the suite
# fails on it, reports a minimal scenario of at most 8 steps with its replay
# command, and that scenario fails again under drt-replay on the mutant while
# passing on the reference backend with the real framework.
#   CheckMutant.sh NAME BACKEND REFERENCE FRAMEWORK_DIR WORK_DIR \
#                  DRT_CONFORMANCE DRT_REPLAY
# BACKEND is the backend the suite runs on ("mutant:double-free", or "fake"
# for a framework mutant); REFERENCE the one the scenario must pass on.
# FRAMEWORK_DIR is a framework mutant's build directory (its lib/ replaces
# libdrt_framework.so), or "-" for a backend mutant. DRT_SELFTEST_SEED picks
# the seed (default 1). The last line says what killed the mutant and when:
#   mutant NAME killed by PROPERTY in MS ms; minimal scenario of N steps: FILE
# A mutant whose call never returns, or that crashes, is killed when the
# suite reports the step STUCK or CRASHED and shrinks the case in child
# processes (drt-fuzz-to-scenario, which the suite turns into) to at most 8
# steps, whose replay ends the same way on the mutant and passes on
# REFERENCE. DRT_SELFTEST_STUCK_AFTER (seconds) is the suite's and the
# replay's --stuck-after, for a mutant known to get stuck.
set -u
name=$1 backend=$2 reference=$3 framework=$4 work=$5 conformance=$6 replay=$7
seed=${DRT_SELFTEST_SEED:-1}
mutant_env=()
if [[ $framework != - ]]; then
  if [[ -f $framework/PATCH_FAILED ]]; then
    cat "$framework/PATCH_FAILED"
    exit 1
  fi
  mutant_env=(env "LD_LIBRARY_PATH=$framework/lib")
fi
rm -rf "$work" && mkdir -p "$work"
log=$work/conformance.log
start=$(date +%s%N)
# Half the default run's second per property, so that a mutant killed here
# is killed by the default run (whose cases begin with these) and the
# self-tests keep their time in ctest. A sanitizer build runs several times
# slower: its test preset gives each property more time
# (DRT_SELFTEST_TIME_BUDGET seconds), so that the suite reaches about that
# depth there too.
budget=(--time-budget "${DRT_SELFTEST_TIME_BUDGET:-0.5}")
# The largest minimal scenario that passes. A sanitizer build makes a
# failure that needs two threads to overlap rarer, so that the shrinker,
# which keeps a smaller candidate only when it fails again, stops earlier:
# its test preset may allow more (DRT_SELFTEST_MAX_STEPS).
max_steps=${DRT_SELFTEST_MAX_STEPS:-8}
stuck=()
[[ -n ${DRT_SELFTEST_STUCK_AFTER:-} ]] &&
  stuck=(--stuck-after "$DRT_SELFTEST_STUCK_AFTER")
"${mutant_env[@]}" timeout 300 "$conformance" --backend "$backend" \
  --seed "$seed" --fail-fast "${budget[@]}" "${stuck[@]}" \
  --failures-dir "$work" > "$log" 2>&1
rc=$?
elapsed_ms=$(( ($(date +%s%N) - start) / 1000000 ))
if [[ $rc -eq 0 ]]; then
  echo "mutant $name survived: the suite passed on it"
  exit 1
fi
# The replay command names the file, the backend and the configuration the
# failure was found in (--param KEY=VALUE ...); of a stuck or crashed case,
# the last one is the shrunk scenario's.
line=$(grep -oE 'replay: drt-replay [^ ]+ --backend .*' "$log" | tail -n 1)
if [[ -z $line ]]; then
  echo "mutant $name: the suite exited $rc without a replayable scenario"
  tail -n 20 "$log"
  exit 1
fi
if ! grep -q -E '^  what: ' "$log"; then
  echo "mutant $name: the suite failed without a divergence (a setup error?)"
  tail -n 20 "$log"
  exit 1
fi
read -r -a replay_args <<< "${line#replay: drt-replay }"
replay_args+=("${stuck[@]}")
file=${replay_args[0]}
# The same command with the reference backend in place of the mutant.
reference_args=("${replay_args[@]}")
for i in "${!reference_args[@]}"; do
  if [[ ${reference_args[$i]} == --backend ]]; then
    reference_args[$((i + 1))]=$reference
  fi
done
property=$(grep -m1 -E '^\[ *[0-9]+/[0-9]+\] [a-z-]+ on .*: FAILED' "$log" |
  sed -E 's/^\[ *[0-9]+\/[0-9]+\] ([a-z-]+) on .*/\1/')
steps=$(grep -m1 -oE 'minimal scenario \([0-9]+ steps' "$log" | grep -oE '[0-9]+')
grep -m1 -A6 -E ': FAILED' "$log"
# A step that never returned, or crashed, ends the run with the case up to
# that step, which the shrinker then shrinks a process per candidate.
aborted=$(grep -m1 -oE '^[a-z-]+ on .*: (STUCK|CRASHED)' "$log")
verdict=${aborted##*: }
if [[ -n $aborted ]]; then
  property=${aborted%% *}
  grep -m1 -A8 -E ': (STUCK|CRASHED)' "$log"
  if [[ $file != *-shrunk.scn ]]; then
    echo "mutant $name: the $verdict case was not shrunk"
    tail -n 20 "$log"
    exit 1
  fi
  steps=$(grep -cvE '^(#|device |$)' "$file")
  grep -m1 -A10 -E '^minimal scenario \(' "$log"
fi
# A scenario whose failure depends on timing may pass every repetition of
# one process and fail in the next (runs-out-of-order's did): it has three
# processes to fail in.
# A parallel block's failure depends on the interleaving, which a loaded
# machine changes: its replay gets more processes to fail in.
# Its shrinking keeps a smaller candidate only when that fails again, so
# it stops at a larger scenario: one of up to 12 steps passes.
# A scenario on an asynchronous device (completions on a worker thread, the
# fake device's async=1) hangs on the scheduler too: as many processes.
tries=3
if grep -q '^|' "$file"; then
  tries=10
  ((max_steps < 12)) && max_steps=12
elif grep -qE 'async=1' <<< "$line" || grep -qE '^device .*async=1' "$file"; then
  tries=10
fi
replayed_passes=0
while ((replayed_passes < tries)) &&
  "${mutant_env[@]}" "$replay" "${replay_args[@]}" \
    > "$work/replay-mutant.log" 2>&1; do
  replayed_passes=$((replayed_passes + 1))
done
if ((replayed_passes == tries)); then
  echo "mutant $name: ${line#replay: } passes on the mutant"
  exit 1
fi
# A case that got stuck or crashed in the suite but diverged from the model
# in the shrinker's first child process (the same bug, met at another point
# of the interleaving) is shrunk as a failure of any kind: its replay must
# fail, in whichever way.
any_kind=
grep -q 'shrunk as a failure of any kind' "$log" && any_kind=1
if [[ -n $aborted && -z $any_kind ]] &&
  ! grep -q ": $verdict" "$work/replay-mutant.log"; then
  echo "mutant $name: ${line#replay: } fails on the mutant, but not $verdict"
  cat "$work/replay-mutant.log"
  exit 1
fi
if ! "$replay" "${reference_args[@]}" > "$work/replay-reference.log" 2>&1; then
  echo "mutant $name: $file fails on $reference with the real framework too"
  cat "$work/replay-reference.log"
  exit 1
fi
if [[ -z $steps || $steps -gt $max_steps ]]; then
  echo "mutant $name: the minimal scenario has ${steps:-an unknown number of} steps, more than $max_steps"
  exit 1
fi
echo "mutant $name killed by $property in ${elapsed_ms} ms; minimal scenario of $steps steps: $file${verdict:+ ($verdict; the time includes the shrinking)}"
