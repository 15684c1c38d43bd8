"""Attack: a user's unfinished requests past its input allowance (issue 33 item 6;
docs/security.md, "Requests that never end").

A user's connections may hold two whole requests of unfinished input together (8 MiB and
a read); past that, aegisd stops reading that user's connections until their requests end
or time out. User 1 sends three 4 MiB lines that never end and holds them. Safe outcome:
aegisd does not spin while it waits for request_timeout_s (older builds polled those
sockets for input they would not read, and woke at once, again and again: a whole core for
up to 30 s), user 2 is answered, and the attacker's connections are dropped at the timeout.
The bound is loose (half the window's wall time; a spinning build uses all of it).
Usage: test_input_spin.py BUILD_DIR
"""
import sys
import time

from attacks import daemon_cpu_s, daemon_fds, partial_lines, victim_latency
from secharness import Daemon, fail, users, wait_for

WINDOW_S = 6.0


def main(build):
    u1, u2 = users()
    d = Daemon(build, gpus="1x40960", shared_gpus=True, settings={"request_timeout_s": 30})
    try:
        d.start()
        base_fds = daemon_fds(d)
        attack = partial_lines(d, u1, conns=3, size=4 << 20, send_for=4)
        attack.read_until(b"ready")
        cpu0, t0 = daemon_cpu_s(d), time.time()
        lat = victim_latency(d, u2, n=3)
        time.sleep(max(0.0, WINDOW_S - (time.time() - t0)))
        cpu, wall = daemon_cpu_s(d) - cpu0, time.time() - t0
        if not all(ok for _, ok in lat):
            fail(f"user 2 was not answered while user 1 held its input: {lat}")
        if cpu > 0.5 * wall:
            fail(f"aegisd used {cpu:.1f} s of CPU in {wall:.1f} s while user 1's unfinished requests "
                 "were past its input allowance (spinning)")
        wait_for("the attacker's connections to be dropped (request_timeout_s)",
                 lambda: daemon_fds(d) <= base_fds + 2, timeout=60)
        attack.kill()
        print(f"OK: 3 unfinished 4 MiB requests held; aegisd CPU {cpu:.2f} s in {wall:.1f} s, "
              f"user 2 answered in <= {max(t for t, _ in lat) * 1000:.0f} ms, attacker dropped at the timeout")
    finally:
        d.cleanup()


if __name__ == "__main__":
    main(sys.argv[1])
