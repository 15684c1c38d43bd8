"""aegisd with calibrated_model. Memory: under aegis-learned without learned weights, a
job with a model spec (VGG-16, which the learned model would refuse) is admitted with the
calibrated estimate for this server's GPU model. Utilisation: under policy horus (its cap
reads each job's expected GPU utilisation) a job with a model spec but no
--hint-gpu-util is refused without calibrated_model, and with it is accepted and runs,
the calibrated model's estimate standing in for the hint. Then `aegis submit --model
FILE.py:NAME` (where /usr/bin/python3 has PyTorch): the job carries the spec and the
FakeTensor estimate the helpers computed on the client. First, under policy lucid (no
typed sharing scores), the score each job gets from its predicted utilisation decides who
shares a GPU.
Usage: test_calibrated_model.py BUILD_DIR
"""
import json
import math
import os
import subprocess
import sys

from harness import Daemon, fail, wait_for

HERE = os.path.dirname(os.path.abspath(__file__))
MODEL = os.path.join(HERE, "..", "..", "data", "models", "calibrated_memory.json")
SPEC = {"depth": 16, "total_activations": 28676072, "total_parameters": 138357544, "batch_size": 32,
        "activation": "ReLU", "layer_counts": {"conv2d": 13, "linear": 3, "relu": 15}}  # VGG-16


def submit_with_spec(d):
    spec = os.path.join(d.dir, "spec.json")
    with open(spec, "w") as f:
        json.dump(SPEC, f)
    return d.run_cli("submit", "--model-spec", spec, "--", "true", check=False)


def with_calibrated(build, policy):
    return Daemon(build, settings={"policy": policy, "calibrated_model": os.path.abspath(MODEL),
                                   "observation_window_s": 1.0})


def run_spec_job(d):
    """Submits VGG-16's spec and waits for the job; fails if it is refused."""
    r = submit_with_spec(d)
    if r.returncode != 0:
        fail(f"with calibrated_model the job was refused: {r.stdout}{r.stderr}")
    job = int(r.stdout.strip())
    d.wait_all_final([job], timeout=60)
    return job


def lucid_scores(build):
    """Lucid (at most two jobs per GPU, sharing scores summing to <= 2) without typed scores:
    with calibrated_model each spec's predicted utilisation gives its score, VGG-16 2 and a
    tiny MLP 0, so the MLP shares VGG-16's GPU while a second VGG-16 waits for it."""
    plain = Daemon(build, gpus="1x40960", settings={"policy": "lucid"})
    try:
        plain.start()
        spec = os.path.join(plain.dir, "spec.json")
        with open(spec, "w") as f:
            json.dump(SPEC, f)
        r = plain.run_cli("submit", "--profiled-mem", "2000", "--model-spec", spec, "--", "true", check=False)
        if r.returncode == 0 or "sharing score" not in (r.stdout + r.stderr):
            fail(f"lucid without calibrated_model took a job with no sharing score: {r.stdout}{r.stderr}")
    finally:
        plain.cleanup()
    d = Daemon(build, gpus="1x40960", settings={"policy": "lucid", "calibrated_model": os.path.abspath(MODEL)})
    try:
        d.start()
        vgg, tiny = os.path.join(d.dir, "vgg.json"), os.path.join(d.dir, "tiny.json")
        with open(vgg, "w") as f:
            json.dump(SPEC, f)
        with open(tiny, "w") as f:
            json.dump({"depth": 2, "total_activations": 36, "total_parameters": 2212, "batch_size": 8,
                       "activation": "ReLU", "layer_counts": {"linear": 2, "relu": 1}}, f)

        def job(spec, name, seconds):
            # A tag per job: one command, so without it they would share a signature, and the
            # utilisation measured for the tiny MLP's run would come before VGG-16's prediction.
            return d.submit("--name", name, "--tag", name, "--profiled-mem", "2000", "--model-spec", spec, "--",
                            d.fakejob, "--mem", "2000", "--smact", "0.3", "--seconds", str(seconds), "--startup", "0.2")

        # The first VGG-16 runs until the test cancels it: who shares its GPU does not
        # depend on the clock. The queue is strict head-of-line, so one job at a time.
        big = job(vgg, "big", 3600)
        wait_for("the first VGG-16 to run", lambda: d.show(big)["state"] == "running")
        small = job(tiny, "small", 1)
        d.wait_all_final([small], timeout=120)
        second = job(vgg, "second", 1)
        wait_for("the second VGG-16 to wait for the sharing score",
                 lambda: "sharing" in d.run_cli("queue").stdout.split("head of the queue waits:")[-1])
        if d.show(big)["state"] != "running" or d.show(second)["attempt_log"]:
            fail("two jobs of predicted score 2 (VGG-16) shared a GPU under lucid")
        d.run_cli("cancel", str(big))
        d.wait_all_final([big, second], timeout=120)
        A, B, C = (d.show(j)["attempt_log"][-1] for j in (big, small, second))
        if B["outcome"] != "completed" or not B["launched_at"] < A["ended_at"]:
            fail(f"the tiny MLP (predicted score 0) did not share VGG-16's GPU: {B}")
        if C["launched_at"] < A["ended_at"] - 0.01:
            fail(f"the second VGG-16 started before the first ended: {C}")
        print("OK: lucid scored VGG-16 2 and a tiny MLP 0 from their predicted utilisation")
    finally:
        d.cleanup()


