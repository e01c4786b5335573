#!/usr/bin/env bash
# Builds the conformance suite once per source mutant (a patch applied with
# `patch -p1` at the repository's root: a bug in code a subclass cannot
# reach, such as the OpenCL backend's staging ring or block pool, the fake
# device's allocator, or the framework) and runs the default conformance
# run for each seed; prints, per mutant, the seeds that killed it and the
# first failing property and configuration of each.
#   conformance/selftest/measure-source-mutants.sh [SEEDS] [PATCH...]
# SEEDS defaults to 3, the patches to every one in
# conformance/selftest/opencl-source-mutants/, fake-source-mutants/ and
# framework-source-mutants/ (the framework's bugs that are not self-tests:
# those are in framework-mutants/, relative to framework/). A patch that touches
# backends/opencl runs on OpenCL (POCL) against the fake device; one of the
# example backend (host-heap-mutants/: bugs a developer of a new backend
# makes) builds it as a plugin and runs on it; any other runs on the fake
# device alone (RUN_ARGS, such as "--backend opencl --against fake", chooses
# for every patch instead). The tree is
# the committed HEAD, exported into a temporary folder (removed at the end;
# KEEP=1 keeps it; WORK_DIR=DIR uses DIR instead and keeps its build); the
# first mutant builds drt-conformance (some minutes on two cores), each
# later one recompiles what its patch touches. A patch that no longer
# applies is reported as such.
set -euo pipefail
root=$(git -C "$(dirname "${BASH_SOURCE[0]}")" rev-parse --show-toplevel)
cd "$root"
seeds=${1:-3}
shift || true
[[ $seeds =~ ^[1-9][0-9]*$ ]] || {
  echo "measure-source-mutants.sh: SEEDS must be a positive number, not '$seeds'" >&2
  exit 2
}
patches=("$@")
[[ ${#patches[@]} -gt 0 ]] ||
  patches=(conformance/selftest/opencl-source-mutants/*.patch
    conformance/selftest/fake-source-mutants/*.patch
    conformance/selftest/framework-source-mutants/*.patch)
if [[ -n ${WORK_DIR:-} ]]; then
  work=$WORK_DIR
  mkdir -p "$work"
else
  work=$(mktemp -d)
  [[ ${KEEP:-0} == 1 ]] || trap 'rm -rf "$work"' EXIT
fi
jobs=$(nproc)
# Two devices of one POCL platform, as ci/conformance runs them.
export POCL_DEVICES="${POCL_DEVICES:-pthread pthread}"

src="$work/src"
build="$work/build"
# A kept tree takes only the files that differ from HEAD's, so that its
# build recompiles only what changed.
rm -rf "$work/head"
mkdir -p "$src" "$work/head"
git archive HEAD | tar -x -C "$work/head"
(cd "$work/head" && find . -type f) | while read -r f; do
  cmp -s "$work/head/$f" "$src/$f" ||
    { mkdir -p "$(dirname "$src/$f")" && cp "$work/head/$f" "$src/$f"; }
done
rm -rf "$work/head"
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
  # The example backend is a plugin of its own, built here against the
  # tree's framework as a backend developer builds theirs.
  plugin=()
  if grep -q '^+++ [^ ]*examples/out-of-tree-backend/' "$patch"; then
    if ! nice c++ -std=c++20 -O2 -g -fPIC -shared \
        -I"$src/framework/include" \
        "$src/examples/out-of-tree-backend/HostHeapDevice.cpp" \
        -o "$work/$name/host-heap.so" -L"$build/lib" -ldrt_framework \
        -Wl,-rpath,"$build/lib" > "$work/$name/plugin.log" 2>&1; then
      printf '| %s | - | the plugin does not build (%s) |\n' "$name" \
        "$work/$name/plugin.log"
      patch -s -R -p1 -d "$src" < "$patch"
      continue
    fi
    plugin=(--plugin "$work/$name/host-heap.so")
  fi
  if [[ -n ${RUN_ARGS:-} ]]; then
    read -r -a run <<< "$RUN_ARGS"
  elif [[ ${#plugin[@]} -gt 0 ]]; then
    run=(--backend host-heap)
  elif grep -q '^+++ [^ ]*backends/opencl/' "$patch"; then
    run=(--backend opencl --against fake)
  else
    run=(--backend fake)
  fi
  run=("${plugin[@]}" "${run[@]}")
  killed=0
  firsts=()
  for seed in $(seq 1 "$seeds"); do
    log="$work/$name/seed-$seed.log"
    POCL_CACHE_DIR="$build/pocl-cache" "$build/conformance/drt-conformance" \
      "${run[@]}" --seed "$seed" --fail-fast \
      --failures-dir "$work/$name/failures-$seed" > "$log" 2>&1 && rc=0 || rc=$?
    if [[ $rc -eq 0 ]]; then
      firsts+=("seed $seed: survived")
      continue
    fi
    killed=$((killed + 1))
    first=$(sed -nE 's/^\[ *[0-9]+\/[0-9]+\] ([^ ]+) on [^ ]+ \[([^]]*)\].*FAILED.*/\1 [\2]/p' "$log" | head -1)
    firsts+=("seed $seed: ${first:-failed (see $log)}")
  done
  patch -s -R -p1 -d "$src" < "$patch"
  joined=$(printf '%s; ' "${firsts[@]}")
  printf '| %s | %d/%d | %s |\n' "$name" "$killed" "$seeds" "${joined%; }"
done
