"""Attack: a job that cannot start (docs/security.md, item 6).

A job with one argument over the kernel's 128 KiB per-string limit (execve fails with
E2BIG) was relaunched every second forever, keeping its GPU closed. Safe outcome: it ends
as failed, after one attempt, with the errno in its reason; so do a command that does not
exist and a working directory the user cannot enter (refused at submit: a root daemon
does not say whether a path the user cannot reach exists).
Usage: test_exec_failure.py BUILD_DIR
"""
import json
import os
import sys

from secharness import AsUser, Daemon, connect, fail, read_reply, shared_dir, users


def main(build):
    u1, _ = users()
    d = Daemon(build, settings={"observation_window_s": 1.0})
    try:
        d.start()
        work = shared_dir(d, "work")
        # Through the API: no command line could even pass such an argument to `aegis`.
        def submit_big(report):
            s = connect(d.socket)
            job = {"name": "e2big", "command": ["/bin/echo", "x" * (200 * 1024)], "workdir": work}
            s.sendall(json.dumps({"op": "submit", "job": job}).encode() + b"\n")
            return json.dumps(read_reply(s)).encode()
        reply = json.loads(AsUser(u1, submit_big).result())
        if not reply.get("ok"):
            fail(f"the API refused the job: {reply}")
        big = reply["id"]
        missing = d.submit("--name", "enoent", "--", "/no/such/program", user=u1.pw_name, cwd=work)
        states = d.wait_all_final([big, missing], timeout=60)
        for job, errno_name in ((big, "E2BIG"), (missing, "ENOENT")):
            shown = d.show(job)
            if states[job] != "failed" or shown["attempts"] != 1:
                fail(f"job {job}: {states[job]} after {shown['attempts']} attempts, expected failed after 1")
            if errno_name not in shown["reason"] or "failed to start" not in shown["reason"]:
                fail(f"job {job}: reason {shown['reason']!r} does not name {errno_name}")
        # A directory the user cannot reach: refused at submit, the same answer as for a
        # directory that does not exist.
        secret = os.path.join(d.dir, "secret")
        os.makedirs(os.path.join(secret, "inside"))
        os.chmod(secret, 0o700)
        for path in (os.path.join(secret, "inside"), os.path.join(secret, "nothing-here")):
            r = d.run_cli("submit", "--workdir", path, "--", "true", user=u1.pw_name, check=False)
            if r.returncode == 0 or f"job.workdir: {path} is not a directory" not in r.stderr:
                fail(f"submit with workdir {path}: rc={r.returncode} {r.stderr!r}")
        print(f"OK: a start that fails ends the job after one attempt with its errno "
              f"({d.show(big)['reason'][:90]}...); unreachable working directories are refused alike")
    finally:
        d.cleanup()


if __name__ == "__main__":
    main(sys.argv[1])
