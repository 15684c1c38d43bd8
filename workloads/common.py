"""Shared by the training workloads: arguments, device and precision, the timed loop, the report.

Each workload script builds a model and a synthetic batch (nothing is downloaded) and hands
them to run(). run() trains for --steps or --seconds and prints a human summary, then one JSON
line last on stdout, which scripts/gpu-validate.sh parses out of `aegis logs`.
"""
import argparse
import json
import math
import os
import sys
import time

T_START = time.time()  # imported before torch, so startup_s counts the imports and CUDA setup

import torch  # noqa: E402  (after T_START on purpose)

MIB = 1024 * 1024
PROGRESS_EVERY_S = 10.0


class Job:
    """What a workload hands to run(): its model, optimizer, batches and loss."""

    def __init__(self, model, optimizer, make_batch, loss, samples_per_batch=None):
        self.model = model
        self.optimizer = optimizer
        self.make_batch = make_batch          # batch_size -> tuple of tensors on the device
        self.loss = loss                      # (model, *batch) -> scalar loss
        self.samples_per_batch = samples_per_batch or (lambda bs: bs)


def parser(description, batch_size, precision="fp32"):
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--batch-size", type=int, default=batch_size, help=f"samples per step (default {batch_size})")
    length = p.add_mutually_exclusive_group()
    length.add_argument("--steps", type=int, help="training steps (default 50)")
    length.add_argument("--seconds", type=float, help="train for this long instead of a number of steps")
    p.add_argument("--precision", choices=["fp32", "bf16"], default=precision,
                   help=f"fp32, or bf16 autocast with fp32 weights (default {precision})")
    p.add_argument("--device", choices=["cuda", "cpu"], help="default: cuda when available, else cpu")
    p.add_argument("--memory-target-gib", type=float,
                   help="choose the largest batch size whose peak memory (PyTorch's reserved memory, what the "
                        "driver sees less the CUDA context) stays under this many GiB: extrapolated from two "
                        "probe steps, then checked with a step at the chosen size and shrunk until it fits; "
                        "overrides --batch-size")
    p.add_argument("--input-ms", type=float, default=0.0,
                   help="an input-bound job: each step first waits this many milliseconds on the CPU, as for a "
                        "data loader that cannot keep up (the GPU idles meanwhile; default 0)")
    p.add_argument("--smoke", action="store_true", help="tiny widths, for a quick check on a CPU")
    p.add_argument("--seed", type=int, default=0)
    return p


def parse(p, argv=None):
    args = p.parse_args(argv)
    if args.batch_size < 1:
        p.error("--batch-size must be at least 1")
    if args.steps is not None and args.steps < 1:
        p.error("--steps must be at least 1")
    if args.seconds is not None and not args.seconds > 0:
        p.error("--seconds must be positive")
    if args.memory_target_gib is not None and not args.memory_target_gib > 0:
        p.error("--memory-target-gib must be positive")
    if not 0 <= args.input_ms <= 60000:
        p.error("--input-ms must be between 0 and 60000")
    if args.steps is None and args.seconds is None:
        args.steps = 50
    if args.device is None:
        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    if args.device == "cuda" and not torch.cuda.is_available():
        p.error("--device cuda: PyTorch sees no CUDA GPU (use --device cpu)")
    if args.memory_target_gib is not None and args.device != "cuda":
        p.error("--memory-target-gib needs --device cuda (it measures CUDA memory)")
    return args


OOM_TEXT = ("out of memory", "CUBLAS_STATUS_ALLOC_FAILED", "CUDNN_STATUS_ALLOC_FAILED")


def is_oom(e):
    # torch.cuda.OutOfMemoryError exists from PyTorch 1.13; older ones, and cuBLAS or cuDNN
    # failing to get a workspace, raise RuntimeError.
    oom_type = getattr(torch.cuda, "OutOfMemoryError", None)
    return (oom_type is not None and isinstance(e, oom_type)) or \
        (isinstance(e, RuntimeError) and any(t in str(e) for t in OOM_TEXT))


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _peaks(device):
    if device.type != "cuda":
        return 0.0, 0.0
    return (torch.cuda.max_memory_allocated(device) / MIB, torch.cuda.max_memory_reserved(device) / MIB)


def _step(job, batch, autocast):
    job.optimizer.zero_grad(set_to_none=True)
    with autocast():
        loss = job.loss(job.model, *batch)
    loss.backward()
    job.optimizer.step()
    return loss


def _peak_of_step(job, device, autocast, bs):
    """The peak memory in MiB of one training step at batch size bs, as the driver would see it
    (PyTorch's reserved memory, which holds the allocations and the allocator's rounding), or None
    when the step runs out of memory. The cache is emptied first, so that an earlier, larger step's
    reserve does not count."""
    _sync(device)
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats(device)
    try:
        _step(job, job.make_batch(bs), autocast)
        _sync(device)
    except Exception as e:  # noqa: BLE001 (an OOM is an answer here; anything else is raised)
        if not is_oom(e):
            raise
        job.optimizer.zero_grad(set_to_none=True)
        torch.cuda.empty_cache()
        return None
    return max(torch.cuda.max_memory_allocated(device), torch.cuda.max_memory_reserved(device)) / MIB


