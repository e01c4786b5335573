#!/usr/bin/env bash
# Builds the conformance suite once per source mutant of the OpenCL backend
# (a patch under conformance/selftest/opencl-source-mutants/: a bug in code a
# subclass cannot reach, such as the staging ring or the block pool) and runs
# it on OpenCL (POCL) against the fake device for each seed; prints, per
# mutant, the seeds that killed it and the first failing property and
# configuration of each.
#   conformance/selftest/measure-opencl-source-mutants.sh [SEEDS] [PATCH...]
# SEEDS defaults to 3, the patches to every one in that folder. The tree is
# the committed HEAD, exported into a temporary folder (removed at the end;
# KEEP=1 keeps it); the first mutant builds drt-conformance (some minutes
# on two cores), each later one recompiles what its patch touches. A patch
# that no longer applies is reported as such.
set -euo pipefail
root=$(git -C "$(dirname "${BASH_SOURCE[0]}")" rev-parse --show-toplevel)
cd "$root"
seeds=${1:-3}
shift || true
[[ $seeds =~ ^[1-9][0-9]*$ ]] || {
  echo "measure-opencl-source-mutants.sh: SEEDS must be a positive number, not '$seeds'" >&2
  exit 2
}
patches=("$@")
[[ ${#patches[@]} -gt 0 ]] ||
  patches=(conformance/selftest/opencl-source-mutants/*.patch)
work=$(mktemp -d)
[[ ${KEEP:-0} == 1 ]] || trap 'rm -rf "$work"' EXIT
jobs=$(nproc)

src="$work/src"
build="$work/build"
mkdir -p "$src"
git archive HEAD | tar -x -C "$src"
printf '| mutant | killed | first failure per seed |\n|---|---|---|\n'
for patch in "${patches[@]}"; do
  name=$(basename "$patch" .patch)
  mkdir -p "$work/$name"
  # One build folder for all: a mutant recompiles only what its patch
  # touches, and is reverted before the next one is applied.
  if ! patch -s -p1 -d "$src" < "$patch" > "$work/$name/patch.log" 2>&1; then
    printf '| %s | - | the patch does not apply: %s |\n' "$name" \
      "$(head -1 "$work/$name/patch.log")"
    continue
  fi
  if ! { cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DDRT_BUILD_TESTS=OFF -DDRT_BUILD_BENCHMARKS=OFF &&
      nice cmake --build "$build" -j "$jobs" --target drt-conformance; } \
      > "$work/$name/build.log" 2>&1; then
    printf '| %s | - | does not build (%s) |\n' "$name" "$work/$name/build.log"
    patch -s -R -p1 -d "$src" < "$patch"
    continue
  fi
  killed=0
  firsts=()
  for seed in $(seq 1 "$seeds"); do
    log="$work/$name/seed-$seed.log"
    POCL_CACHE_DIR="$build/pocl-cache" "$build/conformance/drt-conformance" \
      --backend opencl --against fake --seed "$seed" --fail-fast \
      --failures-dir "$work/$name/failures-$seed" > "$log" 2>&1 && rc=0 || rc=$?
    if [[ $rc -eq 0 ]]; then
      firsts+=("seed $seed: survived")
      continue
    fi
    killed=$((killed + 1))
    first=$(sed -nE 's/^\[ *[0-9]+\/[0-9]+\] ([^ ]+) on opencl \[([^]]*)\].*FAILED.*/\1 [\2]/p' "$log" | head -1)
    firsts+=("seed $seed: ${first:-failed (see $log)}")
  done
  patch -s -R -p1 -d "$src" < "$patch"
  joined=$(printf '%s; ' "${firsts[@]}")
  printf '| %s | %d/%d | %s |\n' "$name" "$killed" "$seeds" "${joined%; }"
done
