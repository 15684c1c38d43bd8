#!/usr/bin/python3
"""Writes data/aegis/workload_specs.csv: a model spec (scripts/model_spec.py's features) for
every profiled workload in data/aegis/workloads.csv, the training and validation data of
the calibrated memory estimator (docs/estimators.md, "Real networks").

    /usr/bin/python3 scripts/workload_specs.py [--out data/aegis/workload_specs.csv]
    /usr/bin/python3 scripts/workload_specs.py --study   # -> data/aegis/workload_specs_study.csv

Each model is defined here (torchvision 0.14's networks, the repository's workloads/*.py
transformers, small definitions below) and measured by model_spec.features() on fake
tensors, on the CPU, with a batch of 2 (activations per sample do not depend on the batch).
Where no definition runs on fake tensors (torchvision's Mask R-CNN needs detection ops,
DLRM's embedding tables, U-Net and Xception are not in torchvision), the row comes from the
catalog's torchsummary columns instead (source "summary", the rule of docs/estimators.md);
the `source` column says which.
--study writes the table of scripts/memory_model_study.py's activation-feature study
(docs/estimators.md, "Autograd's saved tensors"): Xception and DLRM from their definitions
in scripts/catalog_models.py instead of their summary rows, and one more column,
`saved_activation_bytes` (model_spec.saved_activation_bytes: what autograd saves for the
backward pass per sample; empty for the summary rows, Mask R-CNN and U-Net: torchvision's
Mask R-CNN needs detection targets and data-dependent ops fake tensors cannot run, and no
standard U-Net has the catalog's 24,439,269 parameters). Needs PyTorch and torchvision
(Debian: python3-torch, python3-torchvision). Deterministic: no randomness reaches the output.
"""
import argparse
import csv
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(1, os.path.join(ROOT, "workloads"))
sys.dont_write_bytecode = True
import catalog_models  # noqa: E402
import model_spec  # noqa: E402

# Sequence lengths are not in the catalog; these are the Hugging Face example scripts'
# defaults the CARMA workloads ran (run_mlm / run_plm: 512, run_clm: GPT-2's 1024) and the
# Llama row's own --max_length 512.
TRANSFORMERS = {  # model: (kind, vocab, width, layers, heads, ffn, seq)
    "bert_base": ("encoder", 30522, 768, 12, 12, 3072, 512),
    "bert_large": ("encoder", 30522, 1024, 24, 16, 4096, 512),
    "xlnet_base_cased": ("encoder", 32000, 768, 12, 12, 3072, 512),
    "xlnet_large_cased": ("encoder", 32000, 1024, 24, 16, 4096, 512),
    "gpt2_large": ("decoder", 50257, 1280, 36, 20, 5120, 1024),
    "gpt2_xl": ("decoder", 50257, 1600, 48, 25, 6400, 1024),
    "llama3_width_8layer": ("decoder", 50257, 4096, 8, 32, 14336, 512),
}


def cifar_resnet(depth):
    """torchvision's ResNet unchanged (ImageNet stem: stride-2 convolution and max-pool) with
    100 classes, run on 32x32 images: the catalog's summaries match it (11,227,812 and
    21,335,972 parameters, 1.53 and 2.41 MB forward/backward), not the 3x3-stem CIFAR variant."""
    import torchvision.models as tv
    return (tv.resnet18 if depth == 18 else tv.resnet34)(num_classes=100)


def mnist_cnn():
    """PyTorch's examples/mnist network (1,199,882 parameters, as the catalog's summary)."""
    import torch.nn as nn
    return nn.Sequential(nn.Conv2d(1, 32, 3), nn.ReLU(), nn.Conv2d(32, 64, 3), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Dropout(0.25), nn.Flatten(), nn.Linear(9216, 128), nn.ReLU(), nn.Dropout(0.5),
                         nn.Linear(128, 10))


