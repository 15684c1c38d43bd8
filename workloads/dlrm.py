#!/usr/bin/env python3
"""A DLRM-style recommender (embedding bags for sparse features, MLPs for dense ones, pairwise
dot interaction) on synthetic Criteo-shaped click data: 13 dense features, 26 sparse ones.

  dlrm.py --batch-size 8192 --seconds 20
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True  # no __pycache__ left in the repository
import common  # noqa: E402  (starts the clock before torch is imported)

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

DENSE = 13


def mlp(sizes, last_plain=False):
    layers = []
    for i, (a, b) in enumerate(zip(sizes, sizes[1:])):
        layers.append(nn.Linear(a, b))
        if not (last_plain and i == len(sizes) - 2):
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class DLRM(nn.Module):
    def __init__(self, tables, rows, dim):
        super().__init__()
        # Sparse gradients: only the rows a batch touched are updated, as DLRM does.
        self.embeddings = nn.ModuleList(nn.EmbeddingBag(rows, dim, mode="sum", sparse=True) for _ in range(tables))
        self.bottom = mlp([DENSE, 512, 256, dim])
        pairs = (tables + 1) * tables // 2
        self.top = mlp([dim + pairs, 1024, 1024, 512, 256, 1], last_plain=True)

    def forward(self, dense, sparse):
        x = self.bottom(dense)
        feats = torch.stack([x] + [e(sparse[:, i:i + 1]) for i, e in enumerate(self.embeddings)], dim=1)
        z = feats @ feats.transpose(1, 2)  # dot interaction between every pair of features
        i, j = torch.tril_indices(feats.shape[1], feats.shape[1], offset=-1, device=dense.device)
        return self.top(torch.cat([x, z[:, i, j]], dim=1)).squeeze(1)


def build(args, device):
    tables, rows, dim = (4, 1000, 16) if args.smoke else (26, args.rows, 128)
    model = DLRM(tables, rows, dim).to(device)
    dense_params = [p for n, p in model.named_parameters() if not n.startswith("embeddings")]
    sparse_params = [p for n, p in model.named_parameters() if n.startswith("embeddings")]

    class Both:  # one optimizer for the sparse tables, one for the MLPs
        def __init__(self):
            self.opts = [torch.optim.SGD(sparse_params, lr=0.01), torch.optim.Adam(dense_params, lr=1e-3)]

        def zero_grad(self, set_to_none=True):
            for o in self.opts:
                o.zero_grad(set_to_none=set_to_none)

        def step(self):
            for o in self.opts:
                o.step()

    def make_batch(bs):
        dense = torch.rand(bs, DENSE, device=device)
        # Skewed ids (a few hot rows), as in click logs.
        sparse = (torch.rand(bs, tables, device=device) ** 3 * rows).long().clamp_(max=rows - 1)
        return dense, sparse, (torch.rand(bs, device=device) < 0.25).float()

    def loss(m, dense, sparse, clicks):
        return F.binary_cross_entropy_with_logits(m(dense, sparse).float(), clicks)

    return common.Job(model, Both(), make_batch, loss)


def main():
    p = common.parser(__doc__.splitlines()[0], batch_size=8192)
    p.add_argument("--rows", type=int, default=200000, help="rows per embedding table (default 200000)")
    args = common.parse(p)
    common.run("dlrm", args, build)


if __name__ == "__main__":
    main()
