"""History per GPU model: a completed run's peak is kept under the GPU model it ran on
(emulated GPUs of two sizes have two names), and a job that may land on the other model
gets that peak moved across with the calibrated model's per-GPU-model contexts.
Usage: test_history_gpu_models.py BUILD_DIR
"""
import json
import os
import sqlite3
import sys

from harness import Daemon, fail

SMALL, LARGE = "Aegis Emulated GPU 40960 MiB", "Aegis Emulated GPU 81920 MiB"
CONTEXT = {SMALL: 1500.0, LARGE: 500.0}  # MiB: made up for the test, 1000 apart


def calibrated_model(path):
    """A calibrated model file whose only use here is its contexts (aegisd's
    calibrated_model setting); the other fields are what `aegis estimate calibrate` writes."""
    with open(path, "w") as f:
        json.dump({"format": "aegis-calibrated-memory-1", "context_mib": CONTEXT, "per_parameter_mib": 3.0,
                   "per_activation_mib": 1.0, "margin": 1.5, "margin_quantile": 0.95, "default_gpu": LARGE,
                   "coverage": {"log1p_parameters": [0, 20], "log1p_batch_activations": [0, 25],
                                "layer_types": ["linear"]}}, f)
    os.chmod(path, 0o644)


def main(build):
    d = Daemon(build, gpus="1x40960,1x81920",
               settings={"observation_window_s": 1.0, "telemetry_sample_hz": 4.0, "telemetry_window_samples": 4})
    model_file = os.path.join(d.dir, "calibrated.json")
    calibrated_model(model_file)
    with open(d.config, "a") as f:
        f.write(f"calibrated_model = {json.dumps(model_file)}\n")
    try:
        d.start()

        def job(name, mem):
            # Only the numbers differ: one signature.
            return d.submit("--name", name, "--", d.fakejob, "--mem", str(mem), "--smact", "0.2",
                            "--seconds", "1", "--startup", "0.2")

        first = job("first", 1500)
        d.wait_all_final([first], timeout=120)
        peak = d.show(first)["attempt_log"][0]["peak_mib"]
        db = sqlite3.connect(os.path.join(d.state, "aegis.db"))
        rows = db.execute("SELECT gpu_model, peak_mib FROM history_runs").fetchall()
        if len(rows) != 1 or rows[0][0] not in CONTEXT or abs(rows[0][1] - peak) > 1:
            fail(f"history_runs holds {rows}, expected one run of {peak} MiB on one of {list(CONTEXT)}")
        ran_on = rows[0][0]
        other = SMALL if ran_on == LARGE else LARGE
        # The next run may land on either GPU model: the larger of its own peak and the
        # peak moved to the other model (context there minus context here).
        expected = max(peak, peak + CONTEXT[other] - CONTEXT[ran_on])
        second = job("second", 1600)
        d.wait_all_final([second], timeout=120)
        admitted = d.show(second)["attempt_log"][0]["admitted_mib"]
        if admitted != expected:
            fail(f"second run admitted with {admitted} MiB, expected {expected} "
                 f"(peak {peak} on {ran_on}, moved to {other})")
        rows = db.execute("SELECT gpu_model, peak_mib FROM history_runs ORDER BY id").fetchall()
        if len(rows) != 2:
            fail(f"history_runs holds {rows}, expected both runs")
        print(f"OK: run 1 peaked at {peak} MiB on '{ran_on}'; run 2 admitted with {admitted} MiB "
              f"(the peak moved to '{other}'); history_runs: {rows}")
    finally:
        d.cleanup()


if __name__ == "__main__":
    main(sys.argv[1])
