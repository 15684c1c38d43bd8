#!/usr/bin/env python3
"""Chooses the interference model's form on measured pairs with a held-out protocol
(docs/interference.md, "Form and held-out errors").

Data: Lucid's RTX 3090 pairs (data/interference/lucid_*: each job's solo gpu_util and
gmem_util, each job's speed next to the other) and Gavel's V100 pairs
(data/interference/gavel_simulation_throughputs.json, single-GPU jobs). Gavel recorded no
utilisation, so a Gavel job type takes the Lucid solo profile of the same network and
dataset at the nearest batch size (ResNet-18/CIFAR-10, ResNet-50/ImageNet,
Transformer/Multi30k, LM = LSTM/Wikitext-2, no AMP); Gavel's Recommendation, A3C and
CycleGAN have no such profile and are left out.
Protocol: leave one network out. For each network (a Lucid model; the four Gavel families
share names with Lucid models), fit on every pair in which neither job is that network and
predict the pairs in which one is; errors are over both jobs of every held-out pair, pooled.
Usage: scripts/interference/forms.py [--train=lucid|lucid,gavel] [--weighted]
(from the repository root; --weighted: each source weighs the same in the fit)."""
import csv, json, math, re, sys

D = "data/interference/"
solo = {}
for r in csv.DictReader(open(D + "lucid_single_data.csv")):
    solo[(r["model"], r["dataset"], int(r["batchsize"]), int(r["amp"]))] = (float(r["gpu_util"]) / 100, float(r["gmem_util"]) / 100)
pairs = []  # (src, net_a, net_b, ua, da, ub, db, sa, sb)
for r in csv.DictReader(open(D + "lucid_colocate_info.csv")):
    a = solo[(r["model1"], r["dataset1"], int(r["batchsize1"]), int(r["amp1"]))]
    b = solo[(r["model2"], r["dataset2"], int(r["batchsize2"]), int(r["amp2"]))]
    pairs.append(("lucid", r["model1"], r["model2"], *a, *b, float(r["speed1"]), float(r["speed2"])))
n_lucid = len(pairs)

GAVEL = {"ResNet-18": ("ResNet18", "CIFAR-10", [32, 64, 128]), "ResNet-50": ("ResNet50", "ImageNet", [32, 64, 128]),
         "Transformer": ("Transformer", "Multi30k", [32, 64]), "LM": ("LSTM", "Wikitext2", [64, 128])}


def gavel_profile(name):
    m = re.match(r"\('(.+?)(?: \(batch size (\d+)\))?', 1\)$", name)
    if not m or m.group(1) not in GAVEL or not m.group(2):
        return None
    model, ds, sizes = GAVEL[m.group(1)]
    bs = min(sizes, key=lambda s: (abs(math.log(s / int(m.group(2)))), s))
    return model, solo[(model, ds, bs, 0)]


t = json.load(open(D + "gavel_simulation_throughputs.json"))["v100"]
seen = set()
for a, row in t.items():
    pa = gavel_profile(a)
    if pa is None or not row.get("null"):
        continue
    for b, v in row.items():
        if b == "null" or (b, a) in seen or not isinstance(v, list):
            continue
        pb = gavel_profile(b)
        if pb is None or not t[b].get("null") or v[0] <= 0 or v[1] <= 0:
            continue
        seen.add((a, b))
        pairs.append(("gavel", pa[0], pb[0], *pa[1], *pb[1], v[0] / row["null"], v[1] / t[b]["null"]))
print(f"pairs: lucid {n_lucid}, gavel v100 {len(pairs) - n_lucid}")


# Forms: speed of a job with solo (u, d) next to co-runners with summed (U, D).
def f_none(p, u, d, U, D):
    return 1.0


def f_today(p, u, d, U, D):  # 1 / (1 + a u U + b d D)
    return 1 / (1 + p[0] * u * U + p[1] * d * D)


def f_sat(p, u, d, U, D):  # its GPU phases stretch by the demand past the whole GPU
    return 1 / (1 + p[0] * u * U + p[1] * d * D + u * max(0.0, u + U - 1))


def f_sat_c(p, u, d, U, D):  # saturation with a fitted weight c
    return 1 / (1 + p[0] * u * U + p[1] * d * D + p[2] * u * max(0.0, u + U - 1))


