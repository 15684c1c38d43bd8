"""Utilisation from history: aegisd records each completed run's mean activity (coarse
utilisation, SM activity, occupancy, DRAM activity) next to its peak in history_runs, per
GPU model, and a later job of the same signature without --hint-gpu-util gets it before
the calibrated model's prediction from its spec. Under lucid (no typed sharing scores) a
tiny MLP's spec predicts score 0, so it shares a running VGG-16's GPU; once a run of it
was measured busy (util 0.9) its next submission gets score 2 from history and waits. On
a GPU model it never ran on, its history is not used (the prediction again), and the
recorded runs survive a restart. The prediction made at submission for the lpa order
(utilisation.predicted_util) follows the same sources.
Usage: test_history_utilisation.py BUILD_DIR
"""
import json
import os
import sqlite3
import sys

from harness import Daemon, fail, wait_for
from model_specs import CALIBRATED_MODEL as MODEL, TINY, VGG
UTIL, SMACT = 0.9, 0.8  # what the busy tiny job shows alone (--smocc and --drama: SMACT / 2)


def set_gpus(d, which):
    """aegisd's `gpus` setting (which of the emulated GPUs it schedules), for its next start."""
    with open(d.config) as f:
        lines = [l for l in f if not l.startswith("gpus = ")]
    with open(d.config, "w") as f:
        f.writelines(lines + [f"gpus = {json.dumps(which)}\n"])


