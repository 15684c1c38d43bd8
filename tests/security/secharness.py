"""Shared setup of the adversarial suite (tests/security/, docs/security.md).

Every test here plays a hostile local user against aegisd running as root on emulated
GPUs, and asserts the safe outcome. They need root (they create the Unix users
aegistest1 and aegistest2 and run the CLI as them); without root they exit 77 (skipped).
Standard library only.
"""
import json
import os
import select
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "daemon"))

from harness import Daemon, ensure_user, fail, raw_call, wait_for  # noqa: E402,F401  (re-exported for the tests)

USERS = ("aegistest1", "aegistest2")


def need_root():
    if os.geteuid() != 0:
        print("SKIP: needs root (aegisd as root, jobs and clients as two extra users)")
        sys.exit(77)


def users():
    """The two unprivileged accounts (pwd entries), created when missing."""
    need_root()
    return tuple(ensure_user(n) for n in USERS)


def shared_dir(d, name, mode=0o777):
    """A directory under the daemon's scratch folder that both test users can use."""
    path = os.path.join(d.dir, name)
    os.makedirs(path, exist_ok=True)
    os.chmod(d.dir, 0o755)
    os.chmod(path, mode)
    return path


def finished_job(d, user, cwd, name="done"):
    """A job of `user` that ran `true` and completed: its id."""
    job = d.submit("--name", name, "--", "true", user=user, cwd=cwd)
    wait_for(f"job {job} to finish", lambda: d.show(job)["state"] == "completed", timeout=120)
    return job


def as_user(user, argv, **kw):
    """Runs argv as `user` (runuser), capturing text output."""
    return subprocess.run(["runuser", "-u", user, "--", *argv], capture_output=True, text=True, **kw)


class AsUser:
    """A child process that runs `body(report)` as a given user (uid, gid, no extra groups)
    and reports through a pipe (`report(bytes)` on the way, body's return value at the
    end). Modules must be imported before (the user cannot read the interpreter's files)."""

    def __init__(self, user, body):
        self.r, w = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:
            os.close(self.r)
            code = 0
            try:
                os.setgroups([])
                os.setgid(user.pw_gid)
                os.setuid(user.pw_uid)
                out = body(lambda msg: os.write(w, msg)) or b""
                os.write(w, out)
            except BaseException as e:  # report, never return into the test's code
                os.write(w, f"ERROR {e!r}".encode())
                code = 1
            finally:
                os._exit(code)
        os.close(w)
        self.buf = b""

    def read_until(self, marker, timeout=60):
        """Waits (on the pipe, not a clock) until the child has written `marker`."""
        deadline = time.time() + timeout
        while marker not in self.buf:
            left = deadline - time.time()
            if left <= 0 or not select.select([self.r], [], [], left)[0]:
                fail(f"the user's process did not report {marker!r} within {timeout} s: {self.buf[-300:]!r}")
            chunk = os.read(self.r, 65536)
            if not chunk:
                fail(f"the user's process ended before reporting {marker!r}: {self.buf[-300:]!r}")
            self.buf += chunk
        return self.buf

    def result(self, timeout=120):
        deadline = time.time() + timeout
        while True:
            left = deadline - time.time()
            if left <= 0 or not select.select([self.r], [], [], left)[0]:
                fail(f"the user's process did not finish within {timeout} s")
            chunk = os.read(self.r, 65536)
            if not chunk:
                break
            self.buf += chunk
        os.close(self.r)
        os.waitpid(self.pid, 0)
        return self.buf

    def kill(self):
        try:
            os.kill(self.pid, 9)
            os.waitpid(self.pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass


def connect(sock_path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(sock_path)
    return s


def read_reply(s, timeout=60):
    """One reply line from a connected socket, parsed."""
    s.settimeout(timeout)
    buf = b""
    while b"\n" not in buf:
        chunk = s.recv(65536)
        if not chunk:
            raise ConnectionError("closed without a reply: " + buf[:200].decode(errors="replace"))
        buf += chunk
    return json.loads(buf.split(b"\n", 1)[0])
