"""Attack: a full disk (docs/security.md, item 4).

aegisd's state directory is a small tmpfs. A job prints without end; then the disk is
filled while a job runs and another waits; then the shims of two running jobs are killed,
so that nobody records how those jobs end. Safe outcome:
 - the log is cut at log_max_bytes, says so, and keeps the job's last lines;
 - with the disk full aegisd keeps serving (a submission gets a one-line error, listings
   answer), a finished job is recorded once the disk has room, the waiting job starts
   then, and after a kill -9 and restart every job is accounted for and none ran twice
   (each job's work appends a marker);
 - a job whose outcome is unknown is not run again unless it was submitted --restartable.
Usage: test_disk_full.py BUILD_DIR
"""
import json
import os
import signal
import subprocess
import sys

from secharness import Daemon, fail, shared_dir, users, wait_for

CAP = 1 << 20
TAIL = 64 << 10


def marks(work, job):
    path = os.path.join(work, "marks", str(job))
    return open(path).read().count("done") if os.path.exists(path) else 0


def main(build):
    u1, u2 = users()
    d = Daemon(build, gpus="1x40960", shared_gpus=True,
               settings={"observation_window_s": 0.5, "telemetry_sample_hz": 4.0, "log_max_bytes": CAP,
                         "log_tail_bytes": TAIL, "log_min_free_bytes": 1 << 20})  # the 64 MiB default > this disk
    os.makedirs(d.state, mode=0o700)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m,mode=0700", "tmpfs", d.state], check=True)
    filler = os.path.join(d.state, "filler")
    try:
        d.start()
        work = shared_dir(d, "work")
        shared_dir(d, "work/marks")

        # 1. Output without end, capped.
        yes = d.submit("--name", "yes", "--", "/bin/sh", "-c", "yes | head -c 40000000; echo FINAL-LINE",
                       user=u1.pw_name, cwd=work)
        if d.wait_all_final([yes], timeout=120)[yes] != "completed":
            fail("the printing job did not complete")
        log = os.path.join(d.state, "jobs", str(yes), "1", "stdout")
        size = os.path.getsize(log)
        if size > CAP + TAIL + 1024:
            fail(f"the log holds {size} bytes; the cap is {CAP} + {TAIL} of tail")
        out = d.run_cli("logs", str(yes), user=u1.pw_name).stdout
        if "output cut at 1048576 bytes" not in out or not out.rstrip().endswith("FINAL-LINE"):
            fail("the capped log does not say it was cut, or lost the job's last line")

        # 2. The disk fills while X runs and Q waits for the GPU.
        gate = os.path.join(work, "go")
        work_cmd = f"while [ ! -e {gate} ]; do sleep 0.1; done; echo done >> {work}/marks/$AEGIS_JOB_ID"
        x = d.submit("--name", "x", "--exclusive", "--", "/bin/sh", "-c", work_cmd, user=u1.pw_name, cwd=work)
        wait_for("X to run", lambda: d.show(x)["state"] == "running", timeout=60)
        q = d.submit("--name", "q", "--exclusive", "--", "/bin/sh", "-c", work_cmd, user=u2.pw_name, cwd=work)
        subprocess.run(["dd", "if=/dev/zero", f"of={filler}", "bs=1M", "count=64"], capture_output=True)
        r = d.run_cli("submit", "--", "true", user=u2.pw_name, check=False)
        if r.returncode == 0 or "full" not in r.stderr or len(r.stderr.strip().splitlines()) != 1:
            fail(f"a submission on a full disk: rc={r.returncode} {r.stderr!r}")
        open(gate, "w").close()
        wait_for("X's work", lambda: marks(work, x) == 1, timeout=60)
        for _ in range(3):  # listings keep answering, the daemon keeps running
            if d.run_cli("queue", "--json", user=u2.pw_name, check=False).returncode != 0 or d.proc.poll() is not None:
                fail("aegisd stopped answering on a full disk:\n" + open(d.log).read()[-2000:])
        os.unlink(filler)
        states = d.wait_all_final([x, q], timeout=120)
        if states[x] != "completed" or states[q] != "completed":
            fail(f"after the disk had room again: {states}")

        # 3. Outcomes nobody recorded: the shims of U, then R, are killed while they run.
        work2 = (f"while [ ! -e {work}/go-$AEGIS_JOB_ID ]; do sleep 0.1; done; "
                 f"echo done >> {work}/marks/$AEGIS_JOB_ID")
        u = d.submit("--name", "u", "--exclusive", "--", "/bin/sh", "-c", work2, user=u1.pw_name, cwd=work)
        rr = d.submit("--name", "r", "--exclusive", "--restartable", "--", "/bin/sh", "-c", work2, user=u1.pw_name,
                      cwd=work)

        def shim_of(job):
            try:
                c = json.load(open(os.path.join(d.state, "jobs", str(job), "1", "child.json")))
                return c.get("shim_pid")
            except (OSError, ValueError):
                return None
        for job in (u, rr):
            os.kill(wait_for(f"job {job}'s shim", lambda: shim_of(job), timeout=60), signal.SIGKILL)
            open(os.path.join(work, f"go-{job}"), "w").close()
            wait_for(f"job {job}'s work", lambda: marks(work, job) == 1, timeout=60)
        states = d.wait_all_final([u], timeout=60)
        wait_for("the restartable job to run again and complete",
                 lambda: d.show(rr)["state"] == "completed", timeout=90)
        shown = d.show(u)
        if states[u] != "failed" or "outcome unknown" not in shown["reason"] or "--restartable" not in shown["reason"]:
            fail(f"job {u} (outcome unknown): {states[u]} {shown['reason']!r}")

        # Restart: everything accounted for, nothing ran twice it should not have.
        d.kill9()
        d.start()
        final = {j["id"]: j["state"] for j in d.jobs()}
        want = {yes: "completed", x: "completed", q: "completed", u: "failed", rr: "completed"}
        if any(final.get(k) != v for k, v in want.items()):
            fail(f"after a restart: {final}, expected {want}")
        runs = {job: marks(work, job) for job in (x, q, u, rr)}
        if runs != {x: 1, q: 1, u: 1, rr: 2}:
            fail(f"work done per job: {runs} (expected once each, twice for the restartable job)")
        print(f"OK: log capped at {size} bytes with its last line; a full disk was survived (submission refused "
              f"in one line, listings answered, every job recorded once there was room); unknown outcomes: "
              f"failed without a re-run, re-run only for --restartable; work per job {list(runs.values())}")
    finally:
        d.cleanup()
        subprocess.run(["umount", "-l", d.state], capture_output=True)


if __name__ == "__main__":
    main(sys.argv[1])
