#!/usr/bin/python3
"""Writes the learned memory estimator's model spec (features JSON) for a PyTorch model.

    scripts/model_spec.py --model file.py:build_model --batch-size 32 --input-shape 3,224,224 [--out spec.json]

`file.py:name` names a function returning an nn.Module, or an nn.Module class; it is
called without arguments (`--model-kwargs '{"width": 64}'` passes keyword arguments).
The model runs one forward pass on fake tensors (torch._subclasses.fake_tensor.FakeTensorMode:
shapes only, no memory, no GPU). The spec's fields, as `aegis estimate predict --features`
and features_from_json read them (docs/estimators.md):
  depth              leaf modules holding weights, except normalisation layers and PReLU
                     (GPUMemNet counts its MLPs' linear layers)
  total_activations  elements of every leaf module's output, per sample (forward hooks)
  total_parameters   parameter elements
  batchnorm_layers, dropout_layers   counts of those modules
  activation         the most common activation module class ("ReLU", "GELU", ...);
                     "unknown" if the model applies its activations as functions
  layer_counts       leaf module classes in lower case ("linear", "conv2d", ...)
  batch_size         as given
Needs PyTorch (Debian: python3-torch, for /usr/bin/python3); without it prints one line
and exits 3. Errors in the model file: one line, exit 1. Standard library otherwise.
"""
import argparse
import collections
import importlib.util
import json
import os
import sys

NO_TORCH = 3


def require_torch(prog):
    try:
        import torch  # noqa: F401
    except ImportError:
        print(f"{prog}: PyTorch is not installed for {sys.executable} "
              "(Debian: apt-get install python3-torch, then run with /usr/bin/python3)", file=sys.stderr)
        sys.exit(NO_TORCH)


def die(prog, msg):
    print(f"{prog}: error: {msg}", file=sys.stderr)
    sys.exit(1)


def common_args(p):
    p.add_argument("--model", required=True, help="FILE.py:NAME (function returning an nn.Module, or a class)")
    p.add_argument("--model-kwargs", default="{}", help="JSON object of keyword arguments for NAME")
    p.add_argument("--batch-size", type=int, required=True)
    p.add_argument("--input-shape", required=True, help="one sample's shape, e.g. 3,224,224 or 128")
    p.add_argument("--input-dtype", default="float32", choices=["float32", "float16", "int64"])
    p.add_argument("--input-high", type=int, default=2, help="int64 inputs: values drawn from [0, HIGH) (token ids)")


def parse_shape(prog, text):
    try:
        shape = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        die(prog, f"--input-shape: expected comma-separated positive integers, got '{text}'")
    if not shape or any(s < 1 for s in shape):
        die(prog, f"--input-shape: expected comma-separated positive integers, got '{text}'")
    return shape


def load_model(prog, spec, kwargs_text):
    """Imports FILE.py and calls NAME(**kwargs); must be run inside the fake-tensor mode so
    that the weights the model creates are fake too."""
    import torch
    path, sep, name = spec.rpartition(":")
    if not sep or not path or not name:
        die(prog, f"--model: expected FILE.py:NAME, got '{spec}'")
    if not os.path.isfile(path):
        die(prog, f"--model: {path}: no such file")
    try:
        kwargs = json.loads(kwargs_text)
    except json.JSONDecodeError as e:
        die(prog, f"--model-kwargs: not valid JSON ({e})")
    if not isinstance(kwargs, dict):
        die(prog, "--model-kwargs: expected a JSON object")
    module_name = "aegis_user_model_" + os.path.splitext(os.path.basename(path))[0]
    loader = importlib.util.spec_from_file_location(module_name, path)
    if loader is None:
        die(prog, f"--model: {path}: cannot be imported")
    module = importlib.util.module_from_spec(loader)
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    try:
        loader.loader.exec_module(module)
    except Exception as e:  # the user's file: report its error in one line
        die(prog, f"--model: {path}: {type(e).__name__}: {e}")
    finally:
        sys.path.pop(0)
    factory = getattr(module, name, None)
    if factory is None:
        die(prog, f"--model: {path} has no '{name}'")
    try:
        model = factory(**kwargs)
    except Exception as e:
        die(prog, f"--model: {name}(): {type(e).__name__}: {e}")
    if not isinstance(model, torch.nn.Module):
        die(prog, f"--model: {name}() returned {type(model).__name__}, not a torch.nn.Module")
    return model


def make_input(args, shape):
    import torch
    full = [args.batch_size] + shape
    if args.input_dtype == "int64":
        return torch.randint(0, max(1, args.input_high), full, dtype=torch.int64)
    return torch.randn(full, dtype=getattr(torch, args.input_dtype))


