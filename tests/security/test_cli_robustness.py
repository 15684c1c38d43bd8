"""The aegis command line against a hung daemon, odd replies and odd arguments.

(a) A daemon that accepts and never answers, or never accepts (its backlog full), must not
    hang `aegis`: every request gives up after --timeout (or AEGIS_TIMEOUT, else 30 s)
    with one line saying so; `aegis run` rides out a daemon that stops answering for a
    while (SIGSTOP), as it rides out a restart.
(b) A job submitted through the JSON API without a workdir (allowed; the daemon leaves
    empty fields out of its replies) prints with `aegis show`, `queue`, `history`.
(c) An option given with an empty value (`--mem "$UNSET"`) is an error naming it, not
    the option left out.
(d) Every usage error is exactly one line on stderr, exit status 2.
(e) `aegis logs` prints all of a log larger than one reply (3 MiB), and so does `aegis run`.
Usage: test_cli_robustness.py BUILD_DIR
"""
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

from secharness import Daemon, fail, raw_call, shared_dir, users, wait_for

HANG_LIMIT_S = 120  # far past any timeout used here: only a hung aegis gets there


def run(argv, env=None, **kw):
    """Runs aegis; a hang is a failure of its own, not a hung test."""
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=HANG_LIMIT_S,
                              env={**os.environ, **(env or {})}, **kw)
    except subprocess.TimeoutExpired:
        fail(f"{' '.join(argv)}: still running after {HANG_LIMIT_S} s (hung)")


def one_error_line(r, what, *needles, code=None):
    """The run failed with exactly one stderr line holding every needle."""
    lines = r.stderr.splitlines()
    if r.returncode == 0 or (code is not None and r.returncode != code):
        fail(f"{what}: exit status {r.returncode}, expected {code or 'non-zero'}; stderr={r.stderr!r}")
    if len(lines) != 1 or not r.stderr.endswith("\n") or not lines[0].startswith("aegis: error: "):
        fail(f"{what}: expected one line 'aegis: error: ...' on stderr, got {r.stderr!r}")
    for n in needles:
        if n not in lines[0]:
            fail(f"{what}: {n!r} not in {lines[0]!r}")


# --- (a) hung daemons ---------------------------------------------------------------

class SilentServer:
    """A Unix socket that accepts connections and holds them, never reading or replying."""

    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(path)
        self.sock.listen(16)
        self.held = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                self.held.append(self.sock.accept()[0])
            except OSError:
                return

    def close(self):
        self.sock.close()
        for c in self.held:
            c.close()


def full_backlog(path):
    """A listener that never accepts, its backlog filled: a blocking connect would wait."""
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(0)
    fillers = []
    for _ in range(64):
        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        c.setblocking(False)
        try:
            c.connect(path)
        except BlockingIOError:
            c.close()
            return server, fillers
        fillers.append(c)
    fail("could not fill the listener's backlog: the test proves nothing")


def expect_timeout(aegis, sock, what, seconds, args, env=None):
    start = time.monotonic()
    r = run([aegis, "--socket", sock, *args], env=env)
    took = time.monotonic() - start
    one_error_line(r, what, f"aegisd at {sock} did not answer within {seconds} s", "AEGIS_TIMEOUT")
    if took > seconds + 8:
        fail(f"{what}: gave up after {took:.1f} s, with a {seconds} s timeout")


