#!/usr/bin/env bash
# Stands in for drt-conformance and drt-replay in the tests of
# CheckMutant.sh (conformance/tests/CMakeLists.txt): as the suite (called
# with --failures-dir) it reports a case that got stuck and was then shrunk,
# in child processes, to a scenario whose replay fails without getting
# stuck; with STUB_ANY_KIND=1 it says, as drt-conformance does, that the
# case diverged in the first child process and was shrunk as a failure of
# any kind. As the replay (any other call) it fails on the backend
# mutant:stub and passes on any other.
set -u
dir=
for ((i = 1; i < $#; ++i)); do
  [[ ${!i} == --failures-dir ]] && j=$((i + 1)) && dir=${!j}
done
if [[ -n $dir ]]; then
  printf 'device d0\ncreate t5 f32 [16]\n|1 to-device t5 d0\n|2 shutdown d0\n' \
    > "$dir/case-stuck-shrunk.scn"
  echo "concurrent-records on mutant:stub [default]: STUCK (case seed 1)"
  echo "step 2: |1 to-device t5 d0"
  echo "  what:     the scenario made no progress"
  echo "replay: drt-replay $dir/case-stuck.scn --backend mutant:stub"
  if [[ ${STUB_ANY_KIND:-0} == 1 ]]; then
    echo "drt-conformance: $dir/case-stuck.scn diverged from the model in a child process instead: shrunk as a failure of any kind"
  fi
  echo "minimal scenario (2 steps after 3 candidates, each in a process of its own):"
  echo "replay: drt-replay $dir/case-stuck-shrunk.scn --backend mutant:stub --repeat 10"
  exit 1
fi
for arg in "$@"; do
  if [[ $arg == mutant:stub ]]; then
    echo "$1: FAILED on mutant:stub, run 3 of 10"
    exit 1
  fi
done
echo "$1: passed"
