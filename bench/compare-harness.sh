#!/usr/bin/env bash
# compare-harness.sh BASE_REV [BENCH ARGS...]
#
# Measures the conformance harness of the working tree against BASE_REV in
# one run: builds drt-bench-harness and drt-harness-memory of the working tree
# (in build/default) and of BASE_REV (a temporary detached worktree, with the
# working tree's bench/ copied over its own so that both measure the same
# thing), runs the two in turn REPS times (each benchmark in a process of
# its own, base and new right after each other, the first of the pair
# alternating) and prints Markdown tables of medians: steps per second per
# benchmark, the wall time of the live-tensors scenarios, and the peak
# memory of drt-harness-memory per tensor size.
#
# BENCH ARGS go to both drt-bench-harness runs, e.g.
#   --benchmark_filter='BM_(Generated|Replay)'
#
# Environment:
#   REPS          runs of every benchmark per side (default 3)
#   MEMORY_SIZES  tensor sizes for drt-harness-memory (default "64M 256M";
#                 empty: none)
#   MEMORY_REPS   repetitions of each memory run per side (default 1; peak
#                 memory barely varies between runs)
#   JOBS          build parallelism (default 2)
#   INSTRUCTIONS_FILTER
#                 the benchmarks whose instructions per step are counted
#                 with callgrind, once per side (deterministic, so a busy
#                 machine does not disturb them; about 50 times slower);
#                 default: the fake-device benchmarks that take less than a
#                 second; empty: none. BENCH ARGS do not apply to them.
#   SCENARIO_DIR  stored scenarios both sides replay (default: BASE_REV's
#                 conformance/scenarios, which both revisions can parse)
#   OUT_DIR       where raw results, logs and summary.md go (default
#                 build/compare-harness/<time>)
set -euo pipefail

program=compare-harness.sh
die() {
  echo "$program: $*" >&2
  exit 1
}
usage() {
  sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' >&2
  exit 2
}

