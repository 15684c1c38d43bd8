"""Starts aegisd on emulated GPUs in a scratch directory and drives it with the aegis CLI.

Used by the daemon's end-to-end tests (run by ctest). Standard library only.
"""
import errno
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time


START_TIMEOUT_S = 60  # aegisd answers in well under a second; this is for a loaded machine


def wait_for(what, predicate, timeout=60, every=0.1):
    """Waits on a condition (never a fixed sleep); fails naming `what` after `timeout` s,
    which is generous: it is reached when the behaviour is wrong, not on a slow machine."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = predicate()
        if v:
            return v
        time.sleep(every)
    v = predicate()
    if v:
        return v
    fail(f"timed out after {timeout} s waiting for {what}")


class Daemon:
    def __init__(self, build_dir, gpus="3x40960", settings=None, keep=False, shared_gpus=False, nofile=None):
        """shared_gpus: the emulated GPUs' state file outside the (root-only) state
        directory, so that other users' jobs can use the GPUs too. nofile: aegisd's
        open-file limit (soft and hard)."""
        self.nofile = nofile
        self.build = build_dir = os.path.abspath(build_dir)
        self.aegisd = os.path.join(build_dir, "apps/aegisd/aegisd")
        self.aegis = os.path.join(build_dir, "apps/aegis/aegis")
        self.fakejob = os.path.join(build_dir, "apps/aegis-fakejob/aegis-fakejob")
        self.dir = tempfile.mkdtemp(prefix="aegis-e2e-")
        os.chmod(self.dir, 0o755)
        self.state = os.path.join(self.dir, "state")
        self.socket = os.path.join(self.dir, "aegisd.sock")
        self.config = os.path.join(self.dir, "aegisd.toml")
        self.log = os.path.join(self.dir, "aegisd.log")
        self.keep = keep
        values = {
            "state_dir": self.state,
            "socket": self.socket,
            "gpu_backend": "emulated",
            "emulated_gpus": gpus,
            "durability": "normal",
        }
        if shared_gpus:
            values["emulated_state"] = os.path.join(self.dir, "emulated-gpus.state")
        values.update(settings or {})
        with open(self.config, "w") as f:
            for k, v in values.items():
                f.write(f"{k} = {json.dumps(v)}\n")
        self.proc = None

    def start(self):
        def limits():
            if self.nofile:
                import resource
                resource.setrlimit(resource.RLIMIT_NOFILE, (self.nofile, self.nofile))
        self.proc = subprocess.Popen([self.aegisd, "--config", self.config],
                                     stdout=open(self.log, "ab"), stderr=subprocess.STDOUT,
                                     start_new_session=True, preexec_fn=limits)
        deadline = time.time() + START_TIMEOUT_S
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("aegisd exited: " + open(self.log).read()[-2000:])
            try:
                self.call("queue", "--json")
                return
            except RuntimeError:
                time.sleep(0.05)
        raise RuntimeError(f"aegisd did not answer within {START_TIMEOUT_S} s")

    def kill9(self):
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def cleanup(self):
        self.stop()
        # Stop whatever this daemon's jobs left running (each in its own session): their
        # shims by command line, the jobs by the process groups the shims recorded.
        subprocess.run(["pkill", "-KILL", "-f", "aegis-shim --lock-fd [0-9]+ --dir " + self.state],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        jobs_dir = os.path.join(self.state, "jobs")
        for root, _, files in os.walk(jobs_dir):
            if "child.json" in files:
                try:
                    child = json.load(open(os.path.join(root, "child.json")))
                except (OSError, ValueError):
                    continue
                if child.get("cgroup"):  # every process of the job, escaped ones included
                    cg = child["cgroup_mount"] + child["cgroup"]
                    try:
                        with open(os.path.join(cg, "cgroup.kill"), "w") as f:
                            f.write("1")
                        # rmdir succeeds once the killed processes are gone from the cgroup.
                        deadline = time.time() + 30
                        while True:
                            try:
                                os.rmdir(cg)
                                break
                            except OSError as e:
                                if e.errno != errno.EBUSY or time.time() > deadline:
                                    raise
                                time.sleep(0.02)
                    except OSError:
                        pass
                try:
                    os.killpg(child["pgid"], signal.SIGKILL)
                except (OSError, KeyError):
                    pass
        if not self.keep:
            shutil.rmtree(self.dir, ignore_errors=True)

    def run_cli(self, *args, user=None, check=True):
        cmd = [self.aegis, "--socket", self.socket, *args]
        if user:
            cmd = ["runuser", "-u", user, "--"] + cmd
        r = subprocess.run(cmd, capture_output=True, text=True)
        if check and r.returncode != 0:
            raise RuntimeError(f"aegis {' '.join(args)}: {r.stderr.strip()}")
        return r

    def call(self, *args, user=None):
        return json.loads(self.run_cli(*args, user=user).stdout)

    def submit(self, *args, user=None, cwd=None):
        cmd = [self.aegis, "--socket", self.socket, "submit", *args]
        if user:
            cmd = ["runuser", "-u", user, "--"] + cmd
        r = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd or self.dir)
        if r.returncode != 0:
            raise RuntimeError("submit: " + r.stderr.strip())
        return int(r.stdout.strip())

    def jobs(self):
        return self.call("queue", "--all", "--json")

    def show(self, job_id):
        return self.call("show", str(job_id), "--json")

    def wait_all_final(self, ids, timeout):
        deadline = time.time() + timeout
        while time.time() < deadline:
            states = {j["id"]: j["state"] for j in self.jobs()}
            if all(states.get(i) in ("completed", "failed", "cancelled") for i in ids):
                return states
            time.sleep(0.5)
        raise RuntimeError("jobs did not finish in time: " + json.dumps(self.jobs(), indent=1)[-4000:])


def run_history(d, runs=3):
    """`runs` successful runs of one command (signature "sh -c sleep #"), so that backfill
    has a predicted duration for it (backfill_history_runs)."""
    past = [d.submit("--exclusive", "--", "sh", "-c", "sleep 0.5") for _ in range(runs)]
    states = d.wait_all_final(past, timeout=120)
    if any(s != "completed" for s in states.values()):
        fail(f"history runs: {states}")


def raw_call(path, request):
    """One request through the socket itself, as any program may send it."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(60)
        s.connect(path)
        s.sendall((json.dumps(request) + "\n").encode())
        reply = b""
        while not reply.endswith(b"\n"):
            chunk = s.recv(65536)
            if not chunk:
                break
            reply += chunk
    return json.loads(reply)


def ensure_user(name):
    """The pwd entry of a test user (aegistest1, ...), created without a home when missing."""
    import pwd
    try:
        return pwd.getpwnam(name)
    except KeyError:
        subprocess.run(["useradd", "--no-create-home", "--shell", "/bin/sh", name], check=True)
        return pwd.getpwnam(name)


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)
