#!/usr/bin/env python3
"""aegisd's figures on emulated GPUs (issue 4 targets), printed, never asserted:
  1. submissions per second through the socket with durable writes (fsync per commit);
  2. scheduling pass latency with 8 GPUs and 1,000 queued jobs (p50, p99 from the daemon's
     own metrics);
  3. daemon CPU use while sampling 8 emulated GPUs at 1 Hz (over 60 s);
  4. daemon resident memory.
Usage: bench/bench_daemon.py [BUILD_DIR]
"""
import os
import re
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "daemon"))
from harness import Daemon  # noqa: E402

CLK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK


def rss_mb(pid):
    m = re.search(r"VmRSS:\s+(\d+) kB", open(f"/proc/{pid}/status").read())
    return int(m.group(1)) / 1024


def metrics(port):
    return urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()


def main(build):
    build = os.path.abspath(build)
    port = 19400 + os.getpid() % 500
    # 1 and 2: durable submissions, then passes over a 1,000-job queue.
    # One user submits all 1,024 jobs: lift the per-user job limit (1000 by default).
    d = Daemon(build, gpus="8x81920", settings={"durability": "full", "metrics_port": port,
                                                "telemetry_sample_hz": 10.0, "max_jobs_per_user": 0})
    try:
        d.start()
        for conns, each in ((1, 256), (16, 48)):
            out = subprocess.run([os.path.join(build, "bench/bench_submit"), d.socket, str(conns), str(each)],
                                 capture_output=True, text=True).stdout.strip()
            print("1.", out)
        # The queue is now 1,024 jobs (8 started). Let the 10 Hz ticks run for 20 s.
        time.sleep(20)
        m = metrics(port)
        q = {k: float(v) for k, v in re.findall(r'aegis_tick_seconds\{quantile="([0-9.]+)"\} ([0-9.e-]+)', m)}
        e = {k: float(v) for k, v in re.findall(r'aegis_decide_seconds\{quantile="([0-9.]+)"\} ([0-9.e-]+)', m)}
        queued = re.search(r'aegis_queue_length\{queue="main"\} (\d+)', m).group(1)
        print(f"2. scheduler tick (snapshot + engine) with 8 GPUs and {queued} queued jobs: p50 {e['0.5'] * 1e3:.3f} ms, "
              f"p99 {e['0.99'] * 1e3:.3f} ms (target p99 < 1 ms)")
        print(f"   whole pass incl. recording and starting jobs (fsync, fork): p50 {q['0.5'] * 1e3:.3f} ms, "
              f"p99 {q['0.99'] * 1e3:.3f} ms")
    finally:
        d.cleanup()
    # 3 and 4: an idle daemon sampling 8 emulated GPUs at 1 Hz, with 4 jobs running.
    d = Daemon(build, gpus="8x81920", settings={"observation_window_s": 1.0})
    try:
        d.start()
        for _ in range(4):
            d.submit("--mem", "2000", "--", d.fakejob, "--mem", "1000", "--smact", "0.3", "--seconds", "600")
        time.sleep(5)
        pid = d.proc.pid
        c0, t0 = cpu_seconds(pid), time.time()
        time.sleep(60)
        c1, t1 = cpu_seconds(pid), time.time()
        print(f"3. daemon CPU at 1 Hz sampling of 8 emulated GPUs, 4 jobs running: "
              f"{100 * (c1 - c0) / (t1 - t0):.3f} % of one core over {t1 - t0:.0f} s (target < 1 %)")
        print(f"4. daemon resident memory: {rss_mb(pid):.1f} MB (target < 30 MB)")
    finally:
        d.cleanup()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "build")
