#!/usr/bin/env python3
"""Prints, per recorded attempt of tests/data/h200_timelines.csv, what the anchor's defaults
(docs/config.md, anchor_*) were derived from: its heavy phase (as summarize.py finds it), the
highest SM activity and utilisation before it, the longest run of samples at 0.05 and 0.10
utilisation before it, its lowest training levels, and the longest warm-up memory plateau.
Usage: python3 tests/data/h200_anchor_stats.py (from the repository root)."""
import csv
import os

PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "h200_timelines.csv")


def load():
    rows = [r for r in csv.reader(l for l in open(PATH) if not l.startswith("#"))][1:]
    tl = {}
    for r in rows:
        tl.setdefault((r[0], r[1], r[2]), []).append(
            (float(r[3]), int(r[4]), int(r[5]), float(r[6] or 0), float(r[7] or 0)))
    return tl, min(int(r[5]) for r in rows)


def heavy(xs):
    v = [(t, s) for t, o, m, s, u in xs if o]
    level = sorted(s for _, s in v)[int(0.8 * (len(v) - 1))]
    if level <= 0:
        return None
    for i in range(len(v) - 2):
        if all(s >= 0.5 * level for _, s in v[i:i + 3]):
            return v[i][0]
    return None


def longest(vals, thr):
    best = cur = 0
    for v in vals:
        cur = cur + 1 if v >= thr else 0
        best = max(best, cur)
    return best


def main():
    tl, idle = load()
    print(f"idle GPU memory {idle} MiB")
    for k, xs in tl.items():
        own = [x for x in xs if x[1]]
        h = heavy(xs)
        cut = h if h is not None else next((x[0] for x in own if x[3] >= 0.1), 1e9)
        warm = [x for x in own if x[0] < cut]
        train = [x for x in own if h is not None and x[0] >= h][:-1]  # the last sample is the job ending
        ctx = warm[0][2] - idle if warm else 0
        plateau, level, since = 0, None, None
        for t, o, m, s, u in warm:
            if level is None or abs(m - idle - level) > 64:
                level, since = m - idle, t
            if m - idle > ctx + 64:
                plateau = max(plateau, t - since + 1)
        print(f"{'/'.join(k)}: heavy phase {h}; before it max SM activity {max([x[3] for x in warm] + [0]):.2f}, "
              f"utilisation {max([x[4] for x in warm] + [0]):.2f}, longest run >=0.05 {longest([x[4] for x in warm], 0.05)}, "
              f">=0.10 {longest([x[4] for x in warm], 0.1)}; training min SM activity "
              f"{min([x[3] for x in train], default=None)}, utilisation {min([x[4] for x in train], default=None)}; "
              f"longest warm-up plateau {plateau:.0f} s")


if __name__ == "__main__":
    main()
