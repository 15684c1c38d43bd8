#!/usr/bin/env python3
"""A BERT-style encoder (post-norm Transformer, GELU) trained on masked-language-model loss
over synthetic token ids. Default size: BERT-base (12 layers, 768 wide, 12 heads).

  bert.py --batch-size 32 --seq-len 128 --seconds 30
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True  # no __pycache__ left in the repository
import common  # noqa: E402  (starts the clock before torch is imported)

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

MASK_FRACTION = 0.15


class Encoder(nn.Module):
    def __init__(self, vocab, width, layers, heads, seq_len):
        super().__init__()
        self.tokens = nn.Embedding(vocab, width)
        self.positions = nn.Embedding(seq_len, width)
        self.segments = nn.Embedding(2, width)
        self.norm = nn.LayerNorm(width)
        layer = nn.TransformerEncoderLayer(width, heads, 4 * width, dropout=0.1, activation="gelu",
                                           batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers)
        self.head = nn.Sequential(nn.Linear(width, width), nn.GELU())
        self.head_norm = nn.LayerNorm(width)
        self.bias = nn.Parameter(torch.zeros(vocab))

    def forward(self, ids, segments):
        pos = torch.arange(ids.shape[1], device=ids.device)
        h = self.norm(self.tokens(ids) + self.positions(pos) + self.segments(segments))
        h = self.encoder(h)
        # float(): CPU autocast (PyTorch 1.13) does not lift layer_norm to fp32 as CUDA's does
        h = self.head_norm(self.head(h).float())
        return F.linear(h, self.tokens.weight, self.bias)  # tied output embedding


def build(args, device):
    if args.smoke:
        vocab, width, layers, heads, seq = 1000, 64, 2, 2, 16
    else:
        vocab, width, layers, heads, seq = 30522, args.hidden, args.layers, args.hidden // 64, args.seq_len
    model = Encoder(vocab, width, layers, heads, seq).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01)

    def make_batch(bs):
        ids = torch.randint(0, vocab, (bs, seq), device=device)
        segments = (torch.arange(seq, device=device) >= seq // 2).long().expand(bs, seq)
        masked = torch.rand(bs, seq, device=device) < MASK_FRACTION
        labels = torch.where(masked, ids, torch.full_like(ids, -100))
        return ids.masked_fill(masked, 103), segments, labels  # 103: BERT's [MASK] id

    def loss(m, ids, segments, labels):
        logits = m(ids, segments)
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), labels.view(-1), ignore_index=-100)

    return common.Job(model, opt, make_batch, loss)


def main():
    p = common.parser(__doc__.splitlines()[0], batch_size=32)
    p.add_argument("--seq-len", type=int, default=128, help="tokens per sample (default 128)")
    p.add_argument("--layers", type=int, default=12, help="encoder layers (default 12)")
    p.add_argument("--hidden", type=int, default=768, help="width, a multiple of 64 (default 768)")
    args = common.parse(p)
    if args.hidden % 64:
        p.error("--hidden must be a multiple of 64")
    common.run("bert", args, build)


if __name__ == "__main__":
    main()
