#!/usr/bin/env python3
"""How long after its first activity each attempt of the H200 run (h200_timelines.csv) kept
growing its memory: the last rise of more than 64 MiB (anchor_plateau_tolerance_mib) over the
level it last grew to. The figures behind `array_probe_settle_s` (docs/config.md).
  python3 tests/data/peak_after_activity.py"""
import os
import re

path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "h200_timelines.csv")
first, rows = {}, {}
for line in open(path):
    m = re.match(r"# attempt (\S+) (\S+) (\d+): .*first activity ([\d.]+)", line)
    if m:
        first[m.group(1, 2, 3)] = float(m[4])
    if line.startswith("#") or line.startswith("run,"):
        continue
    run, job, attempt, t, own, used = line.split(",")[:6]
    if own == "1":
        rows.setdefault((run, job, attempt), []).append((float(t), float(used)))
for key, samples in rows.items():
    level, grew = 0.0, None
    for t, used in samples:
        if used > level + 64:
            level, grew = used, t
    if key in first:
        print(f"{' '.join(key)}: peak {max(u for _, u in samples):.0f} MiB, last growth "
              f"{grew - first[key]:.1f} s after first activity")
