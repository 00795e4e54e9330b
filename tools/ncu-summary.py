#!/usr/bin/env python3
"""Time per kernel from an ncu run's raw CSV (tools/gpu-check.sh):
    ncu --csv --page raw --metrics gpu__time_duration.sum PROGRAM ... > LOG
    tools/ncu-summary.py LOG [TOP]
prints the total kernel time, then the TOP kernels by total time: launches,
milliseconds, share. Lines of the program's own output are skipped."""
import csv
import re
import sys

SCALE = {"nsecond": 1e-6, "usecond": 1e-3, "msecond": 1.0, "second": 1e3}


def short(name):
    name = re.sub(r"smol::v[0-9a-z_]+::", "", name)
    name = name.replace("cuda_detail::", "").replace("(anonymous namespace)::", "")
    name = re.sub(r"^void ", "", name)
    depth, out = 0, []
    for ch in name:  # drop the parameter list, keep template arguments
        if ch == "(" and depth == 0 and out:
            break
        depth += ch == "<"
        depth -= ch == ">"
        out.append(ch)
    return "".join(out)[:90]


def main():
    path = sys.argv[1]
    top = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    lines = [l for l in open(path, errors="replace") if l.startswith('"')]
    rows = list(csv.reader(lines))
    if not rows:
        print("no CSV rows in", path)
        return
    header = rows[0]
    name_col = header.index("Kernel Name")
    time_col = header.index("gpu__time_duration.sum")
    unit = rows[1][time_col] if len(rows) > 1 else "nsecond"
    totals, counts = {}, {}
    for row in rows[2:]:
        if len(row) <= time_col or row[0] == "ID":
            continue
        try:
            ms = float(row[time_col].replace(",", "")) * SCALE.get(unit, 1e-6)
        except ValueError:
            continue
        key = short(row[name_col])
        totals[key] = totals.get(key, 0.0) + ms
        counts[key] = counts.get(key, 0) + 1
    total = sum(totals.values())
    print("kernels %.2f ms in %d launches" % (total, sum(counts.values())))
    for key in sorted(totals, key=totals.get, reverse=True)[:top]:
        print("%6.2f ms %5.1f %% %5d x %s" % (totals[key], 100 * totals[key] / total, counts[key], key))


if __name__ == "__main__":
    main()
