#!/usr/bin/python3
"""Estimates a PyTorch model's peak training memory on fake tensors (no GPU, no memory).

    scripts/faketensor_estimate.py --model file.py:build_model --batch-size 32 --input-shape 3,224,224

Runs one forward and backward pass under torch._subclasses.fake_tensor.FakeTensorMode
(tensors carry shapes and dtypes only) and prints JSON with the estimate in MiB:
  parameters        bytes of every parameter and buffer
  gradients         one gradient per trainable parameter
  optimizer_state   --optimizer adam: 2 copies of the trainable parameters (exp_avg,
                    exp_avg_sq); sgd-momentum: 1; sgd: 0
  saved_activations tensors autograd keeps for the backward pass (saved_tensors_hooks),
                    counted once per underlying tensor (views share their base) and
                    leaving out parameters (already counted)
  peak_mib          their sum
Not counted (why it underestimates real peaks): the CUDA context and framework kernels
(0.3 to 1.5 GiB per process), the caching allocator's rounding and reserve, cuDNN/cuBLAS
workspaces, transient buffers during backward. Model loading as in scripts/model_spec.py.
torch 1.13 has no fake (meta) kernel for convolution backward: FakeTensorMode then runs the
real kernel on zero-filled CPU tensors (right shapes, but seconds of CPU and real memory for
a large CNN: VGG-16 at batch 32 takes about 19 s); --forward-only skips the backward pass,
which changes no figure here (gradients are counted from the trainable parameters).
Needs PyTorch (Debian: python3-torch, for /usr/bin/python3); without it prints one line
and exits 3.
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import model_spec  # noqa: E402  (shares the model loading and argument parsing)

MIB = 1024.0 * 1024.0
OPTIMIZER_COPIES = {"adam": 2, "sgd-momentum": 1, "sgd": 0}


nbytes = model_spec.nbytes


def estimate(model, x, optimizer, backward=True):
    import torch
    params = list(model.parameters())
    buffers = list(model.buffers())
    out, saved = model_spec.saved_tensors(model, x)
    outs = list(model_spec.tensors_in(out))
    if not outs:
        raise RuntimeError("the model returned no tensor")
    loss = sum(o.float().sum() for o in outs if o.is_floating_point())
    if not isinstance(loss, torch.Tensor) or not loss.requires_grad:
        raise RuntimeError("the model's output does not depend on trainable parameters")
    trainable = [p for p in params if p.requires_grad]
    if backward:
        loss.backward()
        with_grad = [p for p in trainable if p.grad is not None]  # parameters the loss reached
    else:
        with_grad = trainable
    parts = {
        "parameters": sum(nbytes(p) for p in params) + sum(nbytes(b) for b in buffers),
        "gradients": sum(nbytes(p) for p in with_grad),
        "optimizer_state": OPTIMIZER_COPIES[optimizer] * sum(nbytes(p) for p in trainable),
        "saved_activations": sum(nbytes(t) for t in saved.values()),
    }
    return parts


def main():
    prog = "faketensor_estimate.py"
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    model_spec.common_args(p)
    p.add_argument("--optimizer", default="adam", choices=sorted(OPTIMIZER_COPIES))
    p.add_argument("--forward-only", action="store_true",
                   help="skip the backward pass (gradients then counted for every trainable parameter); "
                        "torch 1.13 has no fake kernel for convolution backward and runs the real one on "
                        "zero-filled CPU tensors, which costs seconds and memory for large CNNs")
    args = p.parse_args()
    if args.batch_size < 1:
        model_spec.die(prog, "--batch-size: must be a positive integer")
    shape = model_spec.parse_shape(prog, args.input_shape)
    model_spec.require_torch(prog)
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode
    t0 = time.monotonic()
    try:
        with FakeTensorMode():
            model = model_spec.load_model(prog, args.model, args.model_kwargs)
            parts = estimate(model, model_spec.make_input(args, shape), args.optimizer, not args.forward_only)
    except SystemExit:
        raise
    except Exception as e:
        first = str(e).splitlines()[0] if str(e) else ""
        model_spec.die(prog, f"forward/backward on fake tensors failed: {type(e).__name__}: {first}")
    result = {
        "model": args.model,
        "batch_size": args.batch_size,
        "input_shape": shape,
        "optimizer": args.optimizer,
        **{k + "_mib": v / MIB for k, v in parts.items()},
        "peak_mib": sum(parts.values()) / MIB,
        "method": ("FakeTensorMode forward" if args.forward_only else "FakeTensorMode forward+backward") +
                  ": parameters+buffers, gradients, optimizer state, "
                  "unique saved activations; no CUDA context, workspace or allocator overhead",
        "torch": torch.__version__,
        "elapsed_s": round(time.monotonic() - t0, 3),
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
