"""aegisd with calibrated_model. Memory: under aegis-learned without learned weights, a
job with a model spec (VGG-16, which the learned model would refuse) is admitted with the
calibrated estimate for this server's GPU model. Utilisation: under policy horus (its cap
reads each job's expected GPU utilisation) a job with a model spec but no
--hint-gpu-util is refused without calibrated_model, and with it is accepted and runs,
the calibrated model's estimate standing in for the hint. Then `aegis submit --model
FILE.py:NAME` (where /usr/bin/python3 has PyTorch): the job carries the spec and the
FakeTensor estimate the helpers computed on the client.
Usage: test_calibrated_model.py BUILD_DIR
"""
import json
import math
import os
import subprocess
import sys

from harness import Daemon, fail

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


def main(build):
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