def tensors_in(x):
    import torch
    if isinstance(x, torch.Tensor):
        yield x
    elif isinstance(x, (list, tuple)):
        for v in x:
            yield from tensors_in(v)
    elif isinstance(x, dict):
        for v in x.values():
            yield from tensors_in(v)


def leaves(model):
    return [m for m in model.modules() if not list(m.children())]


def activation_classes():
    import torch.nn.modules.activation as act
    not_functions = {"Softmax", "Softmin", "LogSoftmax", "Softmax2d", "MultiheadAttention"}
    return {n for n in dir(act) if isinstance(getattr(act, n), type) and n[0].isupper() and n not in not_functions}


def saved_tensors(model, x):
    """Runs one forward pass with autograd on and returns (output, {id: tensor}) of the
    tensors autograd saves for the backward pass: once per underlying tensor (views share
    their base), leaving out parameters and buffers (they are counted as weights)."""
    import torch
    skip = {id(p) for p in model.parameters()} | {id(b) for b in model.buffers()}
    saved = {}  # id of the underlying tensor -> tensor (kept alive so that ids stay unique)

    def pack(t):
        base = t._base if t._base is not None else t
        if id(base) not in skip:
            saved[id(base)] = base
        return t

    model.train()
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = model(x)
    return out, saved


def nbytes(t):
    return t.numel() * t.element_size()


SAVED_BATCHES = (2, 4)  # batch norm needs 2; the slope between two sizes drops the constant


def saved_activation_bytes(model, make_x):
    """Bytes autograd saves for the backward pass per sample, in the dtype the model is
    built in: the slope of the saved bytes between SAVED_BATCHES (make_x(batch) -> input),
    so that what does not grow with the batch is left out. Not a spec field: the study of
    docs/estimators.md ("Autograd's saved tensors") found it no better than
    total_activations for the calibrated estimator."""
    lo, hi = SAVED_BATCHES
    size = [sum(nbytes(t) for t in saved_tensors(model, make_x(b))[1].values()) for b in (lo, hi)]
    return max(0, round((size[1] - size[0]) / (hi - lo)))


def features(model, x, batch_size, make_x=None):
    """The spec's fields; with make_x (batch -> input) also saved_activation_bytes (the
    study's, scripts/workload_specs.py --study)."""
    import torch
    from torch.nn.modules.batchnorm import _BatchNorm
    from torch.nn.modules.dropout import _DropoutNd
    acts = activation_classes()
    outputs = []
    hooks = [m.register_forward_hook(lambda m, i, o: outputs.append(sum(t.numel() for t in tensors_in(o))))
             for m in leaves(model)]
    model.train()
    with torch.no_grad():
        model(x)
    for h in hooks:
        h.remove()
    counts = collections.Counter(type(m).__name__.lower() for m in leaves(model))
    found = collections.Counter(type(m).__name__ for m in leaves(model) if type(m).__name__ in acts)
    no_depth = (_BatchNorm, torch.nn.LayerNorm, torch.nn.GroupNorm, torch.nn.PReLU)
    depth = sum(1 for m in model.modules()
                if list(m.parameters(recurse=False)) and not isinstance(m, no_depth))
    return {
        "depth": max(1, depth),
        "total_activations": int(sum(outputs) // batch_size),
        "total_parameters": int(sum(p.numel() for p in model.parameters())),
        "batch_size": batch_size,
        "batchnorm_layers": sum(1 for m in model.modules() if isinstance(m, _BatchNorm)),
        "dropout_layers": sum(1 for m in model.modules() if isinstance(m, _DropoutNd)),
        "activation": found.most_common(1)[0][0] if found else ("Identity" if counts.get("identity") else "unknown"),
        "layer_counts": dict(sorted(counts.items())),
        **({"saved_activation_bytes": saved_activation_bytes(model, make_x)} if make_x else {}),
    }


def main():
    prog = "model_spec.py"
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    common_args(p)
    p.add_argument("--out", help="write the spec here (default: standard output)")
    args = p.parse_args()
    if args.batch_size < 1:
        die(prog, "--batch-size: must be a positive integer")
    shape = parse_shape(prog, args.input_shape)
    require_torch(prog)
    from torch._subclasses.fake_tensor import FakeTensorMode
    try:
        with FakeTensorMode():
            model = load_model(prog, args.model, args.model_kwargs)
            spec = features(model, make_input(args, shape), args.batch_size)
    except SystemExit:
        raise
    except Exception as e:
        die(prog, f"forward pass on fake tensors failed: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
    text = json.dumps(spec, indent=2) + "\n"
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
