#!/usr/bin/env python3
"""ResNet-50 (torchvision) image classification on synthetic ImageNet-sized images.

  resnet50.py --batch-size 128 --seconds 30 --precision bf16
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True  # no __pycache__ left in the repository
import common  # noqa: E402  (starts the clock before torch is imported)

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402


def build(args, device):
    try:
        from torchvision.models.resnet import Bottleneck, ResNet
    except ImportError:
        sys.exit("resnet50: torchvision is not installed (Debian: python3-torchvision)")
    if args.smoke:
        # One bottleneck per stage at a quarter of the width: the same code path, tiny.
        model, classes, size = ResNet(Bottleneck, [1, 1, 1, 1], num_classes=10, width_per_group=16), 10, 32
    else:
        model, classes, size = ResNet(Bottleneck, [3, 4, 6, 3], num_classes=1000), 1000, args.image_size
    fmt = torch.channels_last if device.type == "cuda" else torch.contiguous_format
    model = model.to(device, memory_format=fmt)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)

    def make_batch(bs):
        x = torch.randn(bs, 3, size, size, device=device).contiguous(memory_format=fmt)
        return x, torch.randint(0, classes, (bs,), device=device)

    return common.Job(model, opt, make_batch, lambda m, x, y: F.cross_entropy(m(x), y))


def main():
    p = common.parser(__doc__.splitlines()[0], batch_size=64)
    p.add_argument("--image-size", type=int, default=224, help="image side in pixels (default 224)")
    args = common.parse(p)
    common.run("resnet50", args, build)


if __name__ == "__main__":
    main()
