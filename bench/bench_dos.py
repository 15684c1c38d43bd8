#!/usr/bin/env python3
"""How long another user waits for `aegis queue` while one user attacks aegisd's socket
(issue 12, item 5; the attacks are tests/security/attacks.py). Printed, never asserted.
For each attack: the victim's request latency (p50, p99, max over 40 requests, each on a
new connection as the CLI makes them, sent while the attack runs), and aegisd's resident
memory. Target: every request answered within 100 ms.
Needs root (it creates the users aegistest1 and aegistest2). Usage: bench/bench_dos.py [BUILD_DIR]
"""
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "security"))
from attacks import (daemon_fds, daemon_rss_mb, idle_connections, partial_lines, pipelined_unread,  # noqa: E402
                     submission_flood, victim_latency)
from secharness import Daemon, shared_dir, users, wait_for  # noqa: E402

N = 40


def summary(name, lat, rss):
    ts = sorted(t * 1000 for t, _ in lat)
    ok = sum(1 for _, good in lat if good)
    p = lambda q: ts[min(len(ts) - 1, int(q * (len(ts) - 1) + 0.5))]  # noqa: E731
    print(f"| {name} | {ok}/{len(lat)} | {p(0.5):.1f} | {p(0.99):.1f} | {ts[-1]:.1f} | {rss:.0f} |", flush=True)
    return ts[-1]


def main(build):
    u1, u2 = users()
    settings = {"observation_window_s": 0.5}
    print("| attack by user 1 | user 2 answered | p50 ms | p99 ms | max ms | aegisd RSS MB |")
    print("|---|---|---|---|---|---|")
    d = Daemon(build, gpus="1x40960", shared_gpus=True, settings=settings)
    try:
        d.start()
        work = shared_dir(d, "work")
        base_fds = daemon_fds(d)
        summary("none", victim_latency(d, u2, n=N), daemon_rss_mb(d))
        for name, start in (("400 pipelined requests, replies never read", lambda: pipelined_unread(d, u1)),
                            ("partial 4 MiB lines on 100 connections", lambda: partial_lines(d, u1)),
                            ("1,100 idle connections", lambda: idle_connections(d, u1))):
            a = start()
            a.read_until(b"ready")
            summary(name, victim_latency(d, u2, n=N), daemon_rss_mb(d))
            a.kill()
            wait_for("the attacker's connections to close", lambda: daemon_fds(d) <= base_fds + 2, timeout=120)
        # The victim measures while the flood runs (its result is read after).
        flood = submission_flood(d, u1, work)
        time.sleep(0.5)
        lat = victim_latency(d, u2, n=N)
        rss = daemon_rss_mb(d)
        counts = json.loads(flood.result(timeout=900))
        summary(f"20,000 submissions ({counts['ok']} accepted)", lat, rss)
    finally:
        d.cleanup()
    d = Daemon(build, gpus="1x40960", shared_gpus=True, nofile=1024,
               settings=dict(settings, max_connections_per_user=5000))
    try:
        d.start()
        a = idle_connections(d, u1)
        a.read_until(b"ready")
        summary("1,100 idle connections, fd limit 1024, per-user limit lifted", victim_latency(d, u2, n=N),
                daemon_rss_mb(d))
        a.kill()
    finally:
        d.cleanup()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "build")
