#!/usr/bin/env python3
"""Line coverage of drt's sources from the gcov data a run left behind.

    ci/coverage-report.py BUILD_DIR SOURCE_DIR OUTPUT.md [ROOT...]

Reads every .gcda file under BUILD_DIR with `gcov --json-format --stdout`,
adds up each source line's count over every object that compiled it (a
header's inline functions are compiled into many), and writes OUTPUT.md:
a table of executed over executable lines for each file under the ROOTs
(folders relative to SOURCE_DIR; default framework and backends), then,
file by file, every run of lines that no object executed, with its function
and the run's first line. Those lines are where a bug passes every property:
nothing the suite ran went through them. Prints the table.
"""

import json
import os
import subprocess
import sys
from collections import defaultdict


def gcov_documents(gcda):
    """The JSON documents gcov prints for one .gcda file."""
    result = subprocess.run(
        ["gcov", "--json-format", "--stdout", gcda],
        cwd=os.path.dirname(gcda),
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        sys.exit(f"coverage-report: gcov failed on {gcda}: {result.stderr.strip()}")
    for line in result.stdout.splitlines():
        line = line.strip()
        if line:
            yield json.loads(line)


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__.strip())
    build, source, output = (os.path.abspath(a) for a in sys.argv[1:4])
    roots = sys.argv[4:] or ["framework", "backends"]
    roots = [os.path.join(source, r).rstrip("/") + "/" for r in roots]

    counts = defaultdict(lambda: defaultdict(int))
    functions = defaultdict(dict)
    gcdas = []
    for folder, _, files in os.walk(build):
        gcdas += [os.path.join(folder, f) for f in files if f.endswith(".gcda")]
    if not gcdas:
        sys.exit(f"coverage-report: no .gcda file under {build}: was a "
                 "program of the coverage build run, and did it exit normally?")
    for gcda in sorted(gcdas):
        for doc in gcov_documents(gcda):
            cwd = doc.get("current_working_directory", os.path.dirname(gcda))
            for f in doc.get("files", []):
                path = os.path.normpath(os.path.join(cwd, f["file"]))
                if not any(path.startswith(r) for r in roots):
                    continue
                # Tests and self-test mutants are not what the suite checks.
                rel = os.path.relpath(path, source)
                if "/tests/" in rel or "/selftest/" in rel:
                    continue
                for line in f.get("lines", []):
                    n = line["line_number"]
                    counts[rel][n] += line["count"]
                    functions[rel].setdefault(n, line.get("function_name", ""))

    rows = []
    total_exec = total_lines = 0
    for rel in sorted(counts):
        lines = counts[rel]
        executed = sum(1 for c in lines.values() if c > 0)
        rows.append((rel, executed, len(lines)))
        total_exec += executed
        total_lines += len(lines)

    def percent(a, b):
        return f"{100.0 * a / b:.1f}%" if b else "-"

    table = ["| file | lines executed | of | coverage |", "|---|---|---|---|"]
    for rel, executed, n in rows:
        table.append(f"| `{rel}` | {executed} | {n} | {percent(executed, n)} |")
    table.append(f"| **all** | {total_exec} | {total_lines} | "
                 f"{percent(total_exec, total_lines)} |")

    out = ["# Lines no run reached", "", *table, ""]
    for rel, executed, n in rows:
        missed = sorted(l for l, c in counts[rel].items() if c == 0)
        if not missed:
            continue
        try:
            with open(os.path.join(source, rel), encoding="utf-8") as f:
                text = f.read().splitlines()
        except OSError:
            text = []
        out += [f"## {rel}", ""]
        start = prev = missed[0]
        runs = []
        for l in missed[1:] + [None]:
            if l is not None and l <= prev + 2:
                prev = l
                continue
            runs.append((start, prev))
            if l is not None:
                start = prev = l
        for a, b in runs:
            first = text[a - 1].strip() if a - 1 < len(text) else ""
            span = f"{a}" if a == b else f"{a}-{b}"
            function = functions[rel].get(a, "")
            out.append(f"- {span} `{first[:90]}`"
                       + (f" ({function})" if function else ""))
        out.append("")
    with open(output, "w", encoding="utf-8") as f:
        f.write("\n".join(out))
    print("\n".join(table))
    print(f"coverage-report: unreached lines, file by file: {output}")


if __name__ == "__main__":
    main()