def hung_daemons(aegis, scratch):
    silent_path = os.path.join(scratch, "silent.sock")
    silent = SilentServer(silent_path)
    backlog_path = os.path.join(scratch, "backlog.sock")
    server, fillers = full_backlog(backlog_path)
    try:
        expect_timeout(aegis, silent_path, "--timeout 2, accepted and never answered", 2, ["--timeout", "2", "queue"])
        expect_timeout(aegis, silent_path, "AEGIS_TIMEOUT=2, accepted and never answered", 2, ["show", "1"],
                       env={"AEGIS_TIMEOUT": "2"})
        expect_timeout(aegis, silent_path, "--timeout 1 wins over AEGIS_TIMEOUT=100", 1, ["--timeout", "1", "gpus"],
                       env={"AEGIS_TIMEOUT": "100"})
        expect_timeout(aegis, silent_path, "logs --follow", 2, ["--timeout", "2", "logs", "--follow", "1"])
        expect_timeout(aegis, backlog_path, "--timeout 2, never accepted", 2, ["--timeout", "2", "queue"])
        expect_timeout(aegis, backlog_path, "submit, never accepted", 2, ["--timeout", "2", "submit", "--", "true"])
        one_error_line(run([aegis, "--socket", silent_path, "queue"], env={"AEGIS_TIMEOUT": "soon"}),
                       "AEGIS_TIMEOUT=soon", "AEGIS_TIMEOUT: 'soon' is not a number of seconds", code=2)
        one_error_line(run([aegis, "--socket", silent_path, "--timeout", "0", "queue"]), "--timeout 0",
                       "--timeout: '0' is not a number of seconds", code=2)
        # aegis run: a submit that never got out is retried for --daemon-wait, then given up.
        start = time.monotonic()
        r = run([aegis, "--socket", backlog_path, "--timeout", "1", "run", "--daemon-wait", "3", "--", "true"])
        if r.returncode == 0 or "did not answer within 1 s" not in r.stderr or "retrying for 3 s" not in r.stderr:
            fail(f"aegis run against a daemon that never accepts: rc={r.returncode} stderr={r.stderr!r}")
        if time.monotonic() - start > 3 + 1 + 10:
            fail(f"aegis run gave up only after {time.monotonic() - start:.1f} s (--daemon-wait 3, --timeout 1)")
    finally:
        silent.close()
        server.close()
        for c in fillers:
            c.close()


