#!/usr/bin/env python3
"""Writes the Markdown tables of drt-bench-transfer results.

    bench/transfer-table.py RESULT.json [CUDA.json]

RESULT.json is drt-bench-transfer's --benchmark_format=json output (with
repetitions, the medians are used); CUDA.json, when given, is the output of
drt-cuda-memcpy-bench (bench/cuda/), in the same format. Ratios are of
throughput (time of the reference / time of drt): 1.0 is the reference's
speed, above 1.0 faster. Chain ratios are of time (drt / raw): below 1.0
is faster.
"""
import json
import sys


def load(path):
    with open(path) as f:
        data = json.load(f)
    times = {}
    counters = {}
    for b in data["benchmarks"]:
        if b.get("run_type") == "aggregate" and b.get("aggregate_name") != "median":
            continue
        name = b.get("run_name", b["name"]).replace("/manual_time", "")
        scale = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}[b.get("time_unit", "us")]
        if "error_occurred" in b and b["error_occurred"]:
            continue
        times[name] = b["real_time"] * scale
        counters[name] = {k: v for k, v in b.items() if k in ("host_bytes", "device_copies")}
    return data.get("context", {}), times, counters


def size_name(n):
    for unit, factor in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= factor and n % factor == 0:
            return f"{n // factor} {unit}"
    return f"{n} B"


def fmt_time(us):
    return "-" if us is None else (f"{us:.1f}" if us < 1000 else f"{us:,.0f}")


def ratio(reference, measured):
    if reference is None or measured is None or measured == 0:
        return "-"
    return f"{reference / measured:.2f}"


def main():
    context, times, counters = load(sys.argv[1])
    if len(sys.argv) > 2:
        times.update(load(sys.argv[2])[1])
    sizes = sorted({int(k.split("/")[3]) for k in times if k.startswith("transfer/")})
    out = []
    host = context.get("host_name", "?")
    out.append(f"Host {host}, {context.get('num_cpus', '?')} CPUs, "
               f"{context.get('date', '?')}; times are medians in microseconds.")
    out.append("")
    cuda = any(k.startswith("cuda/") for k in times)
    for direction in ("round_trip", "to_device", "from_device"):
        out.append(f"**{direction.replace('_', ' ')}**")
        out.append("")
        head = ["size", "raw us", "drt us", "drt/raw", "direct us", "direct/raw",
                "staged us", "staged/raw",
                "raw pinned us", "drt pinned us", "drt pinned/raw pinned",
                "memcpy us"]
        if cuda:
            head += ["cuda pinned us", "drt pinned/cuda pinned", "cuda pageable us",
                     "drt/cuda pageable"]
        out.append("| " + " | ".join(head) + " |")
        out.append("|" + "---|" * len(head))
        for size in sizes:
            t = {m: times.get(f"transfer/{m}/{direction}/{size}") for m in
                 ("raw", "drt", "drt_direct", "drt_staged", "raw_pinned",
                  "drt_pinned", "memcpy")}
            row = [size_name(size), fmt_time(t["raw"]), fmt_time(t["drt"]),
                   ratio(t["raw"], t["drt"]), fmt_time(t["drt_direct"]),
                   ratio(t["raw"], t["drt_direct"]), fmt_time(t["drt_staged"]),
                   ratio(t["raw"], t["drt_staged"]), fmt_time(t["raw_pinned"]),
                   fmt_time(t["drt_pinned"]), ratio(t["raw_pinned"], t["drt_pinned"]),
                   fmt_time(t["memcpy"])]
            if cuda:
                cp = times.get(f"cuda/pinned/{direction}/{size}")
                cq = times.get(f"cuda/pageable/{direction}/{size}")
                row += [fmt_time(cp), ratio(cp, t["drt_pinned"]), fmt_time(cq),
                        ratio(cq, t["drt"])]
            out.append("| " + " | ".join(row) + " |")
        out.append("")
    # chain/MECHANISM/N/ELEMENTS: N runs over tensors of ELEMENTS f32.
    chains = {(int(k.split("/")[3]), int(k.split("/")[2]))
              for k in times if k.startswith("chain/")}
    if chains:
        out.append("**chains of dependent runs (1 upload, N runs, 1 read-back)**")
        out.append("")
        out.append("| size | N | raw loop us | raw, an event and a flush per run, us | "
                   "drt resident us | drt resident/raw (time) | "
                   "drt resident, each run waited for, us | waited/raw | "
                   "drt host round trips us | host bytes resident | host bytes round trips |")
        out.append("|---|---|---|---|---|---|---|---|---|---|---|")
        for elements, n in sorted(chains, key=lambda c: (-c[0], c[1])):
            key = lambda m: f"chain/{m}/{n}/{elements}"
            raw = times.get(key("raw"))
            raw_events = times.get(key("raw_event_per_run"))
            res = times.get(key("drt_resident"))
            waited = times.get(key("drt_resident_waited"))
            trips = times.get(key("drt_host_round_trips"))
            hb = counters.get(key("drt_resident"), {}).get("host_bytes")
            hbt = counters.get(key("drt_host_round_trips"), {}).get("host_bytes")
            r = "-" if raw is None or res is None else f"{res / raw:.2f}"
            w = "-" if raw is None or waited is None else f"{waited / raw:.2f}"
            out.append(f"| {size_name(4 * elements)} | {n} | {fmt_time(raw)} | "
                       f"{fmt_time(raw_events)} | "
                       f"{fmt_time(res)} | {r} | {fmt_time(waited)} | {w} | "
                       f"{fmt_time(trips)} | {size_name(int(hb)) if hb else '-'} | "
                       f"{size_name(int(hbt)) if hbt else '-'} |")
        out.append("")
    print("\n".join(out))


if __name__ == "__main__":
    main()
