#!/usr/bin/python3
"""PyTorch's side of the GPU GPT comparison (scripts/gpu.sh's "GPT against PyTorch" section; ctpipe's
side is gpt_gpu): the GPT of bench/pytorch_gpt.py (the same blocks: token and position embeddings,
pre-norm blocks of causal attention and a tanh-GELU MLP, a head tied to the token table; the
cross-entropy summed over the step's tokens and divided by their number; AdamW after clipping at a
global norm of 1) at the shape ctpipe's run uses, one whole step (8 microbatches of `batch`
sequences) at a time, and timed. With --from DUMP (gpt_gpu --dump, examples/gpt/dump.hpp) it starts
from ctpipe's parameters and trains on ctpipe's tokens, so that the two runs' losses compare;
without, from PyTorch's own initialisation on random token ids.

Modes: eager, compile (torch.compile), reduce-overhead (torch.compile capturing CUDA graphs).
Precision: fp32 (TF32 off for products and convolutions) or bf16 (autocast). --sdpa uses
torch.nn.functional.scaled_dot_product_attention (fused attention) instead of the written-out
softmax, and the line names the backend PyTorch picked.

Prints one JSON line: the first step's time (compilation included), the median of the others,
tokens per second, the host's time to issue a step, the kernels one step launches, and the first
and last steps' losses.

Without a GPU it exits 77, unless --device cpu: then it runs two eager steps (so the script is
exercised wherever python3-torch is installed).

Usage: pytorch_gpt_gpu.py --size tiny|gpt2 [--from DUMP] [--mode eager|compile|reduce-overhead]
                          [--dtype fp32|bf16] [--steps N] [--lr LR] [--weight-decay WD] [--sdpa]
                          [--device cuda|cpu]
"""
import argparse
import json
import os
import statistics
import sys
import time

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    print("pytorch_gpt_gpu.py: no PyTorch here (python3 cannot import torch): skipped (exit 77)")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pytorch_gpt import Block, Embed, Head, load  # noqa: E402  (the CPU comparison's model and reader)

# The shapes of ctpipe's runs: the GPT example's (examples/gpt/gpt.hpp's defaults) and GPT-2 small's
# (12 blocks of width 768, 12 heads, context 512) over the example's 96 characters.
SIZES = {
    "tiny": dict(vocab=96, tokens=64, batch=4, width=64, heads=4, blocks=2),
    "gpt2": dict(vocab=96, tokens=512, batch=1, width=768, heads=12, blocks=12),
}
MICROBATCHES = 8


class SdpaBlock(Block):
    """The same block, its attention fused (scaled_dot_product_attention, causal)."""

    def forward(self, x):
        b, t, w = x.shape
        hw = w // self.heads
        q, k, v = self.qkv(self.ln1(x)).split(w, dim=2)
        q, k, v = (z.view(b, t, self.heads, hw).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, w)
        x = x + self.proj(y)
        return x + self.fc2(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", choices=sorted(SIZES), required=True)
    ap.add_argument("--mode", choices=("eager", "compile", "reduce-overhead"), default="eager")
    ap.add_argument("--dtype", choices=("fp32", "bf16"), default="fp32")
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--sdpa", action="store_true")
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    ap.add_argument("--from", dest="dump", help="start from gpt_gpu --dump's parameters and tokens")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    args = ap.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        print("pytorch_gpt_gpu.py: no CUDA device here: skipped (exit 77)")
        return 77
    if args.device == "cpu":
        args.mode, args.steps = "eager", 2
    dev = torch.device(args.device)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    s = SIZES[args.size]
    sequences = MICROBATCHES * s["batch"]
    torch.manual_seed(1)
    if args.dump:
        embed, blocks, ln_f, ids, targets, micro, vocab = load(args.dump)
        shape = (vocab, embed.wpe.shape[0], ids.shape[1] // micro, embed.wte.shape[1], blocks[0].heads, len(blocks))
        if shape != tuple(s[k] for k in ("vocab", "tokens", "batch", "width", "heads", "blocks")) or micro != MICROBATCHES:
            print(f"pytorch_gpt_gpu.py: --from {args.dump}: its GPT is not --size {args.size}'s", file=sys.stderr)
            return 2
        if ids.shape[0] < args.steps:
            print(f"pytorch_gpt_gpu.py: --from {args.dump}: {ids.shape[0]} steps of tokens, not {args.steps}",
                  file=sys.stderr)
            return 2
        ids, targets = ids[: args.steps].to(dev), targets[: args.steps].to(dev)
        if args.sdpa:
            for b in blocks:
                b.__class__ = SdpaBlock  # (the same parameters, its attention fused)
        head = Head(s["width"], embed.wte)
        with torch.no_grad():
            head.ln.weight.copy_(ln_f[0])
            head.ln.bias.copy_(ln_f[1])
    else:
        embed = Embed(s["vocab"], s["tokens"], s["width"])
        with torch.no_grad():
            embed.wte.normal_(0.0, 0.02)
            embed.wpe.normal_(0.0, 0.02)
        block = SdpaBlock if args.sdpa else Block
        blocks = [block(s["width"], s["heads"]) for _ in range(s["blocks"])]
        head = Head(s["width"], embed.wte)
        ids = torch.randint(0, s["vocab"], (args.steps, sequences, s["tokens"]), device=dev)
        targets = torch.randint(0, s["vocab"], (args.steps, sequences, s["tokens"]), device=dev)
    model = torch.nn.Sequential(embed, *blocks, head).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
    autocast = torch.autocast(args.device, dtype=torch.bfloat16, enabled=args.dtype == "bf16")

    def step(x, y):
        opt.zero_grad(set_to_none=False)
        with autocast:
            logits = model(x)
            loss = F.cross_entropy(logits.reshape(-1, s["vocab"]).float(), y.reshape(-1), reduction="sum") / y.numel()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss

    if args.mode != "eager":
        step = torch.compile(step, mode="reduce-overhead" if args.mode == "reduce-overhead" else None)
    sync = torch.cuda.synchronize if args.device == "cuda" else (lambda: None)
    times, host, losses = [], [], []
    for k in range(args.steps):
        sync()
        start = time.perf_counter()
        loss = step(ids[k], targets[k])
        issued = time.perf_counter()
        sync()
        times.append((time.perf_counter() - start) * 1000.0)
        host.append((issued - start) * 1000.0)
        if k == 0:
            losses.append(float(loss))
    kernels = None
    if args.device == "cuda":
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            step(ids[0], targets[0])
            sync()
        kernels = sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)
    backend = None
    if args.sdpa and args.device == "cuda":
        backend = ("flash" if torch.backends.cuda.flash_sdp_enabled() else
                   "memory-efficient" if torch.backends.cuda.mem_efficient_sdp_enabled() else "math")
    rest = times[1:] or times
    tokens = sequences * s["tokens"]
    print(json.dumps({"runner": f"torch {args.mode}", "size": args.size, "dtype": args.dtype, "sdpa": args.sdpa,
                      "attention_backend": backend, "steps": args.steps,
                      "first_step_ms": round(times[0], 3), "step_ms_median": round(statistics.median(rest), 4),
                      "tokens_per_s": round(tokens / (statistics.median(rest) / 1000.0)),
                      "host_ms_median": round(statistics.median(host[1:] or host), 4), "kernels_per_step": kernels,
                      "from": "ctpipe" if args.dump else "torch", "loss_first": round(losses[0], 6),
                      "loss_last": round(float(loss), 6), "torch": torch.__version__,
                      "device": torch.cuda.get_device_name() if args.device == "cuda" else "cpu"}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
