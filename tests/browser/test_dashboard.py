#!/usr/bin/env python3
"""aegisd's web dashboard in headless Chromium, against a live aegisd on one emulated GPU.

    test_dashboard.py BUILD_DIR [--screenshots DIR]

Two users' jobs: the first runs, the second (with a secret in its environment) waits for
memory. Checks that the page shows what `aegis gpus --json` and `aegis queue --all --json`
show; that the second job appears running, without a reload, once the first is cancelled;
its job page; that nothing overflows at desktop (1280) and phone (390) widths; that the
secret never appears in any dashboard response (TCP and Unix socket); that the dashboard
is read-only; and that clients holding every dashboard connection stall neither aegisd
nor, once they are cut by the deadline, the dashboard. Screenshots go to DIR (the docs'
are docs/dashboard-desktop.png and docs/dashboard-phone.png).
Needs root (two Unix users) and Chromium; exits 77 (skipped) otherwise.
"""
import argparse
import http.client
import json
import os
import shutil
import socket
import subprocess
import sys
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "daemon"))
from harness import Daemon, ensure_user, fail, raw_call, wait_for  # noqa: E402

USERS = ("aegistest1", "aegistest2")
SECRET = "aegis-dashboard-secret-7f3a91"
MAX_CONNECTIONS = 4   # dashboard_max_connections for this test: few, so that they can all be held
DEADLINE_S = 2        # dashboard_timeout_s: held connections are cut after this


# The job fields the page shows (src/runtime/daemon/dashboard_feed.h, kDashboardFields).
PAGE_FIELDS = ["id", "name", "user", "state", "gpus", "gpu_uuids", "attempts", "attempt_log", "submitted_at",
               "started_at", "ended_at", "reason", "recovery"]

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("localhost", timeout=30)
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(30)
        self.sock.connect(self.path)


def fetch(base, path, method="GET", unix=None):
    """(status, body text) of one request, over TCP or the Unix socket."""
    conn = UnixHTTPConnection(unix) if unix else http.client.HTTPConnection(base, timeout=30)
    try:
        conn.request(method, path)
        r = conn.getresponse()
        return r.status, r.read().decode("utf-8", "replace")
    finally:
        conn.close()


# Read from the rendered page: what it shows of each GPU and each job.
PAGE_GPUS = """[...document.querySelectorAll('.gpu')].map(c => ({
  uuid: c.dataset.uuid, index: Number(c.dataset.index),
  state: c.querySelector('[data-state]').dataset.state,
  memory: c.querySelector('.mem').textContent,
  jobs: [...c.querySelectorAll('.jobs a')].map(a => Number(a.textContent))}))"""
PAGE_JOBS = """[...document.querySelectorAll('#active tbody tr, #finished tbody tr')].map(r => ({
  id: Number(r.dataset.job), state: r.dataset.state, name: r.cells[1].textContent, user: r.cells[2].textContent,
  why: r.querySelector('.why') ? r.querySelector('.why').textContent : ''}))"""
# Nothing wider than the viewport: the document does not scroll sideways and no visible
# element or text reaches past either edge. The edge is the layout width (clientWidth):
# with mobile emulation innerWidth grows with the overflow it should catch.
OVERFLOW = """(() => {
  const de = document.documentElement, w = de.clientWidth, out = [];
  if (de.scrollWidth > w) out.push('document ' + de.scrollWidth + ' > ' + w);
  const past = r => (r.width || r.height) && (r.right > w + 0.5 || r.left < -0.5);
  for (const e of document.querySelectorAll('body *')) {
    const r = e.getBoundingClientRect();
    if (past(r)) out.push(e.tagName + '.' + e.className + ' ' + r.left + '..' + r.right);
  }
  // Text can spill out of a fixed-layout table cell without widening any element.
  const walk = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let n = walk.nextNode(); n; n = walk.nextNode()) {
    const range = document.createRange();
    range.selectNodeContents(n);
    const r = range.getBoundingClientRect();
    if (past(r)) out.push('text ' + JSON.stringify(n.textContent.slice(0, 40)) + ' in ' +
                          n.parentElement.tagName + '.' + n.parentElement.className + ' ' + r.left + '..' + r.right);
  }
  return out; })()"""
def gpu_view(cli_gpus):
    """What the page shows of `aegis gpus --json`, in the page's terms."""
    out = []
    for g in cli_gpus:
        state = "observing" if g["observing"] else "busy" if g["jobs"] else "open"
        out.append({"uuid": g["uuid"], "index": g["index"], "state": state,
                    "memory": f"{g['memory_used_mib']} / {g['memory_total_mib']} MiB", "jobs": g["jobs"]})
    return out


def job_view(cli_jobs):
    return {j["id"]: (j["state"], j["name"], j["user"]) for j in cli_jobs}


