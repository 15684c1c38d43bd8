"""The socket attacks of docs/security.md (item 5), shared by tests/security/test_socket_dos.py
(which asserts the safe outcome) and bench/bench_dos.py (which measures how long another
user waits for `aegis queue` under each). Each attack runs as an unprivileged user in a
child process (secharness.AsUser) and holds its connections until killed.
"""
import encodings.idna  # noqa: F401  (socket names are encoded with it; the users cannot import it later)
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


# --- The dashboard's slow HTTP attack (issue 33, item 6) -------------------------------------
# test_slow_http.py asserts the safe outcome; bench_dos.py measures the victim's first byte.

def _dashboard_conn(port, timeout=0.05):  # short: a full backlog must not stall the attack
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.setblocking(False)
    return s


def slow_http(port, user, dribblers=150, silent=40, unread=10, every_s=1.0):
    """Slowloris against the dashboard on 127.0.0.1:`port`: `dribblers` connections send a
    request head one byte every `every_s` seconds and never finish it, `silent` ones send
    nothing, `unread` ones ask for the page again and again and never read a reply. A dropped
    connection is reopened at the next round, so the pressure lasts until the attack is killed."""
    head = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 100000

    def body(report):
        slots = [["dribble", None, 0] for _ in range(dribblers)] + [["silent", None, 0] for _ in range(silent)] + \
                [["unread", None, 0] for _ in range(unread)]
        opened = 0

        def refill():
            nonlocal opened
            for slot in slots:
                if slot[1] is not None:
                    continue
                try:
                    slot[1], slot[2] = _dashboard_conn(port), 0
                    opened += 1
                except OSError:
                    pass

        def drop(slot):
            try:
                slot[1].close()
            except OSError:
                pass
            slot[1] = None

        refill()
        report(f"ready {sum(1 for s in slots if s[1])}\n".encode())
        while True:
            for slot in slots:
                kind, s, sent = slot
                if s is None:
                    continue
                try:
                    if kind == "dribble":
                        slot[2] += s.send(head[sent:sent + 1])
                    elif kind == "unread":
                        s.send(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                    elif s.recv(1) == b"":  # silent: only notices being closed
                        drop(slot)
                except (BlockingIOError, InterruptedError):
                    pass
                except OSError:
                    drop(slot)
            time.sleep(every_s)
            refill()
    return AsUser(user, body)


def http_get_timed(port, path, timeout):
    """(status, seconds to the first byte, seconds to the whole reply, body) of one GET on a
    new connection; status 0 when it failed or took longer than `timeout`."""
    t0 = time.monotonic()
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        s.settimeout(max(0.001, timeout - (time.monotonic() - t0)))
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())
        first = s.recv(65536)
        ttfb = time.monotonic() - t0
        data = first
        while first:
            s.settimeout(max(0.001, timeout - (time.monotonic() - t0)))
            first = s.recv(65536)
            data += first
        s.close()
    except OSError:
        return 0, timeout, timeout, b""
    total = time.monotonic() - t0
    headers, _, body = data.partition(b"\r\n\r\n")
    try:
        status = int(headers.split(b" ", 2)[1])
    except (IndexError, ValueError):
        status = 0
    return status, ttfb, total, body


def dashboard_latency(port, user, paths=("/", "/api/queue"), n=5, timeout=10.0, pause_s=0.02):
    """`n` rounds of one GET per path by `user`, each on a new connection:
    [path, status, ttfb_s, total_s, body_bytes, body_head] per request."""
    def body(report):
        out = []
        for _ in range(n):
            for path in paths:
                status, ttfb, total, text = http_get_timed(port, path, timeout)
                out.append([path, status, ttfb, total, len(text), text[:40].decode(errors="replace")])
                time.sleep(pause_s)
        return json.dumps(out).encode()
    out = AsUser(user, body).result(timeout=n * len(paths) * (timeout + 5) + 60)
    if out.startswith(b"ERROR"):
        raise RuntimeError(out.decode(errors="replace"))
    return json.loads(out)