def main(build):
    lucid_scores(build)
    learned = with_calibrated(build, "aegis-learned")
    try:
        learned.start()
        job = run_spec_job(learned)
        predicted = json.loads(subprocess.run(
            [learned.aegis, "estimate", "predict", "--json", "--features", os.path.join(learned.dir, "spec.json"),
             "--calibrated", os.path.abspath(MODEL), "--gpu-model", "Aegis Emulated GPU 40960 MiB"],
            capture_output=True, text=True, check=True, cwd=os.path.join(HERE, "..", "..")).stdout)
        admitted = learned.show(job)["attempt_log"][0]["admitted_mib"]
        if predicted["learned_regression_mib"] is not None or admitted != math.ceil(predicted["calibrated_mib"]):
            fail(f"admitted with {admitted} MiB; predict says {predicted}")
        print(f"OK: VGG-16's spec admitted with the calibrated {admitted} MiB (the learned model refuses it)")
    finally:
        learned.cleanup()

    plain = Daemon(build, settings={"policy": "horus"})
    try:
        plain.start()
        r = submit_with_spec(plain)
        if r.returncode == 0 or "utilisation" not in (r.stdout + r.stderr):
            fail(f"without calibrated_model a job with no hint was not refused: {r.stdout}{r.stderr}")
    finally:
        plain.cleanup()

    d = with_calibrated(build, "horus")
    try:
        d.start()
        job = run_spec_job(d)
        if d.show(job)["state"] != "completed":
            fail(f"the job did not complete: {d.show(job)}")
        # Without a model spec there is nothing to estimate from: still refused.
        r = d.run_cli("submit", "--", "true", check=False)
        if r.returncode == 0:
            fail("a job with neither hint nor model spec was accepted under horus")
        print("OK: the calibrated utilisation estimate stands in for --hint-gpu-util under horus")

        if subprocess.run(["/usr/bin/python3", "-c", "import torch"], capture_output=True).returncode != 0:
            print("(no PyTorch for /usr/bin/python3: --model not checked)")
            return
        model = os.path.join(d.dir, "tiny.py")
        with open(model, "w") as f:
            f.write("import torch.nn as nn\n"
                    "def mlp():\n"
                    "    return nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 4))\n")
        job = d.submit("--model", model + ":mlp", "--batch-size", "8", "--input-shape", "64", "--", "true")
        req = d.show(job)["request"]
        if req.get("model", {}).get("total_parameters") != 64 * 32 + 32 + 32 * 4 + 4:
            fail(f"--model: the job's spec is {req.get('model')}")
        if not req.get("faketensor_mib", 0) >= 1:
            fail(f"--model: the job carries no FakeTensor estimate: {req}")
        r = d.run_cli("submit", "--model", model + ":nothing", "--batch-size", "8", "--input-shape", "64", "--",
                      "true", check=False)
        if r.returncode == 0 or "model_spec.py" not in r.stderr:
            fail(f"--model with a missing name: {r.returncode} {r.stderr}")
        d.wait_all_final([job], timeout=60)
        print(f"OK: --model gave the job its spec and a FakeTensor estimate of {req['faketensor_mib']} MiB")
    finally:
        d.cleanup()


if __name__ == "__main__":
    main(sys.argv[1])