def page_matches_cli(b, d):
    """True when the page and the CLI, read back to back, show the same GPUs and jobs."""
    page_gpus, page_jobs = b.eval(PAGE_GPUS), b.eval(PAGE_JOBS)
    cli_gpus, cli_jobs = d.call("gpus", "--json"), d.jobs()
    if page_gpus != gpu_view(cli_gpus):
        print(f"  (not yet: the page shows GPUs {page_gpus}, the CLI {gpu_view(cli_gpus)})")
        return None
    shown = {j["id"]: (j["state"], j["name"], j["user"]) for j in page_jobs}
    if shown != job_view(cli_jobs):
        print(f"  (not yet: the page shows jobs {shown}, the CLI {job_view(cli_jobs)})")
        return None
    # Running and waiting jobs in the order `aegis queue` lists them (the order they are
    # served), and the head of the queue's row says why it waits, in the engine's words.
    head = raw_call(d.socket, {"op": "queue"})
    active = [p["id"] for p in page_jobs if p["state"] in ("running", "queued")]
    if active != [j["id"] for j in head["jobs"]]:
        print(f"  (not yet: the page lists {active}, `aegis queue` {[j['id'] for j in head['jobs']]})")
        return None
    if head["waiting_job"]:
        row = next(p for p in page_jobs if p["id"] == head["waiting_job"])
        if not head["waiting_because"] or not row["why"].startswith(head["waiting_because"]):
            print(f"  (not yet: job {head['waiting_job']} waits because {head['waiting_because']!r}, "
                  f"the page says {row['why']!r})")
            return None
    return cli_gpus, cli_jobs, head


