"""aegis-learned in aegisd: its order `lpa` ranks GPUs by their jobs' predicted utilisation,
which aegisd makes at submission (history, else calibrated_model's prediction from the
model spec; never the typed hint) and stores with the job. Two GPUs: a tiny MLP's spec
(predicted idle) that uses much memory runs on one, VGG-16's (predicted busy) that uses
little on the other. A new job goes to the tiny MLP's GPU, although most free memory
(MAGM, what `lpa` falls back to when no job carries a prediction) would pick VGG-16's;
the tiny MLP's typed hint, which claims it busy, changes nothing. After a restart with a
calibrated model that predicts no utilisation, the running jobs keep their stored
predictions and the next job goes there again. An older `jobs` table gains the columns.
Usage: test_predicted_utilisation.py BUILD_DIR
"""
import json
import os
import sqlite3
import sys

from harness import Daemon, fail, wait_for
from model_specs import CALIBRATED_MODEL as MODEL, TINY, VGG


def gpu_of(d, job):
    """The index of the GPU the job's first attempt ran on."""
    uuid = d.show(job)["attempt_log"][0]["gpus"][0]
    return [g["index"] for g in d.call("gpus", "--json") if g["uuid"] == uuid][0]


def predicted(d, job):
    u = d.show(job)["utilisation"]
    return u["predicted_util"], u["predicted_util_source"]


def both_open(d):
    """Both GPUs past their observation window (the order sees both, not whichever opens first)."""
    gpus = d.call("gpus", "--json")
    return all(g["observing"] is False for g in gpus)


def placement(build):
    d = Daemon(build, gpus="2x40960", settings={"policy": "aegis-learned", "calibrated_model": MODEL,
                                                "observation_window_s": 1.0, "telemetry_sample_hz": 4.0})
    try:
        d.start()
        specs = {}
        for name, spec in (("vgg", VGG), ("tiny", TINY)):
            specs[name] = os.path.join(d.dir, name + ".json")
            with open(specs[name], "w") as f:
                json.dump(spec, f)

        def running(spec, name, mem, *extra):
            # Light measured activity on both GPUs: the pressure filter leaves both to the order.
            job = d.submit("--name", name, "--tag", name, "--model-spec", specs[spec], *extra, "--", d.fakejob,
                           "--mem", str(mem), "--smact", "0.2", "--util", "0.2", "--seconds", "3600",
                           "--startup", "0.2")
            wait_for(f"{name} to run", lambda: d.show(job)["state"] == "running")
            return job

        # The tiny MLP claims to be busy (--hint-gpu-util 0.99): the prediction ignores it.
        tiny = running("tiny", "tiny", 24000, "--hint-gpu-util", "0.99")
        vgg = running("vgg", "vgg", 2000)
        (pt, st), (pv, sv) = predicted(d, tiny), predicted(d, vgg)
        if st != "model-spec" or sv != "model-spec" or not pt < pv:
            fail(f"predictions: tiny MLP {pt} ({st}), VGG-16 {pv} ({sv}); expected the tiny MLP's lower, from specs")
        if d.show(tiny)["utilisation"]["gpu_util_source"] != "hint":
            fail("the typed hint is not what the tiny MLP's hints say")
        shown = d.run_cli("show", str(tiny)).stdout
        if f"predicted util {pt:.2f} (model-spec)" not in shown:
            fail(f"aegis show does not give the predicted utilisation and its source:\n{shown}")
        g_tiny, g_vgg = gpu_of(d, tiny), gpu_of(d, vgg)
        wait_for("both GPUs to leave their observation window", lambda: both_open(d))
        free = {g["index"]: g["memory_total_mib"] - g["memory_used_mib"] for g in d.call("gpus", "--json")}
        if g_tiny == g_vgg or not free[g_vgg] > free[g_tiny]:
            fail(f"setup: tiny MLP on GPU {g_tiny}, VGG-16 on GPU {g_vgg}, free {free}: MAGM would not pick VGG-16's")

        def place_new(name):
            job = d.submit("--name", name, "--tag", name, "--model-spec", specs["tiny"], "--", "true")
            d.wait_all_final([job], timeout=60)
            return gpu_of(d, job)

        got = place_new("new")
        if got != g_tiny:
            fail(f"the new job went to GPU {got} (VGG-16's, most free memory: {free}), not to GPU {g_tiny}, whose "
                 f"job is predicted at {pt:.2f} against {pv:.2f}")
        print(f"OK: lpa put the new job on the GPU of the job predicted at {pt:.2f} (its hint says 0.99), not on "
              f"the one predicted at {pv:.2f} with {free[g_vgg] - free[g_tiny]} MiB more free")

        # A restart with a calibrated model that predicts no utilisation: the running jobs'
        # predictions come back from the store, not from a new prediction.
        d.stop()
        with open(MODEL) as f:
            model = json.load(f)
        model.pop("utilisation", None)
        memory_only = os.path.join(d.dir, "memory_only.json")
        with open(memory_only, "w") as f:
            json.dump(model, f)
        with open(d.config) as f:
            lines = [l for l in f if not l.startswith("calibrated_model = ")]
        with open(d.config, "w") as f:
            f.writelines(lines + [f"calibrated_model = {json.dumps(memory_only)}\n"])
        d.start()
        if predicted(d, tiny) != (pt, st) or predicted(d, vgg) != (pv, sv):
            fail(f"after the restart: {predicted(d, tiny)}, {predicted(d, vgg)}; before: {(pt, st)}, {(pv, sv)}")
        if d.show(vgg)["utilisation"]["gpu_util"] is not None or d.show(vgg)["state"] != "running":
            fail(f"after the restart VGG-16: {d.show(vgg)}; expected running, with no utilisation predicted anew")
        wait_for("both GPUs to be open after the restart", lambda: both_open(d))
        got = place_new("after-restart")
        if got != g_tiny:
            fail(f"after the restart the new job went to GPU {got}, not {g_tiny}: the predictions were lost")
        d.run_cli("cancel", str(tiny), str(vgg))
        d.wait_all_final([tiny, vgg], timeout=60)
        print("OK: after a restart the running jobs kept their predictions, and lpa placed the same way")
    finally:
        d.cleanup()


def older_jobs_table(build):
    """A schema-2 database whose jobs table predates the prediction columns gets them at
    start; its jobs keep no prediction (NULL, '')."""
    d = Daemon(build, gpus="1x40960", settings={"observation_window_s": 1.0})
    try:
        d.start()
        old = d.submit("--", "true")
        d.wait_all_final([old], timeout=60)
        d.stop()
        db = os.path.join(d.state, "aegis.db")
        con = sqlite3.connect(db)
        con.executescript("ALTER TABLE jobs DROP COLUMN predicted_util; "
                          "ALTER TABLE jobs DROP COLUMN predicted_util_source;")
        con.close()
        d.start()
        if predicted(d, old) != (None, None) or d.show(old)["state"] != "completed":
            fail(f"the older job after the columns were added: {d.show(old)}")
        con = sqlite3.connect(db)
        row = con.execute("SELECT predicted_util, predicted_util_source FROM jobs WHERE id = ?", (old,)).fetchone()
        con.close()
        if row != (None, ""):
            fail(f"the older job's prediction columns: {row}")
        print("OK: an older jobs table gained the prediction columns; its job has none")
    finally:
        d.cleanup()


def main(build):
    older_jobs_table(build)
    placement(build)


if __name__ == "__main__":
    main(sys.argv[1])
