"""The aegis command line against a live aegisd: errors a person can act on, the JSON
contract of `aegis queue --all --json`, the Prometheus endpoint, and --print-config.
Usage: test_cli.py BUILD_DIR
"""
import json
import os
import re
import subprocess
import sys
import time
import urllib.request

from harness import Daemon, fail, wait_for


def expect_error(r, text):
    if r.returncode == 0 or text not in r.stderr:
        fail(f"expected an error containing {text!r}, got rc={r.returncode} stderr={r.stderr!r}")


def check_job_metrics(d, port):
    """Per-job series for running jobs, at most metrics_max_jobs (1 here) of them; every
    metric the Grafana dashboard queries is served."""
    def metrics():
        return urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    first = d.submit("--", d.fakejob, "--mem", "3000", "--smact", "0.5", "--seconds", "300")
    second = d.submit("--", d.fakejob, "--mem", "2000", "--smact", "0.5", "--seconds", "300")
    mem = re.compile(rf'^aegis_job_memory_used_mib{{job="{first}",user="[^"]+",gpu="GPU-[^"]+"}} 3000$', re.M)
    body = wait_for("job memory in the metrics", lambda: (lambda b: mem.search(b) and b)(metrics()))
    wait_for("both jobs running", lambda: all(d.show(j)["state"] == "running" for j in (first, second)))
    body = wait_for("the second job counted as dropped",
                    lambda: (lambda b: "aegis_job_series_dropped 1\n" in b and b)(metrics()))
    # Active once its activity has been held for anchor_sustained_samples samples.
    active = re.compile(rf'^aegis_job_state{{job="{first}",user="[^"]+",state="active"}} 1$', re.M)
    body = wait_for("the first job active", lambda: (lambda b: active.search(b) and b)(metrics()))
    for pattern in (rf'^aegis_job_state{{job="{first}",user="[^"]+",state="active"}} 1$',
                    rf'^aegis_job_attempts{{job="{first}",user="[^"]+"}} 1$',
                    rf'^aegis_job_oom_recoveries{{job="{first}",user="[^"]+"}} 0$',
                    rf'^aegis_job_gpu_sm_activity{{job="{first}",user="[^"]+",gpu="GPU-[^"]+"}} [0-9.e-]+$'):
        if not re.search(pattern, body, re.M):
            fail(f"metrics lack {pattern}:\n{body}")
    if f'job="{second}"' in body:
        fail("a job beyond metrics_max_jobs has series")
    dashboard = json.load(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "packaging",
                                            "grafana", "aegis-dashboard.json")))
    queried = {m for p in dashboard["panels"] for t in p["targets"] for m in re.findall(r"aegis_[a-z_]+", t["expr"])}
    served = set(re.findall(r"^# TYPE (aegis_[a-z_]+) ", body, re.M))
    if not queried or queried - served:
        fail(f"the Grafana dashboard queries metrics aegisd does not serve: {sorted(queried - served)}")
    d.run_cli("cancel", str(first), str(second))
    wait_for("the jobs cancelled", lambda: all(d.show(j)["state"] == "cancelled" for j in (first, second)))
    if "aegis_job_memory_used_mib{" in metrics():
        fail("series of ended jobs remain")


