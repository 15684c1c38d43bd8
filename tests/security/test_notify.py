"""Notifications (issue 32 item 6): `aegis submit --notify` end to end, aegisd as root on
emulated GPUs, jobs of an unprivileged test user.

1. The admin's command hook gets a job's start and end payloads on stdin, runs as the job's
   owner (never root), and a job without --notify gets nothing. `--notify bogus` is one line
   naming --notify, and nothing is queued.
2. A hook that hangs (notify_timeout_s 300) or fails does not delay the next job's start:
   that job runs and completes long before the hanging delivery's timeout, and the failure
   is logged.
3. notify_url: a local HTTP server receives the POSTed payload.
Usage: test_notify.py BUILD_DIR
"""
import http.server
import json
import os
import pwd
import sys
import threading

from secharness import Daemon, as_user, fail, shared_dir, users, wait_for

HOOK = """#!/bin/sh
# Writes who ran it and what it got, one file each per job and event.
out={out}
id -u > "$out/$AEGIS_JOB_ID-$AEGIS_NOTIFY_EVENT.uid.tmp"
cat > "$out/$AEGIS_JOB_ID-$AEGIS_NOTIFY_EVENT.json.tmp"
mv "$out/$AEGIS_JOB_ID-$AEGIS_NOTIFY_EVENT.uid.tmp" "$out/$AEGIS_JOB_ID-$AEGIS_NOTIFY_EVENT.uid"
mv "$out/$AEGIS_JOB_ID-$AEGIS_NOTIFY_EVENT.json.tmp" "$out/$AEGIS_JOB_ID-$AEGIS_NOTIFY_EVENT.json"
{tail}
"""


def write_hook(d, out, tail=""):
    path = os.path.join(d.dir, "hook.sh")  # root's, 0755, in a root-owned 0755 directory
    with open(path, "w") as f:
        f.write(HOOK.format(out=out, tail=tail))
    os.chmod(path, 0o755)
    return path


def notified(out, job, event):
    p = os.path.join(out, f"{job}-{event}.json")
    if not os.path.exists(p):
        return None
    with open(p) as f, open(os.path.join(out, f"{job}-{event}.uid")) as u:
        return json.load(f), int(u.read())


def hook_gets_start_and_end(build, user):
    d = Daemon(build, gpus="1x40960", shared_gpus=True)
    try:
        out = shared_dir(d, "out", 0o1777)
        work = shared_dir(d, "work")
        # Written before the daemon reads its config: the hook must exist and be root's.
        hook = write_hook(d, out)
        with open(d.config, "a") as f:
            f.write(f'notify_command = "{hook}"\nnotify_timeout_s = 30\n')
        d.start()
        before = len(d.jobs())
        bad = as_user(user.pw_name, [d.aegis, "--socket", d.socket, "submit", "--notify", "bogus", "--", "true"],
                      cwd=work)
        lines = bad.stderr.strip().splitlines()
        if bad.returncode == 0 or len(lines) != 1 or "--notify" not in lines[0] or "bogus" not in lines[0]:
            fail(f"--notify bogus: exit {bad.returncode}, stderr {bad.stderr!r}: expected one line naming --notify")
        if len(d.jobs()) != before:
            fail("--notify bogus queued a job")
        told = d.submit("--name", "told", "--notify", "start,end", "--", "true", user=user.pw_name, cwd=work)
        quiet = d.submit("--name", "quiet", "--", "true", user=user.pw_name, cwd=work)
        d.wait_all_final([told, quiet], timeout=120)
        got = {e: wait_for(f"the {e} notification of job {told}", lambda e=e: notified(out, told, e), timeout=60)
               for e in ("start", "end")}
        for event, (payload, uid) in got.items():
            if uid != user.pw_uid:
                fail(f"the hook ran as uid {uid} for the {event} event, not as the job's owner {user.pw_uid}")
            want = {"version": 1, "job": told, "user": user.pw_name, "uid": user.pw_uid, "name": "told",
                    "event": event, "state": "running" if event == "start" else "completed", "attempt": 1}
            wrong = {k: (payload.get(k), v) for k, v in want.items() if payload.get(k) != v}
            if wrong or not isinstance(payload.get("time"), (int, float)) or "reason" not in payload:
                fail(f"{event} payload {payload}: wrong fields {wrong}")
        if d.show(told)["request"].get("notify") != "start,end":
            fail(f"aegis show does not carry the notify set: {d.show(told)['request']}")
        # Nothing else was told: the quiet job, and events the job did not ask for.
        files = sorted(f for f in os.listdir(out) if f.endswith(".json"))
        if files != [f"{told}-end.json", f"{told}-start.json"]:
            fail(f"notifications beyond the two asked for: {files}")
        print(f"OK: the hook got job {told}'s start and end payloads as uid {user.pw_uid}; "
              "--notify bogus was refused with one line; a job without --notify got nothing")
    finally:
        d.cleanup()


