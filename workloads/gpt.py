#!/usr/bin/env python3
"""A GPT/Llama-style decoder (pre-norm RMSNorm, rotary positions, SwiGLU, causal attention)
trained on next-token loss over synthetic token ids; bf16 autocast by default.
Default size: about 0.94 billion parameters (16 layers, 2048 wide, 16 heads, 32000 tokens).

  gpt.py --batch-size 8 --seq-len 1024 --seconds 30
  gpt.py --memory-target-gib 90 --seconds 30      # a batch that fills about 90 GiB
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True  # no __pycache__ left in the repository
import common  # noqa: E402  (starts the clock before torch is imported)

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402


class RMSNorm(nn.Module):
    def __init__(self, width, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(width))

    def forward(self, x):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)).type_as(x) * self.weight


def rotary(seq_len, head_dim, device):
    inv = 1.0 / (10000 ** (torch.arange(0, head_dim, 2, device=device).float() / head_dim))
    angles = torch.outer(torch.arange(seq_len, device=device).float(), inv)
    return angles.cos(), angles.sin()


def apply_rotary(x, cos, sin):
    # x: (batch, heads, seq, head_dim); rotate pairs (even, odd)
    # type_as: the fp32 tables would otherwise lift bf16 activations to fp32 (twice the memory)
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2).type_as(x)


def causal_attention(q, k, v):
    if hasattr(F, "scaled_dot_product_attention"):  # PyTorch 2: fused (flash) kernels
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    s = q.shape[-2]
    scores = (q @ k.transpose(-2, -1)) / (q.shape[-1] ** 0.5)
    mask = torch.ones(s, s, dtype=torch.bool, device=q.device).triu(1)
    return scores.masked_fill(mask, float("-inf")).softmax(-1) @ v


class Block(nn.Module):
    def __init__(self, width, heads, ffn):
        super().__init__()
        self.heads = heads
        self.attn_norm, self.ffn_norm = RMSNorm(width), RMSNorm(width)
        self.qkv = nn.Linear(width, 3 * width, bias=False)
        self.out = nn.Linear(width, width, bias=False)
        self.gate_up = nn.Linear(width, 2 * ffn, bias=False)
        self.down = nn.Linear(ffn, width, bias=False)

    def forward(self, x, cos, sin):
        b, s, w = x.shape
        q, k, v = self.qkv(self.attn_norm(x)).view(b, s, 3, self.heads, w // self.heads).permute(2, 0, 3, 1, 4)
        q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
        x = x + self.out(causal_attention(q, k, v).transpose(1, 2).reshape(b, s, w))
        gate, up = self.gate_up(self.ffn_norm(x)).chunk(2, dim=-1)
        return x + self.down(F.silu(gate) * up)


class Decoder(nn.Module):
    def __init__(self, vocab, width, layers, heads, ffn, seq_len):
        super().__init__()
        self.tokens = nn.Embedding(vocab, width)
        self.blocks = nn.ModuleList(Block(width, heads, ffn) for _ in range(layers))
        self.norm = RMSNorm(width)
        self.lm_head = nn.Linear(width, vocab, bias=False)
        cos, sin = rotary(seq_len, width // heads, self.tokens.weight.device)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)

    def forward(self, ids):
        s = ids.shape[1]
        x = self.tokens(ids)
        for blk in self.blocks:
            x = blk(x, self.cos[:s], self.sin[:s])
        return self.lm_head(self.norm(x))


def build(args, device):
    if args.smoke:
        vocab, width, layers, heads, seq = 1000, 64, 2, 4, 16
    else:
        vocab, width, layers, heads, seq = 32000, args.hidden, args.layers, args.hidden // 128, args.seq_len
    ffn = 64 * ((8 * width // 3 + 63) // 64)  # Llama's SwiGLU width, rounded to 64
    model = Decoder(vocab, width, layers, heads, ffn, seq).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1, betas=(0.9, 0.95))

    def make_batch(bs):
        return (torch.randint(0, vocab, (bs, seq + 1), device=device),)

    def loss(m, ids):
        logits = m(ids[:, :-1])
        return F.cross_entropy(logits.float().reshape(-1, vocab), ids[:, 1:].reshape(-1))

    return common.Job(model, opt, make_batch, loss)


def main():
    p = common.parser(__doc__.splitlines()[0], batch_size=8, precision="bf16")
    p.add_argument("--seq-len", type=int, default=1024, help="tokens per sample (default 1024)")
    p.add_argument("--layers", type=int, default=16, help="decoder blocks (default 16)")
    p.add_argument("--hidden", type=int, default=2048, help="width, a multiple of 128 (default 2048)")
    args = common.parse(p)
    if args.hidden % 128:
        p.error("--hidden must be a multiple of 128")
    common.run("gpt", args, build)


if __name__ == "__main__":
    main()
