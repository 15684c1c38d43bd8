#!/usr/bin/env python3
"""A small CNN (VGG-like, batch norm) on synthetic CIFAR-sized 32x32 images, 10 classes.

  cifar_cnn.py --batch-size 256 --seconds 20
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True  # no __pycache__ left in the repository
import common  # noqa: E402  (starts the clock before torch is imported)

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402


def block(cin, cout):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True),
                         nn.Conv2d(cout, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True),
                         nn.MaxPool2d(2))


def build(args, device):
    w = 8 if args.smoke else args.width
    model = nn.Sequential(block(3, w), block(w, 2 * w), block(2 * w, 4 * w),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4 * w, 10)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)

    def make_batch(bs):
        return torch.randn(bs, 3, 32, 32, device=device), torch.randint(0, 10, (bs,), device=device)

    return common.Job(model, opt, make_batch, lambda m, x, y: F.cross_entropy(m(x), y))


def main():
    p = common.parser(__doc__.splitlines()[0], batch_size=128)
    p.add_argument("--width", type=int, default=64, help="channels of the first block (default 64)")
    args = common.parse(p)
    common.run("cifar_cnn", args, build)


if __name__ == "__main__":
    main()