def hanging_hook_never_delays(build, user):
    d = Daemon(build, gpus="1x40960", shared_gpus=True)
    try:
        out = shared_dir(d, "out", 0o1777)
        work = shared_dir(d, "work")
        # The hook hangs for the job named "hang" (killed only after 300 s) and fails for the rest.
        tail = ('case "$(cat "$out/$AEGIS_JOB_ID-$AEGIS_NOTIFY_EVENT.json")" in *\'"name":"hang"\'*) sleep 1000;; esac\n'
                'exit 1')
        hook = write_hook(d, out, tail)
        with open(d.config, "a") as f:
            f.write(f'notify_command = "{hook}"\nnotify_timeout_s = 300\n')
        d.start()
        failing = d.submit("--name", "failing", "--notify", "end", "--", "true", user=user.pw_name, cwd=work)
        wait_for(f"job {failing}'s failed delivery in the log",
                 lambda: f"notify: job {failing} ({user.pw_name}) end: not delivered" in open(d.log).read(),
                 timeout=120)
        hang = d.submit("--name", "hang", "--notify", "start", "--", "true", user=user.pw_name, cwd=work)
        wait_for(f"job {hang}'s start delivery to begin", lambda: notified(out, hang, "start"), timeout=60)
        # The one delivery worker is now held by the hanging hook; jobs go on regardless.
        after = [d.submit("--name", f"next{i}", "--notify", "start,end", "--", "true", user=user.pw_name, cwd=work)
                 for i in range(3)]
        # Far less than the 300 s a delivery on the scheduling path would hold it for.
        states = d.wait_all_final([hang, *after], timeout=150)
        if any(states[j] != "completed" for j in (hang, *after)):
            fail(f"jobs did not complete while a hook hung: {states}")
        told = [f for f in os.listdir(out) if f.endswith(".json") and f.split("-")[0] in map(str, after)]
        if told:
            fail(f"notifications delivered past a hook that should still hang: {told}")
        print(f"OK: jobs {after} started and completed while the hook hung on job {hang}'s start "
              f"(notify_timeout_s 300); job {failing}'s failed delivery was logged")
    finally:
        d.cleanup()


def http_post_receives_the_payload(build, user):
    received = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers["Content-Length"]))
            received.append((self.path, self.headers.get("Content-Type"), json.loads(body)))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/aegis/notify"
    d = Daemon(build, gpus="1x40960", shared_gpus=True, settings={"notify_url": url, "notify_timeout_s": 30})
    try:
        d.start()
        work = shared_dir(d, "work")
        job = d.submit("--name", "posted", "--notify", "end", "--", "true", user=user.pw_name, cwd=work)
        d.wait_all_final([job], timeout=120)
        wait_for("the POST of the end notification", lambda: received, timeout=60)
        path, ctype, payload = received[0]
        if path != "/aegis/notify" or ctype != "application/json":
            fail(f"POST to {path} with Content-Type {ctype}")
        if payload.get("job") != job or payload.get("event") != "end" or payload.get("user") != user.pw_name:
            fail(f"POSTed payload {payload}")
        if len(received) != 1:
            fail(f"POSTs beyond the one asked for: {received}")
        print(f"OK: {url} received job {job}'s end payload")
    finally:
        d.cleanup()
        server.shutdown()


def main(build):
    user = users()[0]
    hook_gets_start_and_end(build, user)
    hanging_hook_never_delays(build, user)
    http_post_receives_the_payload(build, user)


if __name__ == "__main__":
    main(sys.argv[1])