def main(build):
    build = os.path.abspath(build)
    aegis = os.path.join(build, "apps/aegis/aegis")
    # No daemon: say where we looked and how to start one.
    r = subprocess.run([aegis, "--socket", "/nonexistent/aegisd.sock", "queue"], capture_output=True, text=True)
    expect_error(r, "cannot reach aegisd at /nonexistent/aegisd.sock")
    expect_error(r, "start it with `aegisd --config")

    port = 19900 + os.getpid() % 90
    model = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "data", "models", "gpumemnet_mlp.json")
    d = Daemon(build, settings={"metrics_port": port, "observation_window_s": 1.0, "learned_model": model,
                                "metrics_max_jobs": 1})
    try:
        d.start()
        expect_error(d.run_cli("submit", "--mem", "12X", "--", "true", check=False), "--mem: '12X' is not a memory size")
        expect_error(d.run_cli("submit", "--gpus", "4", "--", "true", check=False),
                     "job.gpus: 4 GPUs requested; 3 can be scheduled here")
        expect_error(d.run_cli("submit", "--mem", "50G", "--", "true", check=False),
                     "job.mem: 51200 MiB per GPU needed; the largest GPU here offers 40448 MiB after the guard")
        expect_error(d.run_cli("show", "9999", check=False), "job 9999: no such job")
        expect_error(d.run_cli("cancel", "abc", check=False), "'abc' is not a job id")
        expect_error(d.run_cli("submit", "--", check=False), "no command")
        expect_error(d.run_cli("submit", "--workdir", "/no/such/dir", "--", "true", check=False),
                     "job.workdir: /no/such/dir is not a directory")

        # A model spec gives the learned estimate: the job is admitted with it.
        spec = os.path.join(d.dir, "spec.json")
        open(spec, "w").write(json.dumps({"depth": 9, "total_activations": 3069, "total_parameters": 1083897,
                                          "batch_size": 717, "batchnorm_layers": 0, "dropout_layers": 0,
                                          "activation": "ReLU", "layer_counts": {"linear": 9}}))
        learned = d.submit("--model-spec", spec, "--", "true")
        bad = os.path.join(d.dir, "bad.json")
        open(bad, "w").write(json.dumps({**json.load(open(spec)), "depth": -1}))
        expect_error(d.run_cli("submit", "--model-spec", bad, "--", "true", check=False), "depth")
        ok = d.submit("--name", "quick", "--", "/bin/sh", "-c", "echo hello; echo oops >&2")
        fails = d.submit("--name", "broken", "--", "/bin/sh", "-c", "exit 3")
        d.wait_all_final([ok, fails, learned], timeout=60)
        predicted = subprocess.run([aegis, "estimate", "predict", "--features", spec, "--model", model],
                                   capture_output=True, text=True, check=True).stdout
        admitted = d.show(learned)["attempt_log"][0]["admitted_mib"]
        if f"{admitted} MiB" not in predicted.split("learned-regression")[1].splitlines()[0]:
            fail(f"learned job admitted with {admitted} MiB; predict says {predicted}")
        jobs = d.jobs()
        if not isinstance(jobs, list):
            fail("queue --all --json is not an array")
        for j in jobs:
            for k in ("id", "name", "user", "state", "gpus", "attempts"):
                if k not in j:
                    fail(f"job without {k}: {j}")
            if j["state"] not in ("queued", "running", "completed", "failed", "cancelled"):
                fail("bad state " + j["state"])
        states = {j["id"]: j for j in jobs}
        if states[ok]["state"] != "completed" or states[fails]["state"] != "failed":
            fail(str(states))
        if states[fails]["reason"] != "exit status 3":
            fail("failure reason not visible: " + states[fails]["reason"])
        if d.run_cli("logs", str(ok)).stdout != "hello\n" or d.run_cli("logs", str(ok), "--stderr").stdout != "oops\n":
            fail("logs")
        text = d.run_cli("queue", "--all").stdout
        if "quick" not in text or "completed" not in text:
            fail("queue table: " + text)
        gpus = d.call("gpus", "--json")
        if len(gpus) != 3 or gpus[0]["memory_total_mib"] != 40960 or gpus[0]["telemetry"] != "full":
            fail("gpus: " + json.dumps(gpus)[:500])

        body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
        for name in ("aegis_gpu_memory_used_mib{", "aegis_gpu_risk{", "aegis_gpu_observing{",
                     'aegis_queue_length{queue="main"}', 'aegis_attempts_total{outcome="completed"} 2',
                     "aegis_tick_seconds_count", "aegis_submissions_total 3"):
            if name not in body:
                fail("metrics lack " + name)
        check_job_metrics(d, port)
    finally:
        d.cleanup()

    # --print-config prints TOML that reads back to the same config.
    aegisd = os.path.join(build, "apps/aegisd/aegisd")
    one = subprocess.run([aegisd, "--set", "policy=carma", "--set", "observation_window_s=12", "--print-config"],
                         capture_output=True, text=True, check=True).stdout
    path = os.path.join(d.dir + "-cfg.toml")
    open(path, "w").write(one)
    two = subprocess.run([aegisd, "--config", path, "--print-config"], capture_output=True, text=True, check=True).stdout
    os.remove(path)
    if one != two or "observation_window_s = 12" not in one or 'policy = "carma"' not in one:
        fail("print-config does not round-trip")
    r = subprocess.run([aegisd, "--set", "gpu_backend=cuda"], capture_output=True, text=True)
    if r.returncode != 2 or "gpu_backend: 'cuda' is not one of nvml,emulated" not in r.stderr:
        fail("bad setting: " + r.stderr)
    print("OK: CLI errors, JSON contract, logs, gpus, metrics and print-config")


if __name__ == "__main__":
    main(sys.argv[1])
