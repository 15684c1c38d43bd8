"""`aegis run`: the job's output on ours, its exit status as ours, SIGTERM cancels it (as
scancel does to a Slurm batch step), SIGKILL too (the daemon cancels a job whose client is
gone), and a daemon restart does not end it. Usage: test_run.py BUILD_DIR
"""
import os
import signal
import subprocess
import sys
import threading
import time

from harness import Daemon, fail, wait_for


def wait_running(d, name, timeout=60):
    def running():
        r = [j for j in d.call("queue", "--json") if j["name"] == name and j["state"] == "running"]
        return r[0]["id"] if r and r[0]["attempt_log"] and r[0]["attempt_log"][-1]["pgid"] > 1 else None
    return wait_for(f"job {name} to run", running, timeout=timeout, every=0.2)


def stderr_lines(p):
    """Collects `p`'s stderr lines as they come (a thread), so a test can wait on one."""
    lines = []
    threading.Thread(target=lambda: lines.extend(iter(p.stderr.readline, "")), daemon=True).start()
    return lines


def main(build):
    d = Daemon(build, settings={"observation_window_s": 1.0})
    try:
        d.start()
        env = dict(os.environ, AEGIS_SOCKET=d.socket)
        r = subprocess.run([d.aegis, "run", "--name", "hello", "--", "/bin/sh", "-c", "echo out; echo err >&2"],
                           capture_output=True, text=True, env=env, cwd=d.dir, timeout=60)
        if r.returncode != 0 or r.stdout != "out\n" or "err\n" not in r.stderr:
            fail(f"run: rc={r.returncode} out={r.stdout!r} err={r.stderr!r}")
        r = subprocess.run([d.aegis, "run", "--", "/bin/sh", "-c", "exit 7"], capture_output=True, text=True,
                           env=env, cwd=d.dir, timeout=60)
        if r.returncode != 7:
            fail(f"exit status not passed on: {r.returncode} {r.stderr}")
        p = subprocess.Popen([d.aegis, "run", "--name", "sleeper", "--", "/bin/sh", "-c", "echo started; sleep 600"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=d.dir)
        job = wait_running(d, "sleeper")
        wait_for("the sleeper's first output", lambda: d.run_cli("logs", str(job)).stdout, every=0.2)
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=60)
        pgid = d.show(job)["attempt_log"][0]["pgid"]
        if pgid <= 1:
            fail(f"no process group recorded: {pgid}")
        if p.returncode != 143 or d.show(job)["state"] != "cancelled":
            fail(f"SIGTERM: rc={p.returncode} state={d.show(job)['state']} err={err}")
        try:
            os.killpg(pgid, 0)
            fail("the cancelled job's processes are still there")
        except ProcessLookupError:
            pass
        print("OK: aegis run passes output and exit status on, and SIGTERM cancels the job and its processes")

        # SIGKILL leaves no handler to run: the daemon sees its client go and cancels the job.
        p = subprocess.Popen([d.aegis, "run", "--name", "orphan", "--", "/bin/sh", "-c", "echo started; sleep 600"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=d.dir)
        job = wait_running(d, "orphan")
        p.kill()
        p.wait()
        t = time.time()
        wait_for("the orphaned job to end", lambda: d.show(job)["state"] != "running", every=0.2)
        shown = d.show(job)
        if shown["state"] != "cancelled" or "its client (aegis run, pid" not in shown["reason"]:
            fail(f"SIGKILL of aegis run: state={shown['state']} reason={shown['reason']!r}")
        pgid = shown["attempt_log"][0]["pgid"]
        try:
            os.killpg(pgid, 0)
            fail("the orphaned job's processes are still there")
        except ProcessLookupError:
            pass
        print(f"OK: aegis run killed with SIGKILL: its job cancelled {time.time() - t:.1f} s later "
              f"({shown['reason']})")

        # A daemon restart while aegis run waits: it rides it out, and the job is not orphaned.
        # The job runs until the test opens its gate, after aegis run has noticed the daemon
        # gone (it says it is retrying) and the daemon is back.
        gate = os.path.join(d.dir, "survivor-go")
        p = subprocess.Popen([d.aegis, "run", "--name", "survivor", "--", "/bin/sh", "-c",
                              f"while [ ! -e {gate} ]; do sleep 0.1; done; echo done"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=d.dir)
        err_lines = stderr_lines(p)
        job = wait_running(d, "survivor")
        d.kill9()
        wait_for("aegis run to notice the daemon gone", lambda: any("retrying" in x for x in err_lines))
        d.start()
        open(gate, "w").close()
        try:
            p.wait(timeout=120)  # its output is one short line: the pipe cannot fill
            out = p.stdout.read()
        except subprocess.TimeoutExpired:
            fail("aegis run still waiting 120 s after the daemon came back: " + "".join(err_lines))
        err = "".join(err_lines)
        if p.returncode != 0 or out != "done\n" or "retrying" not in err or d.show(job)["state"] != "completed":
            fail(f"restart under aegis run: rc={p.returncode} out={out!r} state={d.show(job)['state']} err={err}")
        print("OK: aegis run waits through a daemon restart (kill -9, start) and its job completes")
    finally:
        d.cleanup()


if __name__ == "__main__":
    main(sys.argv[1])
