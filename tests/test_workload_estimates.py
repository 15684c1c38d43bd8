#!/usr/bin/python3
"""Every model in workloads/ gets a memory estimate: each workload's network (at its
--smoke size, on the CPU) is measured by scripts/model_spec.py's feature extraction and
its spec handed to `aegis estimate predict`, which must answer with a positive calibrated
estimate (flagged or not) and a utilisation estimate in [0, 1].

    test_workload_estimates.py --aegis BUILD/apps/aegis/aegis --source-dir REPO

Needs Debian's PyTorch (/usr/bin/python3: python3-torch, python3-torchvision); exits 77,
which ctest reports as skipped, without it.
"""
import argparse
import importlib
import json
import os
import subprocess
import sys
import tempfile
import types

SKIP = 77
# One argument set for every workload's build(): --smoke sizes, the CPU.
ARGS = types.SimpleNamespace(smoke=True, width=64, image_size=224, rows=1000, seq_len=128, layers=2, hidden=64,
                             precision="fp32", device="cpu", seed=0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--aegis", required=True)
    ap.add_argument("--source-dir", required=True)
    a = ap.parse_args()
    try:
        import torch
        import torch.nn as nn
    except ImportError:
        print("test_workload_estimates: skipped: PyTorch is not installed (apt-get install python3-torch)")
        sys.exit(SKIP)
    sys.path[:0] = [os.path.join(a.source_dir, "scripts"), os.path.join(a.source_dir, "workloads")]
    sys.dont_write_bytecode = True
    import model_spec

    class Bound(nn.Module):
        """The workload's model called on its own batch (model_spec feeds one input)."""

        def __init__(self, model, inputs):
            super().__init__()
            self.model, self.inputs = model, inputs

        def forward(self, _):
            return self.model(*self.inputs)

    names = sorted(f[:-3] for f in os.listdir(os.path.join(a.source_dir, "workloads"))
                   if f.endswith(".py") and f != "common.py")
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            module = importlib.import_module(name)
            job = module.build(ARGS, torch.device("cpu"))
            batch_size = 4
            batch = job.make_batch(batch_size)
            # The model's inputs: the batch less its labels; a language model's one tensor
            # of ids is shifted by one for its labels.
            inputs = batch[:-1] if len(batch) > 1 else (batch[0][:, :-1],)
            spec = model_spec.features(Bound(job.model, inputs), torch.zeros(1), batch_size)
            path = os.path.join(tmp, name + ".json")
            with open(path, "w") as f:
                json.dump(spec, f)
            r = subprocess.run([a.aegis, "estimate", "predict", "--json", "--features", path, "--calibrated",
                                os.path.join(a.source_dir, "data/models/calibrated_memory.json")],
                               capture_output=True, text=True, cwd=a.source_dir)
            if r.returncode != 0:
                failures.append(f"{name}: aegis estimate predict exited {r.returncode}: {r.stdout}{r.stderr}")
                continue
            out = json.loads(r.stdout)
            util = out["utilisation"]
            ok = out["calibrated_mib"] > 0 and util and all(0 <= v <= 1 for v in util.values())
            print(f"{name}: {spec['total_parameters']} parameters, {spec['total_activations']} activations per "
                  f"sample: {out['calibrated_mib']:.0f} MiB, utilisation {util}"
                  + (f" (out of distribution: {out['why']})" if out["out_of_distribution"] else ""))
            if not ok:
                failures.append(f"{name}: no usable estimate: {out}")
    for f in failures:
        print("test_workload_estimates: FAIL: " + f, file=sys.stderr)
    if len(names) < 5:
        failures.append(f"only {len(names)} workloads found")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
