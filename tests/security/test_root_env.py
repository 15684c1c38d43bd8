"""Attack: root code execution through the job's environment (docs/security.md, item 1).

A user submits a job whose environment holds LD_PRELOAD (given with --env, and inherited
from the submitting shell), LD_LIBRARY_PATH and GCONV_PATH pointing at files they wrote.
The preloaded library records the uid of every process that loads it. Safe outcome: no
process ever loads it as uid 0; the job itself (as the user) does get its environment;
and aegis-shim, the root part of the launch path, runs with exactly the fixed environment.
Usage: test_root_env.py BUILD_DIR
"""
import json
import os
import shutil
import subprocess
import sys

from secharness import Daemon, fail, shared_dir, users, wait_for

ROOT_ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL": "C"}


def environ_of(pid):
    raw = open(f"/proc/{pid}/environ", "rb").read()
    return dict(e.decode().split("=", 1) for e in raw.split(b"\0") if e)


def main(build):
    u1, _ = users()
    d = Daemon(build, settings={"observation_window_s": 1.0})
    try:
        d.start()
        evil = shared_dir(d, "evil", 0o755)
        probe = os.path.join(evil, "probe.so")
        shutil.copy(os.path.join(os.path.abspath(build), "tests", "libaegis-preload-probe.so"), probe)
        os.chmod(probe, 0o755)
        records = shared_dir(d, "records", 0o777)
        gate = os.path.join(records, "go")
        env = {"LD_PRELOAD": probe, "LD_LIBRARY_PATH": evil, "GCONV_PATH": evil, "AEGIS_PROBE_DIR": records}
        script = f"while [ ! -e {gate} ]; do sleep 0.1; done; echo done"
        flags = [x for k, v in env.items() for x in ("--env", f"{k}={v}")]
        via_flags = d.submit("--name", "via-flags", *flags, "--", "/bin/sh", "-c", script, user=u1.pw_name,
                             cwd=records)
        # The same variables inherited by `aegis submit` from the user's shell.
        r = subprocess.run(["runuser", "-u", u1.pw_name, "--", "env", *[f"{k}={v}" for k, v in env.items()],
                            d.aegis, "--socket", d.socket, "submit", "--name", "inherited", "--", "/bin/sh", "-c",
                            script], capture_output=True, text=True, cwd=records)
        if r.returncode != 0:
            fail("submit with an inherited LD_PRELOAD: " + r.stderr)
        inherited = int(r.stdout.strip())
        ids = [via_flags, inherited]

        # While the jobs run: their shims' environments are the fixed one, nothing more.
        def child(job):
            path = os.path.join(d.state, "jobs", str(job), "1", "child.json")
            try:
                c = json.load(open(path))
                return c if "shim_pid" in c else None
            except (OSError, ValueError):
                return None
        for job in ids:
            c = wait_for(f"job {job} to start", lambda: child(job), timeout=60)
            shim_env = environ_of(c["shim_pid"])
            if shim_env != ROOT_ENV:
                fail(f"job {job}: aegis-shim (root) runs with {sorted(shim_env)}, expected exactly {ROOT_ENV}")
            # child.json is written just before the job's exec: wait until it has run it.
            shim_exe = os.readlink(f"/proc/{c['shim_pid']}/exe")
            wait_for(f"job {job} to exec", lambda: os.readlink(f"/proc/{c['pgid']}/exe") != shim_exe, timeout=60)
            job_env = environ_of(c["pgid"])
            if job_env.get("LD_PRELOAD") != probe:
                fail(f"job {job}: the job itself did not get its LD_PRELOAD: {job_env.get('LD_PRELOAD')!r}")
        open(gate, "w").close()
        states = d.wait_all_final(ids, timeout=60)
        if any(states[i] != "completed" for i in ids):
            fail(f"jobs did not complete: {states}")

        seen = [open(os.path.join(records, f)).read().split() for f in os.listdir(records) if f.isdigit()]
        root = [s for s in seen if s[0] == "0" or s[1] == "0"]
        if root:
            fail(f"the job's LD_PRELOAD library ran as root in: {[s[2] for s in root]}")
        as_user = [s for s in seen if s[0] == str(u1.pw_uid)]
        if not as_user:
            fail(f"the probe never ran as the job's user (seen: {seen}): the test proves nothing")
        print(f"OK: LD_PRELOAD/LD_LIBRARY_PATH/GCONV_PATH of a job never reach a root process "
              f"({len(as_user)} loads, all as uid {u1.pw_uid}); aegis-shim runs with exactly {sorted(ROOT_ENV)}")
    finally:
        d.cleanup()


if __name__ == "__main__":
    main(sys.argv[1])