def transformer(name):
    # workloads/gpt.py's block for every transformer: nn.TransformerEncoderLayer (bert.py)
    # does not run on torch 1.13's fake tensors (its attention mixes meta and CPU tensors).
    # Its gated FFN holds 3 x width x ffn weights; an encoder's plain FFN 2 x width x ffn, so
    # encoders get 2/3 of their FFN width here: the same parameter count.
    import gpt
    kind, vocab, width, layers, heads, ffn, seq = TRANSFORMERS[name]
    return gpt.Decoder(vocab, width, layers, heads, ffn if kind == "decoder" else ffn * 2 // 3, seq)


def definitions(study):
    """model (the catalog's `model` and `dataset`) -> (factory, one sample's shape, dtype)."""
    import torchvision.models as tv
    img, cifar = [3, 224, 224], [3, 32, 32]
    defs = {
        ("vgg16", "imagenet"): (lambda: tv.vgg16(), img, "float32"),
        ("resnet50", "imagenet"): (lambda: tv.resnet50(), img, "float32"),
        ("mobilenet", "imagenet"): (lambda: tv.mobilenet_v2(), img, "float32"),
        ("efficientnet", "imagenet"): (lambda: tv.efficientnet_b0(), img, "float32"),
        ("inception", "imagenet"): (lambda: tv.inception_v3(init_weights=False, aux_logits=False), [3, 299, 299],
                                    "float32"),
        ("resnet18", "cifar100"): (lambda: cifar_resnet(18), cifar, "float32"),
        ("resnet34", "cifar100"): (lambda: cifar_resnet(34), cifar, "float32"),
        ("mobilenet", "cifar100"): (lambda: tv.mobilenet_v2(num_classes=100), cifar, "float32"),
        ("efficientnet", "cifar100"): (lambda: tv.efficientnet_b0(num_classes=100), cifar, "float32"),
        ("mnist_cnn", "mnist"): (mnist_cnn, [1, 28, 28], "float32"),
    }
    for name, t in TRANSFORMERS.items():
        defs[(name, "wiki")] = (lambda n=name: transformer(n), [t[6]], "int64")
    if study:
        # 224x224, not Xception's usual 299: the catalog's summary (397.88 MB per sample) is
        # what torchsummary counts for this definition at 224 (397.86 MB), not at 299 (725).
        defs[("xception", "imagenet")] = (catalog_models.xception, img, "float32")
        defs[("dlrm", "criteo")] = (catalog_models.DLRM, [catalog_models.DLRM_DENSE + catalog_models.DLRM_TABLES],
                                    "float32")
    return defs


def measure(factory, shape, dtype, study):
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode
    batch = 2

    def make_x(b):  # zeros: valid token and category ids; fake tensors carry no values anyway
        return torch.zeros([b] + shape, dtype=getattr(torch, dtype))

    with FakeTensorMode():
        model = factory()
        if dtype == "int64":
            x = torch.randint(0, 2, [batch] + shape, dtype=torch.int64)
        else:
            x = torch.randn([batch] + shape)
        return model_spec.features(model, x, batch, make_x if study else None)


def from_summary(row):
    """The torchsummary rule of docs/estimators.md for a summary seen at one batch size:
    F = 2 x 4 bytes x elements of the whole batch's layer outputs, in MiB."""
    params = int(row["model_summary_total_params"])
    f_mib = float(row["model_summary_forward_backward_pass_size_mb"])
    batch = int(row["batch_size"])
    return {"total_parameters": params, "total_activations": int(f_mib * 2**20 / 8 / batch),
            "depth": 0, "activation": "unknown", "layer_counts": {}, "saved_activation_bytes": ""}


COLUMNS = ["name", "model", "batch_size", "gpus", "precision", "total_parameters", "total_activations", "depth",
           "activation", "layer_counts", "source"]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--workloads", default=os.path.join(ROOT, "data/aegis/workloads.csv"))
    p.add_argument("--out", help="default data/aegis/workload_specs.csv, with --study workload_specs_study.csv")
    p.add_argument("--study", action="store_true",
                   help="the saved-tensors study's table: Xception and DLRM defined, saved_activation_bytes column")
    args = p.parse_args()
    args.out = args.out or os.path.join(ROOT, "data/aegis", "workload_specs_study.csv" if args.study
                                        else "workload_specs.csv")
    model_spec.require_torch("workload_specs.py")
    defs = definitions(args.study)
    cache = {}
    rows = []
    with open(args.workloads) as f:
        for row in csv.DictReader(f):
            if row["in_profiled_53_catalog"] != "yes" or not row["peak_memory_mib"]:
                continue
            key = (row["model"], row["dataset"])
            if key in defs:
                if key not in cache:
                    print(f"measuring {key[0]} ({key[1]})", file=sys.stderr)
                    cache[key] = measure(*defs[key], args.study)
                spec, source = cache[key], "model_spec"
            elif row["model_summary_forward_backward_pass_size_mb"]:
                spec, source = from_summary(row), "summary"
            else:
                sys.exit(f"workload_specs.py: error: {row['name']}: no definition and no summary")
            rows.append({"name": row["name"], "model": row["model"] + "/" + row["dataset"],
                         "batch_size": row["batch_size"], "gpus": row["num_gpus"],
                         "precision": row["precision"] or "fp32",
                         "total_parameters": spec["total_parameters"],
                         "total_activations": spec["total_activations"], "depth": spec["depth"],
                         "activation": spec["activation"],
                         "layer_counts": ";".join(f"{k}:{v}" for k, v in sorted(spec["layer_counts"].items())),
                         "source": source})
            if args.study:
                rows[-1]["saved_activation_bytes"] = spec["saved_activation_bytes"]
    columns = COLUMNS[:-1] + ["saved_activation_bytes", "source"] if args.study else COLUMNS
    with open(args.out, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=columns, lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    print(f"{len(rows)} workloads -> {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