def main(build):
    # GPU 0 has 40960 MiB, GPU 1 81920 MiB: two product names, two GPU models.
    d = Daemon(build, gpus="1x40960,1x81920",
               settings={"policy": "lucid", "calibrated_model": MODEL, "observation_window_s": 1.0,
                         "telemetry_sample_hz": 4.0})
    set_gpus(d, "0")
    try:
        d.start()
        small = d.call("gpus", "--json")[0]["name"]
        vgg, tiny = os.path.join(d.dir, "vgg.json"), os.path.join(d.dir, "tiny.json")
        for path, spec in ((vgg, VGG), (tiny, TINY)):
            with open(path, "w") as f:
                json.dump(spec, f)

        def job(spec, name, seconds, *extra):
            return d.submit("--name", name, "--profiled-mem", "2000", "--model-spec", spec, *extra, "--", d.fakejob,
                            "--mem", "2000", "--smact", str(SMACT), "--util", str(UTIL), "--seconds", str(seconds),
                            "--startup", "0.2")

        def utilisation(job_id):
            return d.show(job_id)["utilisation"]

        first = job(tiny, "first", 2)
        u = utilisation(first)
        if u["gpu_util_source"] != "model-spec" or u["sharing_score"] != 0 or u["gpu_util"] >= 0.5 \
                or (u["predicted_util"], u["predicted_util_source"]) != (u["gpu_util"], "model-spec"):
            fail(f"the tiny MLP's first run, no history yet: {u}")
        # One of the same signature waits (alone: for the only GPU) while the first runs:
        # predicted from its spec now, from the first run's history once that ends.
        wait_for("the first run to start", lambda: d.show(first)["state"] == "running")
        early = job(tiny, "early", 3600, "--exclusive")
        u = utilisation(early)
        if d.show(early)["state"] != "queued" or u["predicted_util_source"] != "model-spec":
            fail(f"the job waiting behind the first run: {d.show(early)['state']}, {u}")
        d.wait_all_final([first], timeout=120)
        db = sqlite3.connect(os.path.join(d.state, "aegis.db"))
        rows = db.execute("SELECT gpu_model, gpu_util, smact, smocc, drama FROM history_runs").fetchall()
        if len(rows) != 1 or rows[0][0] != small:
            fail(f"history_runs holds {rows}, expected one run on '{small}'")
        model, *measured = rows[0]
        expected = {"gpu_util": UTIL, "smact": SMACT, "smocc": SMACT / 2, "drama": SMACT / 2}
        for got, (what, want) in zip(measured, expected.items()):
            if got is None or abs(got - want) > 0.1:
                fail(f"the run's mean {what} is {got}, expected about {want} (alone on its GPU): {rows}")
        print(f"OK: the run's mean activity recorded on '{model}': util {measured[0]:.3f}, smact {measured[1]:.3f}, "
              f"smocc {measured[2]:.3f}, drama {measured[3]:.3f}")
        u = utilisation(early)
        if u["predicted_util_source"] != "history" or abs(u["predicted_util"] - measured[0]) > 1e-6:
            fail(f"the job that waited while the first run ended kept its earlier prediction: {u}")
        d.run_cli("cancel", str(early))  # cancelled: no second run in history
        d.wait_all_final([early], timeout=120)
        print(f"OK: a job waiting while a run of its signature ended was predicted again from it ({measured[0]:.3f})")

        # VGG-16 (predicted score 2) runs until cancelled; a tiny MLP of another signature
        # (its score still predicted: 0) shares its GPU; the measured one (history: busy,
        # so 2) waits for it.
        big = job(vgg, "big", 3600)
        wait_for("VGG-16 to run", lambda: d.show(big)["state"] == "running")
        other = job(tiny, "other", 0.5, "--tag", "other")
        d.wait_all_final([other], timeout=120)
        if d.show(other)["state"] != "completed" or d.show(big)["state"] != "running":
            fail(f"a tiny MLP without history did not share VGG-16's GPU: {d.show(other)}")
        second = job(tiny, "second", 0.5)
        u = utilisation(second)
        if u["gpu_util_source"] != "history" or abs(u["gpu_util"] - measured[0]) > 1e-6 or u["sharing_score"] != 2 \
                or u["sharing_score_source"] != "history":
            fail(f"the second run of the measured signature: {u}, expected util {measured[0]} from history, score 2")
        # The prediction made at its submission (the lpa order's) comes from history too.
        if u["predicted_util_source"] != "history" or abs(u["predicted_util"] - measured[0]) > 1e-6:
            fail(f"the second run's predicted utilisation: {u}, expected {measured[0]} from history")
        shown = d.run_cli("show", str(second)).stdout
        if f"gpu util   {measured[0]:.2f} (history)   sharing score 2 (history)" not in shown:
            fail(f"aegis show does not say where the utilisation came from:\n{shown}")
        wait_for("the measured job to wait for its sharing score",
                 lambda: "sharing" in d.run_cli("queue").stdout.split("head of the queue waits:")[-1])
        if d.show(second)["attempt_log"] or d.show(big)["state"] != "running":
            fail("the job whose history says it keeps the GPU busy shared VGG-16's GPU under lucid")
        d.run_cli("cancel", str(big))
        d.wait_all_final([big, second], timeout=120)
        print(f"OK: history's utilisation {measured[0]:.2f} (score 2) made the job wait where its spec's "
              "prediction (score 0) let a job of another signature share")

        # Its history is on one GPU model: on the other it is not used; back on the first it is.
        d.stop()
        set_gpus(d, "1")
        d.start()
        large = d.call("gpus", "--json")[0]["name"]
        third = job(tiny, "third", 0.5)
        u = utilisation(third)
        if large == small or u["gpu_util_source"] != "model-spec" or u["sharing_score"] != 0:
            fail(f"on '{large}' (history only on '{small}') the job got {u}")
        d.wait_all_final([third], timeout=120)
        d.stop()
        set_gpus(d, "0")
        d.start()
        fourth = job(tiny, "fourth", 0.5)
        u = utilisation(fourth)
        if u["gpu_util_source"] != "history" or u["sharing_score"] != 2:
            fail(f"back on '{small}' after a restart the job got {u}")
        d.run_cli("cancel", str(fourth))
        print(f"OK: on '{large}' the history of '{small}' is not used; after a restart it is again on '{small}'")
    finally:
        d.cleanup()


if __name__ == "__main__":
    main(sys.argv[1])
