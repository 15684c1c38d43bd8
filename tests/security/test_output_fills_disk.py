"""Attack: one user's output fills aegisd's state filesystem (issue 33 item 6;
docs/security.md, item 4, "Output cannot fill the disk").

aegisd's state directory is a 16 MiB tmpfs and the free-space guard is set to 4 MiB. User 1
runs two jobs that print without end (under the default 128 MiB cap, which alone would
let them fill the disk). Safe outcome: the logs stop growing while 4 MiB are still free,
user 1 can cancel one of its jobs and root the other (older builds: the disk filled, every
cancel failed with "database or disk is full"), user 2 can submit and its job runs, and each
cancelled log ends with a line saying how much output was dropped and why.
Usage: test_output_fills_disk.py BUILD_DIR
"""
import os
import subprocess
import sys
import time

from secharness import Daemon, fail, shared_dir, users, wait_for

GUARD = 4 << 20


def free_bytes(path):
    v = os.statvfs(path)
    return v.f_bavail * v.f_frsize


def main(build):
    u1, u2 = users()
    d = Daemon(build, gpus="2x40960", shared_gpus=True,  # a GPU each: a printer is never active on one
               settings={"observation_window_s": 0.5, "telemetry_sample_hz": 4.0, "log_min_free_bytes": GUARD})
    os.makedirs(d.state, mode=0o700)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m,mode=0700", "tmpfs", d.state], check=True)
    try:
        d.start()
        work = shared_dir(d, "work")
        printers = [d.submit("--name", f"print{i}", "--", "yes", "aegis output without end", user=u1.pw_name, cwd=work)
                    for i in (1, 2)]
        wait_for("both printers to run", lambda: all(d.show(j)["state"] == "running" for j in printers), timeout=60)
        logs = [os.path.join(d.state, "jobs", str(j), "1", "stdout") for j in printers]

        def settled():
            before = [os.path.getsize(p) for p in logs]
            time.sleep(1.0)
            return before == [os.path.getsize(p) for p in logs] and sum(before) > 4 << 20

        wait_for("the printers' logs to stop growing", settled, timeout=120)
        left = free_bytes(d.state)
        if left < GUARD // 2:
            fail(f"output left {left} bytes free on the state disk (guard {GUARD})")
        r = d.run_cli("cancel", str(printers[0]), user=u1.pw_name, check=False)
        if r.returncode != 0:
            fail(f"user 1 cannot cancel its own printer with its output on the disk: {r.stderr.strip()}")
        r = d.run_cli("cancel", str(printers[1]), check=False)
        if r.returncode != 0:
            fail(f"root cannot cancel user 1's printer: {r.stderr.strip()}")
        other = d.submit("--name", "other", "--", "true", user=u2.pw_name, cwd=work)
        states = d.wait_all_final(printers + [other], timeout=120)
        want = {printers[0]: "cancelled", printers[1]: "cancelled", other: "completed"}
        if any(states.get(k) != v for k, v in want.items()):
            fail(f"after the cancels: {states}, expected {want}")
        notes = [l for l in open(logs[0], "rb").read().decode(errors="replace").splitlines() if l.startswith("[aegis")]
        if not any("bytes of output were lost" in l and "log_min_free_bytes" in l for l in notes):
            fail(f"the cancelled printer's log does not say what was dropped and why: {notes}")
        if free_bytes(d.state) < GUARD // 2:
            fail(f"the ended printers' logs left {free_bytes(d.state)} bytes free (guard {GUARD})")
        print(f"OK: two printers' logs stopped with {left >> 10} KiB free (guard {GUARD >> 10} KiB); user 1 and root "
              f"cancelled them, user 2's job ran; its log says {[l for l in notes if 'lost' in l][0]!r}")
    finally:
        d.cleanup()
        subprocess.run(["umount", "-l", d.state], capture_output=True)


if __name__ == "__main__":
    main(sys.argv[1])