def f_emu(p, u, d, U, D):  # the emulated GPU's form (docs/emulated-gpu.md)
    return 1 / ((1 - u) + u * (1 + p[0] * min(1.0, U)) * max(1.0, u + U))


SHIPPED = [0.28, 0.44]
FORMS = [("no interference", f_none, 0), ("today as shipped (a 0.28, b 0.44, not refitted)", f_today, -1), ("today: 1/(1+a·u·U+b·d·D)", f_today, 2),
         ("+ saturation u·max(0,u+U-1)", f_sat, 2), ("+ saturation, weight c", f_sat_c, 3),
         ("emulated GPU's form (k)", f_emu, 1)]


def sse(f, p, ps, weighted=False):
    s = 0.0
    for q in ps:
        e1 = f(p, q[3], q[4], q[5], q[6]) - q[7]
        e2 = f(p, q[5], q[6], q[3], q[4]) - q[8]
        s += (e1 * e1 + e2 * e2) * (WEIGHT[q[0]] if weighted else 1.0)
    return s


def fit(f, k, ps):
    if k == 0:
        return []
    if k < 0:
        return SHIPPED
    # Grid over [0,3]^k (step 0.25), then coordinate refinement down to 0.005.
    import itertools
    best = min(itertools.product([i * 0.25 for i in range(13)], repeat=k), key=lambda p: sse(f, p, ps, WEIGHTED))
    best, step = list(best), 0.125
    while step >= 0.005:
        moved = True
        while moved:
            moved = False
            for i in range(k):
                for s in (-step, step):
                    q = best.copy()
                    q[i] = max(0.0, q[i] + s)
                    if sse(f, q, ps, WEIGHTED) < sse(f, best, ps, WEIGHTED) - 1e-12:
                        best, moved = q, True
        step /= 2
    return best


def rmse(f, p, ps):
    return math.sqrt(sse(f, p, ps) / (2 * len(ps))) if ps else float("nan")


# Least squares with each source weighing the same in total (Lucid's 1,388 pairs would
# otherwise decide alone; only Gavel has pairs that lose more than half).
N = {"lucid": sum(q[0] == "lucid" for q in pairs), "gavel": sum(q[0] == "gavel" for q in pairs)}
WEIGHT = {k: len(pairs) / (2 * v) for k, v in N.items()}
TRAIN = [a.split("=")[1] for a in sys.argv[1:] if a.startswith("--train=")] or ["lucid", "gavel"]
TRAIN = TRAIN[0].split(",") if len(TRAIN) == 1 else TRAIN
WEIGHTED = "--weighted" in sys.argv
nets = sorted({q[1] for q in pairs} | {q[2] for q in pairs})
print(f"networks (folds): {len(nets)}")
print(f"training sources: {'+'.join(TRAIN)}; weighted by source: {WEIGHTED}")
print("| form | params (fit on all training pairs) | RMSE on all pairs | held-out RMSE, Lucid | held-out RMSE, Gavel | held-out RMSE, all | held-out mean error, Gavel |")
print("|---|---|---|---|---|---|---|")
for name, f, k in FORMS:
    p_all = fit(f, k, [q for q in pairs if q[0] in TRAIN])
    held = {"lucid": 0.0, "gavel": 0.0}
    bias = 0.0
    cnt = {"lucid": 0, "gavel": 0}
    for net in nets:
        train = [q for q in pairs if net not in (q[1], q[2]) and q[0] in TRAIN]
        test = [q for q in pairs if net in (q[1], q[2])]
        p = fit(f, k, train)
        for q in test:
            held[q[0]] += sse(f, p, [q])
            if q[0] == "gavel":
                bias += f(p, q[3], q[4], q[5], q[6]) - q[7] + f(p, q[5], q[6], q[3], q[4]) - q[8]
            cnt[q[0]] += 2
    hl = math.sqrt(held["lucid"] / cnt["lucid"])
    hg = math.sqrt(held["gavel"] / cnt["gavel"])
    ha = math.sqrt((held["lucid"] + held["gavel"]) / (cnt["lucid"] + cnt["gavel"]))
    ps = ", ".join(f"{x:.3f}" for x in p_all) or "-"
    print(f"| {name} | {ps} | {rmse(f, p_all, pairs):.4f} | {hl:.4f} | {hg:.4f} | {ha:.4f} | {bias / cnt['gavel']:+.3f} |")
    sys.stdout.flush()
