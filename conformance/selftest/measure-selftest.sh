#!/usr/bin/env bash
# Runs the self-test (ctest -L selftest) once per seed and prints, per mutant,
# the property that killed it, the median and largest time to detection and
# the median and largest shrunk scenario length: the table of
# docs/selftest.md.
#   conformance/selftest/measure-selftest.sh [BUILD_DIR] [SEEDS]
# BUILD_DIR defaults to build/default, SEEDS to 10. A mutant that survives a
# seed is listed with the count of seeds it survived.
set -euo pipefail
build=${1:-build/default}
seeds=${2:-10}
results=$(mktemp)
trap 'rm -f "$results"' EXIT
for seed in $(seq 1 "$seeds"); do
  DRT_SELFTEST_SEED=$seed ctest --test-dir "$build" -L selftest -j2 -V 2>&1 |
    sed -nE 's/^[0-9]+: mutant ([^ ]+) killed by ([^ ]+) in ([0-9]+) ms; minimal scenario of ([0-9]+) steps.*/\1 \2 \3 \4/p' \
      >> "$results" || true
done
tests=$(ctest --test-dir "$build" -L selftest -N | sed -nE 's/.*Test +#[0-9]+: selftest\.((backend|framework)\.[a-z0-9-]+)( .*|$)/\1/p' | sort)
printf '| mutant | caught by | median time | slowest | median steps | most steps | killed |\n'
printf '|---|---|---|---|---|---|---|\n'
for name in $tests; do
  awk -v name="$name" -v seeds="$seeds" '
    $1 == name { n++; ms[n] = $3; st[n] = $4; by[$2]++ }
    function median(a, k,   i, j, t) {
      for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++)
        if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
      return k % 2 ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2
    }
    function largest(a, k,   i, m) {
      m = a[1]; for (i = 2; i <= k; i++) if (a[i] + 0 > m + 0) m = a[i]
      return m
    }
    END {
      if (n == 0) { printf "| %s | - | - | - | - | - | 0/%d |\n", name, seeds; exit }
      best = ""; for (p in by) if (best == "" || by[p] > by[best]) best = p
      printf "| %s | %s | %.2f s | %.2f s | %g | %d | %d/%d |\n", name, best,
        median(ms, n) / 1000, largest(ms, n) / 1000, median(st, n),
        largest(st, n), n, seeds
    }' "$results"
done
