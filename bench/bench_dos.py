#!/usr/bin/env python3
"""How long another user waits for `aegis queue` while one user attacks aegisd's socket
(issue 12, item 5; the attacks are tests/security/attacks.py). Printed, never asserted.
For each attack: the victim's request latency (p50, p99, max over 40 requests, each on a
new connection as the CLI makes them, sent while the attack runs), and aegisd's resident
memory. Target: every request answered within 100 ms.
Issue 33 item 1 (`--listing`: that attack only): user 1 queues 150 jobs with 1 MiB argvs
and four connections of user 1 hammer `history`; user 2's `aegis queue` (the columns it
prints, and the raw full listing) and the dashboard's first byte of /api/queue.
Issue 33 item 6 (`--slow-http`: that attack only): user 1 plays slowloris against the
dashboard (attacks.slow_http: 150 connections dribbling a head, 40 silent, 10 not reading);
user 2's `aegis queue` and the first byte of the dashboard's page and /api/queue.
Needs root (it creates the users aegistest1 and aegistest2).
Usage: bench/bench_dos.py [BUILD_DIR] [--listing] [--slow-http]
"""
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "security"))
from attacks import (big_command_jobs, dashboard_latency, dashboard_ttfb, daemon_fds, daemon_rss_mb,  # noqa: E402
                     idle_connections, partial_lines, pipelined_unread, slow_http, slow_listing_readers,
                     submission_flood, victim_latency)
from secharness import Daemon, shared_dir, users, wait_for  # noqa: E402

N = 40


def summary(name, lat, rss):
    ts = sorted(t * 1000 for t, _ in lat)
    ok = sum(1 for _, good in lat if good)
    p = lambda q: ts[min(len(ts) - 1, int(q * (len(ts) - 1) + 0.5))]  # noqa: E731
    print(f"| {name} | {ok}/{len(lat)} | {p(0.5):.1f} | {p(0.99):.1f} | {ts[-1]:.1f} | {rss:.0f} |", flush=True)
    return ts[-1]


# `aegis queue`'s request (apps/aegis/cmd_jobs.cpp printed_fields), and the raw full listing.
CLI_QUEUE = (json.dumps({"op": "queue", "all": False, "mine": False, "fields": [
    "id", "name", "user", "state", "gpus", "attempts", "gpu_uuids", "reason", "never_starts", "fair_share",
    "started_at", "submitted_at", "ended_at"]}) + "\n").encode()
FULL_QUEUE = b'{"op":"queue"}\n'


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cli_latency(d, user, n=20):
    """`aegis queue` itself, started through runuser (its start-up counts too)."""
    import subprocess
    out = []
    for _ in range(n):
        t0 = time.monotonic()
        r = subprocess.run(["runuser", "-u", user, "--", d.aegis, "--socket", d.socket, "queue"],
                           capture_output=True)
        out.append([time.monotonic() - t0, r.returncode == 0])
    return out


def listing_attack(build, jobs=150):
    """Issue 33 item 1: another user's listing and the dashboard while user 1 has `jobs`
    jobs with 1 MiB argvs queued and four connections hammering `history`."""
    u1, u2 = users()
    port = free_port()
    d = Daemon(build, gpus="1x40960", settings={"observation_window_s": 0.5, "dashboard_port": port})
    try:
        d.start()
        work = shared_dir(d, "work")
        d.submit("--exclusive", "--", "/bin/sleep", "3600", user=u1.pw_name, cwd=work)
        ids = big_command_jobs(d, u1, work, jobs)
        print(f"\nListing attack: {len(ids)} jobs with 1 MiB argvs queued by user 1, "
              f"aegisd {daemon_rss_mb(d):.0f} MB before the readers")
        print("| user 2 reads, while 4 of user 1's connections hammer `history` | answered | p50 ms | p99 ms "
              "| max ms | aegisd RSS MB |")
        print("|---|---|---|---|---|---|")
        readers = slow_listing_readers(d, u1, {"op": "history", "limit": 1000}, chunk=65536, pause_s=0)
        readers.read_until(b"ready")
        summary("`aegis queue` (its columns)", victim_latency(d, u2, n=N, op=CLI_QUEUE), daemon_rss_mb(d))
        summary("raw `queue` (every field, cut)", victim_latency(d, u2, n=N, op=FULL_QUEUE), daemon_rss_mb(d))
        summary("`aegis queue` run as a process (runuser, whole output)", cli_latency(d, u2.pw_name), daemon_rss_mb(d))
        dashboard_ttfb(port, "/api/queue", n=1)  # the first read asks the loop to build the listing
        summary("dashboard /api/queue, first byte", dashboard_ttfb(port, "/api/queue", n=N), daemon_rss_mb(d))
        # An open dashboard tab (polls every 2 s; here every 0.5 s) makes the loop build its listings.
        import threading
        stop = threading.Event()
        tab = threading.Thread(target=lambda: [dashboard_ttfb(port, "/api/queue", n=1) for _ in iter(
            lambda: stop.wait(0.5), True)], daemon=True)
        tab.start()
        summary("`aegis queue` (its columns), a dashboard tab open too", victim_latency(d, u2, n=N, op=CLI_QUEUE),
                daemon_rss_mb(d))
        stop.set()
        readers.kill()
    finally:
        d.cleanup()


def slow_http_attack(build):
    """Issue 33 item 6: user 2's `aegis queue` and the dashboard's first byte, without and
    with user 1's slowloris against the dashboard."""
    u1, u2 = users()
    port = free_port()
    d = Daemon(build, gpus="1x40960", shared_gpus=True, settings={"observation_window_s": 0.5, "dashboard_port": port})
    try:
        d.start()
        print("\nSlow HTTP attack on the dashboard (150 connections dribbling a head byte a second, 40 silent, "
              "10 not reading)")
        print("| user 2, while user 1 ... | answered | p50 ms | p99 ms | max ms | aegisd RSS MB |")
        print("|---|---|---|---|---|---|")
        for name, attack in (("does nothing", None), ("plays slowloris", lambda: slow_http(port, u1))):
            a = attack() if attack else None
            held = ""
            if a:
                held = f" ({a.read_until(b'ready').decode().split()[-1]} connections)"
                time.sleep(3)  # the dribblers have sent a few bytes each
            summary(f"{name}{held}: `aegis queue` (its columns)", victim_latency(d, u2, n=N, op=CLI_QUEUE),
                    daemon_rss_mb(d))
            # After a spell without readers the listing is stale: the first read waits for the
            # next tick by design (dashboard_feed.h); as in listing_attack, it is not counted.
            dashboard_latency(port, u2, paths=("/api/queue",), n=1)
            got = dashboard_latency(port, u2, n=N, timeout=10.0)
            for path in ("/", "/api/queue"):
                summary(f"{name}: dashboard {path}, first byte",
                        [(r[2], r[1] == 200) for r in got if r[0] == path], daemon_rss_mb(d))
            if a:
                a.kill()
    finally:
        d.cleanup()


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
    flags = {"--listing", "--slow-http"}
    args = [a for a in sys.argv[1:] if a not in flags]
    build_dir = args[0] if args else "build"
    chosen = flags & set(sys.argv)
    if not chosen:
        main(build_dir)
    if not chosen or "--listing" in chosen:
        listing_attack(build_dir)
    if not chosen or "--slow-http" in chosen:
        slow_http_attack(build_dir)