[[ $# -ge 1 && $1 != -h && $1 != --help ]] || usage
base_rev=$1
shift
bench_args=("$@")
reps=${REPS:-3}
memory_sizes=${MEMORY_SIZES-64M 256M}
memory_reps=${MEMORY_REPS:-1}
jobs=${JOBS:-2}
instructions_filter=${INSTRUCTIONS_FILTER-^BM_(GeneratedSteps/fake|GenerateOnly/fake|RunGeneratedOnly/fake|ReplaySteps/fake|LiveTensors/(100|200)|TensorBytes/(4096|1048576))/}
[[ $reps =~ ^[1-9][0-9]*$ ]] || die "REPS must be a positive number, not '$reps'"
[[ $memory_reps =~ ^[1-9][0-9]*$ ]] ||
  die "MEMORY_REPS must be a positive number, not '$memory_reps'"
[[ $jobs =~ ^[1-9][0-9]*$ ]] || die "JOBS must be a positive number, not '$jobs'"

for tool in git cmake ninja python3; do
  command -v "$tool" >/dev/null || die "'$tool' is needed but not on PATH"
done
if [[ -n $instructions_filter ]] && ! command -v valgrind >/dev/null; then
  die "valgrind is needed to count instructions (INSTRUCTIONS_FILTER=" \
    "counts none)"
fi

script_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(git -C "$script_dir" rev-parse --show-toplevel 2>/dev/null) ||
  die "$script_dir is not inside a git checkout"
base_commit=$(git -C "$root" rev-parse --verify --quiet "$base_rev^{commit}") ||
  die "'$base_rev' is not a commit of the repository at $root"
new_commit=$(git -C "$root" rev-parse HEAD)
new_label="working tree at ${new_commit:0:10}"
if [[ -n $(git -C "$root" status --porcelain --untracked-files=no) ]]; then
  new_label+=" with uncommitted changes"
fi
base_label="${base_commit:0:10} ($base_rev: $(git -C "$root" log -1 --format=%s "$base_commit"))"

out=${OUT_DIR:-$root/build/compare-harness/$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out" || die "cannot create the output folder $out"
out=$(cd "$out" && pwd)

work=$(mktemp -d "${TMPDIR:-/tmp}/drt-compare-harness.XXXXXX")
base_tree=$work/base
cleanup() {
  local status=$?
  if [[ -d $base_tree ]]; then
    git -C "$root" worktree remove --force "$base_tree" >/dev/null 2>&1 ||
      echo "$program: could not remove the worktree $base_tree" >&2
  fi
  git -C "$root" worktree prune >/dev/null 2>&1 || true
  rm -rf "$work"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Runs "$@" with its output in $out/$1.log (the first argument names the
# log); on failure shows the log's end and stops.
logged() {
  local name=$1
  shift
  if ! "$@" >"$out/$name.log" 2>&1; then
    echo "$program: '$*' failed; the end of $out/$name.log:" >&2
    tail -n 40 "$out/$name.log" >&2
    exit 1
  fi
}

targets=(drt-bench-harness drt-harness-memory)

echo "$program: building the working tree in $root/build/default" >&2
# Configures the source tree $1 with the default preset and options $2...
configure_in() (
  cd "$1"
  shift
  cmake --preset default "$@"
)
if [[ ! -f $root/build/default/CMakeCache.txt ]]; then
  logged configure-new configure_in "$root"
fi
logged build-new cmake --build "$root/build/default" -j "$jobs" \
  --target "${targets[@]}"

echo "$program: building $base_label in $base_tree" >&2
logged worktree git -C "$root" worktree add --detach "$base_tree" "$base_commit"
# The same benchmark sources on both sides: the working tree's bench/ over
# the base's.
mkdir -p "$base_tree/bench"
cp -a "$root/bench/." "$base_tree/bench/"
logged configure-base configure_in "$base_tree" -DDRT_BUILD_FRAMEWORK_MUTANTS=OFF
logged build-base cmake --build "$base_tree/build/default" -j "$jobs" \
  --target "${targets[@]}"

# Both sides must be built alike, or the comparison measures the flags.
cache_value() {
  sed -n "s/^$2:[A-Z]*=//p" "$1/CMakeCache.txt"
}
for key in CMAKE_BUILD_TYPE CMAKE_CXX_COMPILER CMAKE_CXX_FLAGS DRT_SANITIZE; do
  new_value=$(cache_value "$root/build/default" "$key")
  base_value=$(cache_value "$base_tree/build/default" "$key")
  [[ $new_value == "$base_value" ]] ||
    die "build/default has $key='$new_value' but the base build has" \
      "'$base_value'; configure build/default with the default preset"
done

declare -A bench_bin memory_bin
bench_bin[new]=$root/build/default/bench/drt-bench-harness
bench_bin[base]=$base_tree/build/default/bench/drt-bench-harness
memory_bin[new]=$root/build/default/bench/drt-harness-memory
memory_bin[base]=$base_tree/build/default/bench/drt-harness-memory
for side in base new; do
  [[ -x ${bench_bin[$side]} && -x ${memory_bin[$side]} ]] ||
    die "the $side build has no ${targets[*]} (is DRT_BUILD_BENCHMARKS off?)"
done

export DRT_BENCH_SCENARIO_DIR=${SCENARIO_DIR:-$base_tree/conformance/scenarios}
[[ -d $DRT_BENCH_SCENARIO_DIR ]] ||
  die "no scenario folder $DRT_BENCH_SCENARIO_DIR"

# Every benchmark runs in a process of its own, base and new right after
# each other (the first of the pair alternating between repetitions), so
# that both see about the same load on a shared machine, and each starts
# with a fresh process (peak memory, allocator state).
mapfile -t benchmarks < <("${bench_bin[new]}" "${bench_args[@]}" \
  --benchmark_list_tests)
[[ ${#benchmarks[@]} -gt 0 ]] ||
  die "no benchmark of drt-bench-harness matches: ${bench_args[*]}"

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
started=$SECONDS
for ((rep = 1; rep <= reps; ++rep)); do
  sides=(base new)
  ((rep % 2)) || sides=(new base)
  for ((index = 0; index < ${#benchmarks[@]}; ++index)); do
    name=${benchmarks[$index]}
    for side in "${sides[@]}"; do
      echo "$program: repetition $rep of $reps: ${name%%/process_time*}," \
        "$side" >&2
      logged "bench-$side-$rep-$index" "${bench_bin[$side]}" \
        "${bench_args[@]}" --benchmark_filter="^$name\$" \
        --benchmark_out="$out/bench-$side-$rep-$index.json" \
        --benchmark_out_format=json
    done
  done
done
for ((rep = 1; rep <= memory_reps; ++rep)); do
  for size in $memory_sizes; do
    for side in base new; do
      echo "$program: drt-harness-memory $size, repetition $rep of" \
        "$memory_reps, $side" >&2
      if ! "${memory_bin[$side]}" "$size" >"$out/memory-$side-$size-$rep.txt" \
        2>"$out/memory-$side-$size-$rep.err"; then
        echo "$program: drt-harness-memory $size failed on the $side side:" >&2
        cat "$out/memory-$side-$size-$rep.err" >&2
        exit 1
      fi
    done
  done
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

# Instructions executed inside the timed loop (ScenarioBench.cpp's
# timedIteration) over one iteration; the benchmark reports how many
# iterations and commands that was.
counted=()
if [[ -n $instructions_filter ]]; then
  mapfile -t counted < <("${bench_bin[new]}" \
    --benchmark_filter="$instructions_filter" --benchmark_list_tests)
fi
for ((index = 0; index < ${#counted[@]}; ++index)); do
  name=${counted[$index]}
  for side in base new; do
    echo "$program: instructions of ${name%%/process_time*}, $side" >&2
    logged "instructions-$side-$index" valgrind --tool=callgrind \
      --callgrind-out-file="$out/callgrind-$side-$index.out" \
      --toggle-collect='*timedIteration*' "${bench_bin[$side]}" \
      --benchmark_filter="^$name\$" --benchmark_min_time=0.001 \
      --benchmark_out="$out/instructions-$side-$index.json" \
      --benchmark_out_format=json
  done
done

cpu=$(sed -n 's/^model name[[:space:]]*: //p; T; q' /proc/cpuinfo)
NEW_LABEL=$new_label BASE_LABEL=$base_label CPU="$(nproc) cores, $cpu" \
  LOAD="$load_before before, $load_after after" \
  python3 - "$out" "$reps" "$memory_reps" "$memory_sizes" <<'EOF' >"$out/summary.md"
import glob, json, os, re, statistics, sys

out, reps, memory_reps, sizes = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4].split()
env = os.environ
to_seconds = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}

def runs(side):
    """name -> list of (items/s by wall time, items/s by CPU time, seconds per iteration) or an error."""
    found, errors, order = {}, {}, []
    files = sorted(glob.glob(os.path.join(out, f"bench-{side}-*.json")),
                   key=lambda p: [int(x) for x in re.findall(r"\d+", os.path.basename(p))])
    for path in files:
        with open(path) as f:
            for b in json.load(f)["benchmarks"]:
                if b.get("run_type") == "aggregate":
                    continue
                name = re.sub(r"(/process_time)?(/real_time)?$", "", b["name"])
                if name not in order:
                    order.append(name)
                if b.get("error_occurred"):
                    errors[name] = b.get("error_message", "error")
                    continue
                seconds = b["real_time"] * to_seconds[b["time_unit"]]
                cpu = b["cpu_time"] * to_seconds[b["time_unit"]]
                rate = b.get("items_per_second")
                if rate is None:
                    continue
                found.setdefault(name, []).append((rate, rate * seconds / cpu if cpu else 0.0, seconds))
    return found, errors, order

def fmt(x):
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(x) >= scale:
            return f"{x / scale:.3g}{unit}"
    return f"{x:.3g}"

def spread(values):
    m = statistics.median(values)
    return f"{100 * (max(values) - min(values)) / m:.0f}%" if m else "-"

base, base_errors, base_order = runs("base")
new, new_errors, new_order = runs("new")
names = new_order + [n for n in base_order if n not in new_order]

print(f"## Harness speed: {env['NEW_LABEL']} against {env['BASE_LABEL']}")
print()
print(f"Machine: {env['CPU']}; load average {env['LOAD']}.")
print(f"Medians of {reps} runs per side; each benchmark ran in a process of its own, base and new in turn;")
print("'spread' is (max - min) / median, base then new.")
print("items/s are scenario commands per second of wall time; the CPU columns compare commands per second of")
print("the process's CPU time (all its threads), which a busy machine disturbs far less, but which leaves out")
print("time spent waiting.")
print()
print("| benchmark | base items/s | new items/s | new/base | spread | CPU new/base | CPU spread |")
print("|---|---|---|---|---|---|---|")
for name in names:
    if name not in base or name not in new:
        why = "; ".join(f"{side}: {errors[name]}" for side, errors in (("base", base_errors), ("new", new_errors)) if name in errors)
        print(f"| {name} | skipped: {why or 'not run on both sides'} ||||||")
        continue
    b = [r[0] for r in base[name]]
    n = [r[0] for r in new[name]]
    bc = [r[1] for r in base[name]]
    nc = [r[1] for r in new[name]]
    cpu_ratio = statistics.median(nc) / statistics.median(bc) if statistics.median(bc) else 0
    print(f"| {name} | {fmt(statistics.median(b))} | {fmt(statistics.median(n))} | "
          f"{statistics.median(n) / statistics.median(b):.2f} | {spread(b)}, {spread(n)} | "
          f"{cpu_ratio:.2f} | {spread(bc)}, {spread(nc)} |")

def instructions(side):
    """name -> instructions per command, or the error message."""
    counts = {}
    for path in glob.glob(os.path.join(out, f"instructions-{side}-*.json")):
        index = re.search(r"-(\d+)\.json$", path).group(1)
        with open(os.path.join(out, f"callgrind-{side}-{index}.out")) as f:
            total = next(int(line.split()[1]) for line in f if line.startswith("summary:"))
        with open(path) as f:
            for b in json.load(f)["benchmarks"]:
                name = re.sub(r"(/process_time)?(/real_time)?$", "", b["name"])
                if b.get("error_occurred"):
                    counts[name] = b.get("error_message", "error")
                else:
                    counts[name] = total / (b["iterations"] * b["commands"])
    return counts

base_instructions, new_instructions = instructions("base"), instructions("new")
if new_instructions:
    print()
    print("Instructions per scenario command inside the timed loop (callgrind, one run per side; deterministic")
    print("to about 0.1%, whatever the load):")
    print()
    print("| benchmark | base instructions/step | new instructions/step | new/base |")
    print("|---|---|---|---|")
    for name in sorted(new_instructions, key=lambda n: names.index(n) if n in names else len(names)):
        b, n = base_instructions.get(name), new_instructions[name]
        if isinstance(b, float) and isinstance(n, float):
            print(f"| {name} | {fmt(b)} | {fmt(n)} | {n / b:.3f} |")
        else:
            print(f"| {name} | {b} | {n} | |")

live = [n for n in names if n.startswith("BM_LiveTensors/") and n in base and n in new]
if live:
    print()
    print("Wall time of one live-tensors scenario (N creates, N to-devices, the runner's read-back and teardown) on fake:")
    print()
    print("| N | base s | new s | base/new |")
    print("|---|---|---|---|")
    for name in live:
        b = statistics.median(r[2] for r in base[name])
        n = statistics.median(r[2] for r in new[name])
        print(f"| {name.split('/')[1]} | {b:.3g} | {n:.3g} | {b / n:.1f}x |")

def memory(side, size):
    values = {}
    for rep in range(1, memory_reps + 1):
        with open(os.path.join(out, f"memory-{side}-{size}-{rep}.txt")) as f:
            for line in f:
                key, _, value = line.strip().partition("=")
                values.setdefault(key, []).append(float(value))
    return {k: statistics.median(v) for k, v in values.items()}

if sizes:
    print()
    print(f"drt-harness-memory (one tensor's round trip on fake; median of {memory_reps} run(s) per side):")
    print()
    print("| tensor | base peak RSS | base peak/size | base s | new peak RSS | new peak/size | new s | new/base peak |")
    print("|---|---|---|---|---|---|---|---|")
    for size in sizes:
        b, n = memory("base", size), memory("new", size)
        mib = lambda x: f"{x / 2**20:.0f} MiB"
        print(f"| {size} | {mib(b['peak_rss_bytes'])} | {b['peak_ratio']:.2f} | {b['seconds']:.3g} | "
              f"{mib(n['peak_rss_bytes'])} | {n['peak_ratio']:.2f} | {n['seconds']:.3g} | "
              f"{n['peak_rss_bytes'] / b['peak_rss_bytes']:.2f} |")
EOF
cat "$out/summary.md"
echo "$program: took $((SECONDS - started)) s of runs; raw results in $out" >&2
