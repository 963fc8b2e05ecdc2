#!/usr/bin/python3
"""PyTorch's side of the GPT comparison (bench/pytorch_gpt.sh): builds the GPT that bench_gpt_pipe
dumped (same parameters, same token ids per step), trains it N steps sequentially (the whole batch
at once) or with torch.distributed.pipeline.sync.Pipe (GPipe, 2 stages, 8 chunks), on CPU, and
prints one JSON line like bench_gpt_pipe's.

The model is written from its definition: token and position embeddings; per block, layer norm,
one linear layer to q, k and v, causal softmax attention per head, a linear projection, a residual
add, layer norm, linear to 4 W, GELU (tanh form), linear back, a residual add; a final layer norm,
and logits against the token table (tied). Loss: cross-entropy summed over the step's tokens,
divided by their number. AdamW (lr 1e-3, weight decay 0.01) after clipping at a global norm of 1.

Usage: pytorch_gpt.py DUMP --runner seq|pipe [--steps N] [--threads T]
"""
import argparse
import json
import math
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F


class Block(torch.nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = torch.nn.LayerNorm(width, eps=1e-5)
        self.qkv = torch.nn.Linear(width, 3 * width)
        self.proj = torch.nn.Linear(width, width)
        self.ln2 = torch.nn.LayerNorm(width, eps=1e-5)
        self.fc = torch.nn.Linear(width, 4 * width)
        self.fc2 = torch.nn.Linear(4 * width, width)

    def forward(self, x):
        b, t, w = x.shape
        hw = w // self.heads
        q, k, v = self.qkv(self.ln1(x)).split(w, dim=2)
        q, k, v = (z.view(b, t, self.heads, hw).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(hw)
        mask = torch.ones(t, t, dtype=torch.bool).tril()
        att = F.softmax(att.masked_fill(~mask, float("-inf")), dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, w)
        x = x + self.proj(y)
        return x + self.fc2(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class Embed(torch.nn.Module):
    def __init__(self, vocab, tokens, width):
        super().__init__()
        self.wte = torch.nn.Parameter(torch.zeros(vocab, width))
        self.wpe = torch.nn.Parameter(torch.zeros(tokens, width))

    def forward(self, ids):
        return self.wte[ids] + self.wpe[: ids.shape[1]]


class Head(torch.nn.Module):
    """The final layer norm and the logits against `table` (the embedding's, or a copy of it)."""

    def __init__(self, width, table):
        super().__init__()
        self.ln = torch.nn.LayerNorm(width, eps=1e-5)
        self.table = table

    def forward(self, x):
        return self.ln(x) @ self.table.t()


def load(path):
    """The comparison's starting point (examples/gpt/dump.hpp), read with torch alone."""
    raw = bytearray(open(path, "rb").read())
    vocab, tokens, batch, width, heads, blocks, micro, steps = torch.frombuffer(raw, dtype=torch.int32, count=8).tolist()
    at = 32

    def take(n):
        nonlocal at
        a = torch.frombuffer(raw, dtype=torch.float32, count=n, offset=at).clone()
        at += 4 * n
        return a

    embed = Embed(vocab, tokens, width)
    with torch.no_grad():
        embed.wte.copy_(take(vocab * width).view(vocab, width))
        embed.wpe.copy_(take(tokens * width).view(tokens, width))
        blks = []
        for _ in range(blocks):
            blk = Block(width, heads)
            for mod in (blk.ln1, blk.qkv, blk.proj, blk.ln2, blk.fc, blk.fc2):
                mod.weight.copy_(take(mod.weight.numel()).view_as(mod.weight))
                mod.bias.copy_(take(mod.bias.numel()))
            blks.append(blk)
        ln_f = (take(width), take(width))
    n = steps * micro * tokens * batch

    # [step][microbatch][token][sequence] -> [step][microbatch x sequence][token]
    def to_torch(offset):
        a = torch.frombuffer(raw, dtype=torch.int32, count=n, offset=offset).view(steps, micro, tokens, batch)
        return a.permute(0, 1, 3, 2).reshape(steps, micro * batch, tokens).to(torch.int64)

    return embed, blks, ln_f, to_torch(at), to_torch(at + 4 * n), micro, vocab


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dump")
    ap.add_argument("--runner", choices=("seq", "pipe"), required=True)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--size", default="")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    embed, blks, ln_f, ids, targets, micro, vocab = load(args.dump)
    if args.runner == "seq":
        head = Head(embed.wte.shape[1], embed.wte)  # tied: the same tensor
        model = torch.nn.Sequential(embed, *blks, head)
        forward = model
        clipped = list(model.parameters())
        tie = lambda: None
        name = "torch, whole batch"
    else:
        import torch.distributed.rpc as rpc
        from torch.distributed.pipeline.sync import Pipe

        # Pipe refuses a parameter shared by two partitions: the head keeps a copy of the table, and
        # its gradient is added to the embedding's before the update (ctpipe's rule for a tied head).
        head = Head(embed.wte.shape[1], torch.nn.Parameter(embed.wte.detach().clone()))
        half = len(blks) // 2
        stages = torch.nn.Sequential(torch.nn.Sequential(embed, *blks[:half]), torch.nn.Sequential(*blks[half:], head))
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29534")
        rpc.init_rpc("ctpipe_gpt_bench", rank=0, world_size=1)
        pipe = Pipe(stages, chunks=micro)
        forward = lambda x: pipe(x).local_value()
        model = stages
        clipped = [p for p in model.parameters() if p is not head.table]

        def tie():
            embed.wte.grad += head.table.grad
            head.table.grad = None

        name = f"torch Pipe (GPipe, 2 stages) chunks={micro}"
    with torch.no_grad():
        head.ln.weight.copy_(ln_f[0])
        head.ln.bias.copy_(ln_f[1])
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    times, losses = [], []
    for s in range(args.steps):
        start = time.perf_counter()
        opt.zero_grad()
        logits = forward(ids[s])
        loss = F.cross_entropy(logits.reshape(-1, vocab), targets[s].reshape(-1), reduction="sum") / targets[s].numel()
        loss.backward()
        tie()
        torch.nn.utils.clip_grad_norm_(clipped, 1.0)
        if args.runner == "pipe":
            head.table.grad = embed.wte.grad.clone()  # the copy takes the same (clipped) gradient
        opt.step()
        times.append((time.perf_counter() - start) * 1000.0)
        losses.append(loss.item())
    if args.runner == "pipe":
        rpc.shutdown()
    print(json.dumps({"runner": name, "size": args.size, "threads": args.threads, "steps": args.steps,
                      "step_ms_median": round(statistics.median(times), 4), "step_ms_min": round(min(times), 4),
                      "loss_first": round(losses[0], 7), "loss_last": round(losses[-1], 7),
                      "torch": torch.__version__}))


if __name__ == "__main__":
    sys.exit(main())
