"""The socket attacks of docs/security.md (item 5), shared by tests/security/test_socket_dos.py
(which asserts the safe outcome) and bench/bench_dos.py (which measures how long another
user waits for `aegis queue` under each). Each attack runs as an unprivileged user in a
child process (secharness.AsUser) and holds its connections until killed.
"""
import json
import os
import socket
import threading
import time

from secharness import AsUser, connect, read_reply

QUEUE = b'{"op":"queue"}\n'


def pipelined_unread(d, user, conns=16, total=400):
    """`total` requests pipelined over `conns` connections; no reply is ever read."""
    def body(report):
        socks = []
        for _ in range(conns):
            try:
                socks.append(connect(d.socket))
            except OSError:
                pass
        for i, s in enumerate(socks):
            try:
                s.sendall(QUEUE * (total // len(socks) + (i < total % len(socks))))
            except OSError:
                pass
        report(f"ready {len(socks)}\n".encode())
        time.sleep(3600)
    return AsUser(user, body)


def partial_lines(d, user, conns=100, size=4 << 20, send_for=20):
    """`conns` connections, each sending `size` bytes of a request line that never ends
    (for `send_for` seconds at most: what aegisd does not read stays in the kernel)."""
    def body(report):
        socks = []
        for _ in range(conns):
            try:
                s = connect(d.socket)
                s.setblocking(False)
                socks.append([s, size - 1])
            except OSError:
                pass
        chunk = b"x" * 65536
        deadline = time.time() + send_for
        while time.time() < deadline and any(left > 0 for _, left in socks):
            for entry in socks:
                s, left = entry
                if left <= 0:
                    continue
                try:
                    entry[1] -= s.send(chunk[:min(left, len(chunk))])
                except BlockingIOError:
                    pass
                except OSError:
                    entry[1] = 0  # refused or closed by the daemon
            time.sleep(0.001)
        report(f"ready {len(socks)}\n".encode())
        time.sleep(3600)
    return AsUser(user, body)


def idle_connections(d, user, n=1100):
    """`n` connections that send nothing."""
    def body(report):
        socks = []
        deadline = time.time() + 30
        while len(socks) < n and time.time() < deadline:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.setblocking(False)
            try:
                s.connect(d.socket)
                socks.append(s)
            except BlockingIOError:  # the backlog is full: the daemon is working through it
                s.close()
                time.sleep(0.01)
            except OSError:
                s.close()
        report(f"ready {len(socks)}\n".encode())
        time.sleep(3600)
    return AsUser(user, body)


def submission_flood(d, user, workdir, total=20000, conns=16, batch=50):
    """`total` submissions over `conns` connections, `batch` pipelined at a time; reports
    how many were accepted and the first refusal."""
    def body(report):
        counts = {"ok": 0, "refused": 0, "error": ""}
        lock = threading.Lock()
        job = {"command": ["/bin/sleep", "3600"], "workdir": workdir, "mem_mib": 39000}
        line = json.dumps({"op": "submit", "job": job}).encode() + b"\n"

        def one(n):
            s = connect(d.socket)
            s.settimeout(120)
            buf = b""
            while n > 0:
                k = min(batch, n)
                s.sendall(line * k)
                got = 0
                while got < k:
                    chunk = s.recv(65536)
                    if not chunk:
                        return
                    buf += chunk
                    while b"\n" in buf:
                        reply, buf = buf.split(b"\n", 1)
                        r = json.loads(reply)
                        got += 1
                        with lock:
                            if r.get("ok"):
                                counts["ok"] += 1
                            else:
                                counts["refused"] += 1
                                counts["error"] = counts["error"] or r.get("error", "")
                n -= k
        threads = [threading.Thread(target=one, args=(total // conns,)) for _ in range(conns)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return json.dumps(counts).encode()
    return AsUser(user, body)


def victim_latency(d, user, n=5, op=QUEUE):
    """`n` requests by `user`, one connection each (as the CLI does): their latencies (s)
    and whether each got an ok reply."""
    def body(report):
        out = []
        for _ in range(n):
            t0 = time.monotonic()
            try:
                s = connect(d.socket)
                s.sendall(op)
                ok = bool(read_reply(s, timeout=60).get("ok"))
                s.close()
            except (OSError, ValueError, ConnectionError):
                ok = False
            out.append([time.monotonic() - t0, ok])
            time.sleep(0.02)
        return json.dumps(out).encode()
    return json.loads(AsUser(user, body).result())


def proc_status(pid, key):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0


def daemon_rss_mb(d):
    return proc_status(d.proc.pid, "VmRSS") / 1024


def daemon_cpu_s(d):
    f = open(f"/proc/{d.proc.pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def daemon_fds(d):
    return len(os.listdir(f"/proc/{d.proc.pid}/fd"))


# --- issue 33 item 1: listings that grow with one user's records ---
BIG_ARG_BYTES = (1 << 20) - 64  # a job's argv may hold 1 MiB in all (api::kMaxCommandBytes)


def big_command_jobs(d, user, workdir, count):
    """`user` queues `count` jobs whose argv carries ~1 MiB each (a last arg of 'x's), over
    the socket; they wait behind the GPUs' memory (mem_mib near a whole GPU's). Returns the
    ids accepted (the per-user limit refuses the rest)."""
    def body(report):
        ids = []
        s = connect(d.socket)
        for i in range(count):
            job = {"command": ["/bin/sleep", "3600", str(i) + "x" * BIG_ARG_BYTES], "workdir": workdir,
                   "mem_mib": 39000}
            s.sendall(json.dumps({"op": "submit", "job": job}).encode() + b"\n")
            r = read_reply(s, timeout=120)
            if not r.get("ok"):
                break
            ids.append(r["id"])
        return json.dumps(ids).encode()
    return json.loads(AsUser(user, body).result(timeout=600))


def slow_listing_readers(d, user, request, readers=4, chunk=4096, pause_s=0.02):  # pause_s=0: hammering
    """`readers` connections of `user`, each sending `request` and reading its reply `chunk`
    bytes every `pause_s` (a slow client); reports "ready" once all have read a first chunk,
    then keeps reading (asking again when a reply ends) until killed."""
    line = json.dumps(request).encode() + b"\n"

    def body(report):
        socks = []
        for _ in range(readers):
            s = connect(d.socket)
            s.sendall(line)
            socks.append(s)
        for s in socks:
            s.settimeout(120)
            s.recv(chunk)
        report(b"ready\n")
        while True:
            for s in socks:
                data = s.recv(chunk)
                if not data or data.endswith(b"\n"):
                    s.sendall(line)
            if pause_s:
                time.sleep(pause_s)
    return AsUser(user, body)


def dashboard_ttfb(port, path, n=40):
    """`n` GETs of the dashboard's `path` (a new connection each): the seconds to the first
    byte of each reply, and whether it was a 200."""
    import http.client
    out = []
    for _ in range(n):
        t0 = time.monotonic()
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            c.request("GET", path)
            r = c.getresponse()  # returns once the status line and headers are in
            t = time.monotonic() - t0
            r.read()
            c.close()
            out.append([t, r.status == 200])
        except OSError:
            out.append([time.monotonic() - t0, False])
        time.sleep(0.02)
    return out
