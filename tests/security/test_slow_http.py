"""Attack: slow HTTP connections against the web dashboard (issue 33, item 6; docs/security.md).

User 1 plays slowloris against the dashboard's loopback port: 150 connections that send a
request head one byte a second and never finish it, 40 that send nothing and 10 that ask for
the page and never read the reply, each reopened when the dashboard drops it. Before the fix
(cpp-httplib with two worker threads, each held by a connection until a read times out) two
dribbling connections froze the dashboard for everyone. Safe outcome, while the attack runs:
user 2's requests for the page and for /api/queue are answered (200, the page's HTML and the
listing's JSON) within a loose bound (LOOSE_S; only a frozen dashboard misses it; the 100 ms
target is bench/bench_dos.py's); aegisd's descriptors stay bounded by
dashboard_max_connections; aegisd still answers its API socket.
Usage: test_slow_http.py BUILD_DIR
"""
import json
import socket
import sys
import time

from attacks import daemon_fds, dashboard_latency, slow_http
from secharness import Daemon, fail, users

LOOSE_S = 10.0   # per request, on a loaded 2-core machine; the attack runs longer than all of them
MAX_CONNECTIONS = 32  # dashboard_max_connections (the default)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(build):
    u1, u2 = users()
    port = free_port()
    d = Daemon(build, gpus="1x40960", shared_gpus=True,
               settings={"observation_window_s": 0.5, "dashboard_port": port,
                         "dashboard_max_connections": MAX_CONNECTIONS})
    try:
        d.start()
        base_fds = daemon_fds(d)
        before = dashboard_latency(port, u2, n=1)
        if any(r[1] != 200 for r in before):
            fail(f"the dashboard does not answer without an attack: {before}")

        attack = slow_http(port, u1)
        held = attack.read_until(b"ready").decode().split()[-1]
        time.sleep(3)  # the dribblers have sent a few bytes each; the silent ones wait
        t0 = time.monotonic()
        got = dashboard_latency(port, u2, n=3, timeout=LOOSE_S)
        spent = time.monotonic() - t0
        fds = daemon_fds(d)
        api = d.call("queue", "--json")
        attack.kill()

        bad = [r for r in got if r[1] != 200 or r[3] >= LOOSE_S]
        if bad:
            fail(f"user 2's dashboard requests under {held} slow connections of user 1 "
                 f"(path, status, first byte s, whole s, bytes, start): {bad}")
        page = [r for r in got if r[0] == "/"]
        queue = [r for r in got if r[0] == "/api/queue"]
        if not all(r[5].lstrip().lower().startswith("<!doctype html") for r in page):
            fail(f"the page is not the dashboard's HTML: {page}")
        if not all(r[5].startswith("{") for r in queue):
            fail(f"/api/queue is not JSON: {queue}")
        if fds > base_fds + MAX_CONNECTIONS + 8:
            fail(f"aegisd holds {fds} descriptors under the attack ({base_fds} before; "
                 f"dashboard_max_connections {MAX_CONNECTIONS})")
        if api is None:
            fail("aegisd's API did not answer during the attack")
        worst = max(r[3] for r in got)
        print(f"OK: {held} slow connections of user 1; user 2's {len(got)} requests (page and /api/queue) "
              f"answered, slowest {worst * 1000:.0f} ms, all in {spent:.1f} s; aegisd held {fds} descriptors "
              f"({base_fds} before)")
    finally:
        d.cleanup()


if __name__ == "__main__":
    main(sys.argv[1])