def run_rides_out_a_stopped_daemon(d, work):
    """`aegis run` waits through a daemon that stops answering (SIGSTOP), then finishes."""
    gate = os.path.join(work, "go")
    script = f"echo started; while [ ! -e {gate} ]; do sleep 0.1; done; echo finished"
    p = subprocess.Popen([d.aegis, "--socket", d.socket, "--timeout", "1", "run", "--daemon-wait", "300", "--",
                          "/bin/sh", "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=work)
    err = []
    reader = threading.Thread(target=lambda: err.extend(iter(p.stderr.readline, "")), daemon=True)
    reader.start()
    stopped = False
    try:
        wait_for("aegis run to submit its job", lambda: any("submitted" in line for line in err), timeout=60)
        os.kill(d.proc.pid, signal.SIGSTOP)
        stopped = True
        wait_for("aegis run to notice the stopped daemon",
                 lambda: any("did not answer within 1 s" in line and "retrying" in line for line in err), timeout=60)
        if p.poll() is not None:
            fail(f"aegis run ended ({p.returncode}) when aegisd stopped answering: {''.join(err)!r}")
        os.kill(d.proc.pid, signal.SIGCONT)
        stopped = False
        open(gate, "w").close()
        try:
            p.wait(timeout=HANG_LIMIT_S)  # its output is two short lines: the pipe cannot fill
        except subprocess.TimeoutExpired:
            fail(f"aegis run still running {HANG_LIMIT_S} s after aegisd came back: {''.join(err)!r}")
        out = p.stdout.read()
        reader.join(timeout=10)
    finally:
        if stopped:
            os.kill(d.proc.pid, signal.SIGCONT)
        if p.poll() is None:
            p.kill()
    if p.returncode != 0 or out != "started\nfinished\n" or not any("aegisd is back" in line for line in err):
        fail(f"aegis run through a stopped daemon: rc={p.returncode} stdout={out!r} stderr={''.join(err)!r}")


# --- (b) optional fields ------------------------------------------------------------

def job_without_workdir(d):
    reply = raw_call(d.socket, {"op": "submit", "job": {"command": ["true"], "name": "noworkdir"}})
    if not reply.get("ok"):
        fail(f"the API refused a job without workdir: {reply}")
    job = reply["id"]
    wait_for(f"job {job} to end", lambda: d.show(job)["state"] in ("completed", "failed"), timeout=120)
    if "workdir" in d.show(job)["request"]:
        fail("the daemon now sends the workdir it chose: this test no longer covers an absent field")
    r = run([d.aegis, "--socket", d.socket, "show", str(job)])
    if r.returncode != 0 or f"job {job} (noworkdir)" not in r.stdout or "workdir    -" not in r.stdout:
        fail(f"aegis show of a job without workdir: rc={r.returncode} stdout={r.stdout!r} stderr={r.stderr!r}")
    for args in (["queue", "--all"], ["history"], ["gpus"]):
        r = run([d.aegis, "--socket", d.socket, *args])
        if r.returncode != 0 or (args[0] != "gpus" and "noworkdir" not in r.stdout):
            fail(f"aegis {' '.join(args)}: rc={r.returncode} stderr={r.stderr!r}")


# --- (c) and (d) arguments ----------------------------------------------------------

def arguments(d):
    aegis = [d.aegis, "--socket", d.socket]
    before = len(d.jobs())
    for flag, needle in (("--mem", "--mem: '' is not a memory size (e.g. 12000, 12G, 1.5GiB)"),
                         ("--name", "--name: must not be empty"), ("--workdir", "--workdir: must not be empty"),
                         ("--spec", "--spec: must not be empty"), ("--model-spec", "--model-spec: must not be empty")):
        one_error_line(run([*aegis, "submit", flag, "", "--", "true"]), f"submit {flag} ''", needle, code=2)
    one_error_line(run([d.aegis, "--socket", "", "queue"]), "--socket ''", "--socket: must not be empty", code=2)
    if len(d.jobs()) != before:
        fail("a submit with an empty option queued a job")
    for args, needle in (([], "A subcommand is required"),
                         (["submit"], "no command"),
                         (["queue", "--bogus"], "--bogus"),
                         (["show"], "id is required"),
                         (["submit", "--gpus", "0", "--", "true"], "--gpus: Value 0 not in range"),
                         (["submit", "--mem", "12X", "--", "true"], "--mem: '12X' is not a memory size")):
        one_error_line(run([*aegis, *args]), f"aegis {' '.join(args)}", needle, "--help", code=2)


# --- (e) long logs ------------------------------------------------------------------

LINES = 314573  # 10 bytes each: 3 MiB and a little, three replies and more
WRITER = f"import sys\nsys.stdout.write(''.join('%09d\\n' % i for i in range({LINES})))"
EXPECTED = "".join("%09d\n" % i for i in range(LINES))


def long_logs(d, work):
    job = d.submit("--name", "chatty", "--", sys.executable, "-c", WRITER, cwd=work)
    d.wait_all_final([job], timeout=120)
    r = run([d.aegis, "--socket", d.socket, "logs", str(job)])
    if r.returncode != 0 or r.stdout != EXPECTED:
        fail(f"aegis logs printed {len(r.stdout)} of {len(EXPECTED)} bytes (rc={r.returncode}, {r.stderr!r})")
    r = run([d.aegis, "--socket", d.socket, "run", "--", sys.executable, "-c", WRITER], cwd=work)
    if r.returncode != 0 or r.stdout != EXPECTED:
        fail(f"aegis run passed on {len(r.stdout)} of {len(EXPECTED)} bytes (rc={r.returncode}, {r.stderr[-500:]!r})")


def main(build):
    users()  # root, or skip
    d = Daemon(build, settings={"observation_window_s": 1.0})
    try:
        hung_daemons(d.aegis, d.dir)
        d.start()
        work = shared_dir(d, "work")
        job_without_workdir(d)
        arguments(d)
        long_logs(d, work)
        run_rides_out_a_stopped_daemon(d, work)
        print("OK: timeouts against hung daemons (one line, --timeout and AEGIS_TIMEOUT), aegis run through a "
              "stopped daemon, show without workdir, empty options, one-line usage errors, 3 MiB logs")
    finally:
        d.cleanup()


if __name__ == "__main__":
    main(sys.argv[1])