def check_layout(b, width, height, mobile, shot):
    b.viewport(width, height, mobile)
    wait_for(f"the page at {width} px to render again",
             lambda: b.eval("document.body.clientWidth") <= width and b.eval("document.querySelectorAll('.gpu').length"))
    bad = b.eval(OVERFLOW)
    if bad:
        fail(f"at {width} px wide, elements overflow the viewport: {bad[:10]}")
    b.screenshot(shot)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--screenshots", help="directory for the desktop and phone screenshots")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("SKIP: needs root to create test users and run jobs as them")
        sys.exit(77)
    chromium = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)), None)
    if not chromium:
        print("SKIP: Chromium is not installed")
        sys.exit(77)
    from cdp import Browser  # python3-websocket (scripts/deps.sh --test)

    for name in USERS:
        ensure_user(name)
    port = free_port()
    d = Daemon(args.build, gpus="1x40960", shared_gpus=True, settings={
        "observation_window_s": 2.0, "dashboard_port": port, "dashboard_max_connections": MAX_CONNECTIONS,
        "dashboard_timeout_s": DEADLINE_S})
    unix = os.path.join(d.dir, "dashboard.sock")
    # The header names the telemetry library by its path, one unbreakable word as wide as
    # the build directory's path (CI's clone once made it overflow at 390 px). A copy under
    # a long directory makes the phone layout check independent of where the tree lives.
    deep = os.path.join(d.dir, "a-build-directory-whose-path-is-wider-than-a-phone-screen-" + "x" * 60)
    os.makedirs(deep)
    library = os.path.join(deep, "libaegis-nvml-emulated.so")
    shutil.copy(os.path.join(args.build, "src/runtime/gpu/emulated/libaegis-nvml-emulated.so"), library)
    os.chmod(deep, 0o755)
    with open(d.config, "a") as f:
        f.write(f"dashboard_socket = {json.dumps(unix)}\n")
        f.write(f"emulated_library = {json.dumps(library)}\n")
    base = f"127.0.0.1:{port}"
    shots = args.screenshots or d.dir
    try:
        d.start()
        work = os.path.join(d.dir, "work")
        os.makedirs(work)
        os.chmod(work, 0o777)
        # 30000 + 20000 MiB do not fit in 40960: the second waits for the first.
        first = d.submit("--name", "train-big", "--mem", "30000", "--", d.fakejob, "--mem", "30000", "--smact", "0.6",
                         "--seconds", "600", user=USERS[0], cwd=work)
        wait_for("the first job to run", lambda: d.show(first)["state"] == "running")
        r = subprocess.run(["runuser", "-u", USERS[1], "--", "env", f"AEGIS_TEST_TOKEN={SECRET}", d.aegis,
                            "--socket", d.socket, "submit", "--name", "sweep-7", "--mem", "20000", "--", d.fakejob,
                            "--mem", "20000", "--smact", "0.4", "--seconds", "600"],
                           capture_output=True, text=True, cwd=work)
        if r.returncode != 0:
            fail("submit: " + r.stderr)
        second = int(r.stdout)
        # The secret is really in the job's record (its owner and root see it), so that the
        # checks below could find it if the dashboard leaked it.
        if SECRET not in json.dumps(d.show(second)):
            fail("the secret is not in the second job's record; the leak check below would prove nothing")
        wait_for("the second job to wait", lambda: d.show(second)["state"] == "queued")

        with Browser(chromium, d.dir) as b:
            b.viewport(1280, 900, False)
            b.navigate(f"http://{base}/")
            wait_for("the page's first update", lambda: b.eval("Number(document.body.dataset.updates || 0)") >= 1)
            b.eval("window.aegisTestMarker = 42")  # gone if the page reloads
            cli_gpus, cli_jobs, head = wait_for("the page to show what the CLI shows", lambda: page_matches_cli(b, d),
                                                every=1)
            if [g["jobs"] for g in cli_gpus] != [[first]] or job_view(cli_jobs)[second][0] != "queued" \
                    or head["waiting_job"] != second or not head["waiting_because"]:
                fail(f"unexpected start: gpus {cli_gpus}, jobs {cli_jobs}, head of the queue {head}")
            # The endpoints carry the CLI's very replies (same handlers): the queue is
            # `aegis queue --all --json`, field for field, in the fields the page shows
            # (issue 33 item 1: a listing carries only what its reader prints).
            def same_queue():
                api = json.loads(fetch(base, "/api/queue")[1])["jobs"]
                if any(not set(j) <= set(PAGE_FIELDS) for j in api):
                    fail(f"/api/queue carries other fields than the page's: {sorted(api[0]) if api else []}")
                return api == [{k: j[k] for k in PAGE_FIELDS if k in j} for j in d.jobs()]
            wait_for("/api/queue to equal `aegis queue --all --json` in the page's fields", same_queue)
            api_gpus = json.loads(fetch(base, "/api/gpus")[1])["gpus"]
            if sorted(api_gpus[0]) != sorted(cli_gpus[0]):
                fail(f"/api/gpus has other fields than `aegis gpus --json`: {sorted(api_gpus[0])}")
            check_layout(b, 1280, 900, False, os.path.join(shots, "dashboard-desktop.png"))
            check_layout(b, 390, 844, True, os.path.join(shots, "dashboard-phone.png"))
            b.viewport(1280, 900, False)

            # The first job ends: the second runs, and the open page shows it without a reload.
            d.run_cli("cancel", str(first), user=USERS[0])
            wait_for("the page to show the second job running",
                     lambda: b.eval(f"(r => r && r.dataset.state)(document.querySelector('#active tr[data-job=\"{second}\"]'))")
                     == "running", timeout=90)
            if b.eval("window.aegisTestMarker") != 42:
                fail("the page reloaded to show the change")
            wait_for("the page to show what the CLI shows after the change", lambda: page_matches_cli(b, d), every=1)

            # The job page: its attempts, OOM recoveries and a timeline of its memory.
            b.eval(f"location.hash = '#job/{second}'")
            job = d.show(second)
            wait_for("the job page's timeline", lambda: b.eval(
                "document.querySelectorAll('#job-charts svg polyline').length") >= 1)
            facts = b.eval("({rows: document.querySelectorAll('#attempts tbody tr').length, "
                           "oom: document.querySelector('#job-facts .oom').textContent, "
                           "title: document.getElementById('job-title').textContent})")
            if facts["rows"] != job["attempts"] or facts["oom"] != str(job["recovery"]["oom_count"]) \
                    or str(second) not in facts["title"]:
                fail(f"the job page shows {facts}, `aegis show` says {job['attempts']} attempts, "
                     f"{job['recovery']['oom_count']} OOM recoveries")
            if b.errors:
                fail(f"the page logged errors: {b.errors}")
            dom = b.eval("document.documentElement.outerHTML")

        # No response of the dashboard carries another user's environment.
        responses = {"dom": dom}
        for path in ("/", "/api/gpus", "/api/queue", "/api/history", "/api/history?since=0", f"/job/{second}",
                     "/api/show?id=" + str(second), "/../etc/passwd"):
            for via in (None, unix):
                status, body = fetch(base, path, unix=via)
                responses[f"{path} via {'unix' if via else 'tcp'} ({status})"] = body
        for where, body in responses.items():
            if SECRET in body or "AEGIS_TEST_TOKEN" in body:
                fail(f"the secret environment variable appears in {where}")
        # Read-only: nothing but GET is served.
        for method in ("POST", "PUT", "DELETE"):
            status, _ = fetch(base, "/api/queue", method=method)
            if status < 400:
                fail(f"{method} /api/queue answered {status}")
        if fetch(base, "/api/history?since=x")[0] != 400:
            fail("a malformed `since` was not refused")

        # Clients that connect and send nothing hold every dashboard connection: aegisd
        # still answers, and once the deadline has cut them the dashboard does too.
        held = []
        for _ in range(MAX_CONNECTIONS + 4):
            s = socket.create_connection(("127.0.0.1", port))
            held.append(s)
        if d.call("queue", "--json") is None:
            fail("aegisd did not answer while the dashboard's connections were held")
        status, _ = fetch(base, "/api/gpus")
        if status != 200:
            fail(f"the dashboard answered {status} after the idle connections were cut")
        for s in held:
            s.close()
        print(f"OK: page equals the CLI, live update without reload, job page, layout at 1280 and 390 px, "
              f"no secret in {len(responses)} responses, read-only, held connections cut")
    finally:
        d.cleanup()


if __name__ == "__main__":
    main()
