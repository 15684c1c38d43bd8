#!/usr/bin/env python3
"""Runs scripts/faketensor_estimate.py and scripts/model_spec.py on two tiny models (a
3-layer MLP and a small CNN defined here) and checks their outputs against hand counts,
then feeds the MLP's spec to `aegis estimate predict --features`.

    test_python_helpers.py --aegis BUILD/apps/aegis/aegis --source-dir REPO

The helpers need PyTorch: they run with this interpreter if it has torch, else with
/usr/bin/python3 (Debian's python3-torch). Exits 77, which ctest reports as skipped, when
neither has it. Standard library only.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

SKIP = 77

MODELS = '''
import torch.nn as nn

def mlp():  # 3 linear layers, as in GPUMemNet's data
    return nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 16), nn.ReLU(), nn.Linear(16, 4))

class TinyCnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)            # 3*8*9 + 8 = 224 parameters
        self.bn = nn.BatchNorm2d(8)               # 16 parameters, 2 buffers of 8 + a counter
        self.act = nn.GELU()
        self.flat = nn.Flatten()
        self.drop = nn.Dropout(0.1)
        self.fc = nn.Linear(8 * 6 * 6, 10)        # 2880 + 10 parameters

    def forward(self, x):
        return self.fc(self.drop(self.flat(self.act(self.bn(self.conv(x))))))

def broken():
    raise ValueError("no such width")
'''

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print(f"test_python_helpers: FAIL: {what}", file=sys.stderr)


def torch_python():
    for py in (sys.executable, "/usr/bin/python3"):
        if py and os.path.exists(py) and subprocess.run([py, "-c", "import torch"], capture_output=True).returncode == 0:
            return py
    return None


def run(cmd, cwd=None):
    r = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=300)
    return r.returncode, r.stdout, r.stderr


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--aegis", required=True)
    ap.add_argument("--source-dir", required=True)
    a = ap.parse_args()
    scripts = os.path.join(a.source_dir, "scripts")
    py = torch_python()
    if py is None:
        # The helpers' own answer without torch: one line, exit 3.
        rc, _, err = run([sys.executable, os.path.join(scripts, "model_spec.py"), "--model", "x.py:f",
                          "--batch-size", "1", "--input-shape", "1"])
        check(rc == 3 and len(err.strip().splitlines()) == 1, f"without torch: exit 3 and one line, got {rc}: {err}")
        print("test_python_helpers: skipped: PyTorch is not installed (apt-get install python3-torch)")
        sys.exit(1 if failures else SKIP)

    with tempfile.TemporaryDirectory() as tmp:
        models = os.path.join(tmp, "tiny_models.py")
        with open(models, "w") as f:
            f.write(MODELS)
        spec_cmd = [py, os.path.join(scripts, "model_spec.py")]
        fake_cmd = [py, os.path.join(scripts, "faketensor_estimate.py")]

        # The MLP: every count by hand.
        spec_path = os.path.join(tmp, "mlp_spec.json")
        rc, out, err = run(spec_cmd + ["--model", models + ":mlp", "--batch-size", "32", "--input-shape", "64",
                                       "--out", spec_path])
        check(rc == 0, f"model_spec.py mlp exited {rc}: {err}")
        spec = json.load(open(spec_path)) if rc == 0 else {}
        check(spec.get("depth") == 3, f"mlp depth {spec.get('depth')} != 3")
        check(spec.get("total_parameters") == 64 * 32 + 32 + 32 * 16 + 16 + 16 * 4 + 4,
              f"mlp parameters {spec.get('total_parameters')}")
        check(spec.get("total_activations") == 32 + 32 + 16 + 16 + 4, f"mlp activations {spec.get('total_activations')}")
        check(spec.get("activation") == "ReLU" and spec.get("batch_size") == 32, f"mlp spec {spec}")
        check(spec.get("layer_counts") == {"linear": 3, "relu": 2}, f"mlp layer counts {spec.get('layer_counts')}")

        rc, out, err = run([a.aegis, "estimate", "predict", "--json", "--features", spec_path], cwd=a.source_dir)
        check(rc == 0, f"aegis estimate predict exited {rc}: {out}{err}")
        if rc == 0:
            pred = json.loads(out)
            check(pred["features"] == spec, "features_from_json did not read the spec back unchanged")
            reg = pred["learned_regression_mib"]
            # GPUMemNet's smallest MLP runs took 1443 MiB (CUDA context and framework).
            check(reg is not None and 1400 <= reg <= 2500, f"learned regression {reg} MiB not in [1400, 2500]")
            check(pred["learned_classifier_mib"] == 2048, f"classifier {pred['learned_classifier_mib']} != 2048")

        rc, out, err = run(fake_cmd + ["--model", models + ":mlp", "--batch-size", "32", "--input-shape", "64"])
        check(rc == 0, f"faketensor_estimate.py mlp exited {rc}: {err}")
        if rc == 0:
            est = json.loads(out)
            params = (64 * 32 + 32 + 32 * 16 + 16 + 16 * 4 + 4) * 4 / 2**20
            check(abs(est["parameters_mib"] - params) < 1e-9, f"mlp parameter MiB {est['parameters_mib']}")
            check(abs(est["gradients_mib"] - params) < 1e-9, "mlp gradient MiB != parameter MiB")
            check(abs(est["optimizer_state_mib"] - 2 * params) < 1e-9, "mlp Adam state != 2 x parameters")
            # Saved for backward: the input (32x64), each Linear's output before ReLU is
            # saved by ReLU as its result (32x32, 32x16), the ReLU outputs feed the next
            # Linear: at least the input and the hidden activations, at most twice that.
            lo = (32 * 64 + 32 * 32 + 32 * 16) * 4 / 2**20
            check(lo <= est["saved_activations_mib"] <= 2 * lo, f"mlp saved activations {est['saved_activations_mib']}")
            total = sum(est[k] for k in ("parameters_mib", "gradients_mib", "optimizer_state_mib",
                                         "saved_activations_mib"))
            check(abs(est["peak_mib"] - total) < 1e-9, "peak is not the sum of its parts")
            rc, out, err = run(fake_cmd + ["--model", models + ":mlp", "--batch-size", "32", "--input-shape", "64",
                                           "--forward-only"])
            check(rc == 0 and abs(json.loads(out)["peak_mib"] - est["peak_mib"]) < 1e-9,
                  f"--forward-only changed the estimate: {out}{err}")

        # The CNN: a class, BatchNorm buffers, GELU, a layer type the learned model never saw.
        cnn_spec = os.path.join(tmp, "cnn_spec.json")
        rc, out, err = run(spec_cmd + ["--model", models + ":TinyCnn", "--batch-size", "4", "--input-shape", "3,8,8",
                                       "--out", cnn_spec])
        check(rc == 0, f"model_spec.py cnn exited {rc}: {err}")
        if rc == 0:
            spec = json.load(open(cnn_spec))
            check(spec["depth"] == 2 and spec["batchnorm_layers"] == 1 and spec["dropout_layers"] == 1,
                  f"cnn counts {spec}")
            check(spec["total_parameters"] == 224 + 16 + 2890, f"cnn parameters {spec['total_parameters']}")
            check(spec["total_activations"] == 5 * 288 + 10, f"cnn activations {spec['total_activations']}")
            check(spec["activation"] == "GELU", f"cnn activation {spec['activation']}")
            rc, out, err = run([a.aegis, "estimate", "predict", "--json", "--features", cnn_spec], cwd=a.source_dir)
            check(rc == 0, f"predict cnn exited {rc}: {out}{err}")
            if rc == 0:
                pred = json.loads(out)
                check(pred["learned_regression_mib"] is None and "never occurs" in (pred["outside_training"] or ""),
                      f"a CNN must be outside the learned model's data: {pred['outside_training']}")
        rc, out, err = run(fake_cmd + ["--model", models + ":TinyCnn", "--batch-size", "4", "--input-shape", "3,8,8"])
        check(rc == 0, f"faketensor_estimate.py cnn exited {rc}: {err}")
        if rc == 0:
            est = json.loads(out)
            check(abs(est["parameters_mib"] * 2**20 - (3130 * 4 + 16 * 4 + 8)) < 1e-6,
                  f"cnn parameters+buffers {est['parameters_mib'] * 2**20} bytes")
            check(est["saved_activations_mib"] > 4 * 3 * 8 * 8 * 4 / 2**20, "cnn saved activations below the input")

        # Errors: one line, exit 1.
        for args, want in ((["--model", models + ":broken"], "no such width"),
                           (["--model", models + ":nothing"], "has no 'nothing'"),
                           (["--model", "/nonexistent.py:f"], "no such file")):
            rc, out, err = run(spec_cmd + args + ["--batch-size", "2", "--input-shape", "64"])
            check(rc == 1 and want in err and len(err.strip().splitlines()) == 1, f"{args}: rc {rc}, {err!r}")

    if failures:
        sys.exit(1)
    print("test_python_helpers: ok")


if __name__ == "__main__":
    main()
