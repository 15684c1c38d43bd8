#!/usr/bin/python3
"""Definitions of catalog models that torchvision 0.14 lacks, for scripts/workload_specs.py:
Xception (Chollet 2017, as Cadene's pretrained-models port: 22,855,952 parameters, the
catalog's summary) and DLRM (Facebook's Criteo Kaggle configuration, embedding tables sized
to the catalog's 909,313 parameters). They must run on fake tensors (CPU, no data)."""
import os
import sys

import torch
import torch.nn as nn

sys.path.insert(1, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "workloads"))
sys.dont_write_bytecode = True
from dlrm import mlp  # noqa: E402  (workloads/dlrm.py's MLP builder: Linear + ReLU, last one plain)


class SeparableConv2d(nn.Module):
    def __init__(self, cin, cout, kernel=1, stride=1, padding=0):
        super().__init__()
        self.depthwise = nn.Conv2d(cin, cin, kernel, stride, padding, groups=cin, bias=False)
        self.pointwise = nn.Conv2d(cin, cout, 1, bias=False)

    def forward(self, x):
        return self.pointwise(self.depthwise(x))


class XceptionBlock(nn.Module):
    def __init__(self, cin, cout, reps, stride=1, start_with_relu=True, grow_first=True):
        super().__init__()
        self.skip = None
        if cout != cin or stride != 1:
            self.skip = nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=False), nn.BatchNorm2d(cout))
        layers, width = [], cin
        if grow_first:
            layers += [nn.ReLU(inplace=True), SeparableConv2d(cin, cout, 3, 1, 1), nn.BatchNorm2d(cout)]
            width = cout
        for _ in range(reps - 1):
            layers += [nn.ReLU(inplace=True), SeparableConv2d(width, width, 3, 1, 1), nn.BatchNorm2d(width)]
        if not grow_first:
            layers += [nn.ReLU(inplace=True), SeparableConv2d(cin, cout, 3, 1, 1), nn.BatchNorm2d(cout)]
        if start_with_relu:
            layers[0] = nn.ReLU(inplace=False)  # the block's input is also the skip's
        else:
            layers = layers[1:]
        if stride != 1:
            layers.append(nn.MaxPool2d(3, stride, 1))
        self.rep = nn.Sequential(*layers)

    def forward(self, x):
        out = self.rep(x)
        out += self.skip(x) if self.skip is not None else x
        return out


def xception(num_classes=1000):
    """299x299 input."""
    blocks = [XceptionBlock(64, 128, 2, 2, start_with_relu=False), XceptionBlock(128, 256, 2, 2),
              XceptionBlock(256, 728, 2, 2)] + [XceptionBlock(728, 728, 3) for _ in range(8)] + \
             [XceptionBlock(728, 1024, 2, 2, grow_first=False)]
    return nn.Sequential(
        nn.Conv2d(3, 32, 3, 2, 0, bias=False), nn.BatchNorm2d(32), nn.ReLU(inplace=True),
        nn.Conv2d(32, 64, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True), *blocks,
        SeparableConv2d(1024, 1536, 3, 1, 1), nn.BatchNorm2d(1536), nn.ReLU(inplace=True),
        SeparableConv2d(1536, 2048, 3, 1, 1), nn.BatchNorm2d(2048), nn.ReLU(inplace=True),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(2048, num_classes))


DLRM_DENSE, DLRM_TABLES, DLRM_DIM = 13, 26, 16
# The catalog records 909,313 parameters; the MLPs below hold 475,985 of them, leaving
# 433,328 = 16 x 27,083 embedding rows, spread as evenly as they go over the 26 tables
# (the row counts do not change what a sample saves).
DLRM_ROWS = 27083


class DLRM(nn.Module):
    """Bottom MLP 13-512-256-64-16, 26 embedding bags of width 16, dot interaction of the
    27 vectors (351 pairs), top MLP 367-512-256-1 (Facebook DLRM's Criteo Kaggle flags).
    Input: one float tensor per sample, 13 dense features then 26 category ids."""

    def __init__(self):
        super().__init__()
        per, extra = divmod(DLRM_ROWS, DLRM_TABLES)
        self.embeddings = nn.ModuleList(nn.EmbeddingBag(per + (1 if i < extra else 0), DLRM_DIM, mode="sum")
                                        for i in range(DLRM_TABLES))
        self.bottom = mlp([DLRM_DENSE, 512, 256, 64, DLRM_DIM])
        pairs = (DLRM_TABLES + 1) * DLRM_TABLES // 2
        self.top = mlp([DLRM_DIM + pairs, 512, 256, 1], last_plain=True)

    def forward(self, x):
        dense, ids = x[:, :DLRM_DENSE], x[:, DLRM_DENSE:].long()
        bottom = self.bottom(dense)
        feats = torch.stack([bottom] + [e(ids[:, i:i + 1]) for i, e in enumerate(self.embeddings)], dim=1)
        z = feats @ feats.transpose(1, 2)
        i, j = torch.tril_indices(feats.shape[1], feats.shape[1], offset=-1)
        return self.top(torch.cat([bottom, z[:, i, j]], dim=1))