def choose_batch(peak_of, target_mib, small=1, large=3, checks=6):
    """The batch size for a peak under target_mib, given peak_of(bs) -> MiB (None: out of memory).

    Peak memory is nearly linear in the batch size, so two small probes give a first guess; but
    only nearly: on an H200 the guess from batches 1 and 3 for 110 GiB was batch 192, whose peak
    was 141 GiB (attention and allocator rounding grow faster than the probes show). So the
    guess is checked with a step at that size and shrunk in proportion to the overshoot (or
    halved after an out-of-memory) until one fits, at most `checks` times; the answer is always
    a size that was measured under the target (or `small`, when even that one is not)."""
    p_small, p_large = peak_of(small), peak_of(large)
    if p_small is None or p_small > target_mib:
        return small, p_small
    if p_large is None or p_large > target_mib:
        return small, p_small
    best, best_peak = large, p_large
    slope = max((p_large - p_small) / (large - small), 1.0)
    bs = small + int(math.floor((target_mib - p_small) / slope))
    for _ in range(checks):
        if bs <= best:
            break
        p = peak_of(bs)
        if p is not None and p <= target_mib:
            best, best_peak = bs, p
            break
        if p is None:
            bs = best + (bs - best) // 2
        else:  # shrink the part above the small probe by the overshoot, with 3 % to spare
            bs = small + int(math.floor((bs - small) * (target_mib - p_small) / (p - p_small) * 0.97))
    return best, best_peak


def _fit_batch(job, device, autocast, target_gib):
    """Batch size for a peak under target_gib (choose_batch), after one step that creates the
    optimizer state (it is part of every later step's peak)."""
    _step(job, job.make_batch(1), autocast)
    tried = []

    def peak_of(bs):
        p = _peak_of_step(job, device, autocast, bs)
        tried.append(f"batch {bs}: " + ("out of memory" if p is None else f"{p:.0f} MiB"))
        return p

    chosen, peak = choose_batch(peak_of, target_gib * 1024)
    print(f"memory probe: {'; '.join(tried)}; batch {chosen} for under {target_gib:g} GiB", flush=True)
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats(device)
    return chosen


def run(name, args, build):
    """Builds the job with build(args, device), trains, reports. Exits 1 on a CUDA OOM."""
    device = torch.device(args.device)
    torch.manual_seed(args.seed)
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = True
        torch.set_float32_matmul_precision("high")  # TF32 for fp32 matrix products, as training does
    elif args.smoke and os.environ.get("OMP_NUM_THREADS") is None:
        torch.set_num_threads(1)  # tiny tensors: more threads only wait on each other (20x slower on a busy 2-core machine)
    dtype = torch.bfloat16 if args.precision == "bf16" else None

    def autocast():
        return torch.autocast(device_type=device.type, dtype=dtype, enabled=dtype is not None)

    step = 0
    batch_size = args.batch_size
    try:
        job = build(args, device)
        job.model.train()
        if args.memory_target_gib is not None:
            batch_size = _fit_batch(job, device, autocast, args.memory_target_gib)
        batches = [job.make_batch(batch_size) for _ in range(2)]  # alternate two fixed batches
        _sync(device)
        startup_s = time.time() - T_START
        t0 = last_print = time.time()
        input_s = args.input_ms / 1000.0
        while True:
            if input_s > 0:
                time.sleep(input_s)  # the data loader; the step's kernels queued before still run
            loss = _step(job, batches[step % 2], autocast)
            step += 1
            now = time.time()
            if args.steps is not None and step >= args.steps:
                break
            if args.seconds is not None and now - t0 >= args.seconds:
                break
            if now - last_print >= PROGRESS_EVERY_S:
                last_print = now
                print(f"{name}: step {step}, {now - t0:.1f} s, loss {loss.item():.4f}", flush=True)
        final_loss = loss.item()  # waits for the device
        _sync(device)
        seconds = time.time() - t0
    except Exception as e:  # noqa: BLE001 (an OOM is reported, anything else re-raised)
        if not is_oom(e):
            raise
        # PyTorch's own message first: aegisd classifies the attempt from this log line.
        print(f"{type(e).__name__}: {e}", file=sys.stderr, flush=True)
        alloc, reserved = _peaks(device)
        print(f"{name}: CUDA out of memory at step {step} with batch size {batch_size} "
              f"({alloc:.0f} MiB allocated at the peak); use a smaller --batch-size or a GPU with more free memory",
              file=sys.stderr, flush=True)
        report(name, args, batch_size, step, 0.0, 0.0, alloc, reserved, status="oom")
        sys.exit(1)

    alloc, reserved = _peaks(device)
    samples = job.samples_per_batch(batch_size) * step
    rate = samples / seconds if seconds > 0 else 0.0
    params = sum(p.numel() for p in job.model.parameters())
    print(f"{name}: {step} steps in {seconds:.1f} s, {rate:.1f} samples/s, loss {final_loss:.4f}; "
          f"peak memory {alloc:.0f} MiB allocated, {reserved:.0f} MiB reserved; startup {startup_s:.1f} s",
          flush=True)
    report(name, args, batch_size, step, seconds, rate, alloc, reserved, startup_s=startup_s, params=params)


def report(name, args, batch_size, steps, seconds, rate, alloc, reserved, status="ok", startup_s=None, params=None):
    """The last line on stdout: one JSON object (the validation reads it from `aegis logs`)."""
    line = {
        "model": name, "status": status, "device": args.device, "batch_size": batch_size,
        "precision": args.precision, "steps": steps, "seconds": round(seconds, 3),
        "samples_per_s": round(rate, 3), "peak_allocated_mib": round(alloc, 1),
        "peak_reserved_mib": round(reserved, 1), "smoke": bool(args.smoke),
        "startup_s": None if startup_s is None else round(startup_s, 3), "params": params,
        "torch": torch.__version__, "input_ms": args.input_ms,
    }
    print(json.dumps(line, sort_keys=True), flush=True)
