#!/usr/bin/python3
"""PyTorch's side of the comparison (bench/pytorch_pipe.sh): trains the MLP that bench_pipe_mlp
dumped (same parameters, data and stage split) with torch.distributed.pipeline.sync.Pipe (GPipe) on
CPU, for N steps, and prints one JSON line like bench_pipe_mlp's.

Usage: pytorch_pipe.py DUMP [--steps N] [--threads T] [--rate R]
"""
import argparse
import json
import os
import statistics
import sys
import time

import numpy as np
import torch
import torch.distributed.rpc as rpc
from torch.distributed.pipeline.sync import Pipe


def load(path):
    raw = open(path, "rb").read()
    header = np.frombuffer(raw, dtype=np.int32, count=10)
    layers, stages = int(header[0]), int(header[1])
    first = [int(x) for x in header[2:2 + stages + 1]]
    micro, features, hidden, classes, chunks = (int(x) for x in header[2 + stages + 1:2 + stages + 6])
    offset = 4 * (2 + stages + 6)
    sizes = [features] + [hidden] * (layers - 1) + [classes]
    params = []
    for i in range(layers):
        n = sizes[i + 1] * sizes[i] + sizes[i + 1]
        p = np.frombuffer(raw, dtype=np.float32, count=n, offset=offset)
        offset += 4 * n
        params.append((p[:sizes[i + 1] * sizes[i]].reshape(sizes[i + 1], sizes[i]), p[sizes[i + 1] * sizes[i]:]))
    inputs = np.frombuffer(raw, dtype=np.float32, count=chunks * micro * features, offset=offset)
    offset += 4 * inputs.size
    targets = np.frombuffer(raw, dtype=np.int32, count=chunks * micro, offset=offset)
    return first, params, inputs.reshape(chunks * micro, features), targets.astype(np.int64), chunks


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dump")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rate", type=float, default=0.05)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    first, params, x, t, chunks = load(args.dump)
    mods = []
    for i, (w, b) in enumerate(params):
        lin = torch.nn.Linear(w.shape[1], w.shape[0])
        with torch.no_grad():
            lin.weight.copy_(torch.from_numpy(w.copy()))
            lin.bias.copy_(torch.from_numpy(b.copy()))
        mods.append(lin)
        if i + 1 < len(params):
            mods.append(torch.nn.ReLU())
    # The same stage split as ctpipe's partition: layers [first[s], first[s+1]) in stage s.
    partitions = []
    for s in range(len(first) - 1):
        layer_mods = []
        for i in range(first[s], first[s + 1]):
            layer_mods.append(mods[2 * i])
            if i + 1 < len(params):
                layer_mods.append(mods[2 * i + 1])
        partitions.append(torch.nn.Sequential(*layer_mods))
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29533")
    rpc.init_rpc("ctpipe_bench", rank=0, world_size=1)
    model = Pipe(torch.nn.Sequential(*partitions), chunks=chunks)
    opt = torch.optim.SGD(model.parameters(), lr=args.rate)
    xs, ts = torch.from_numpy(x.copy()), torch.from_numpy(t.copy())
    times, losses = [], []
    for _ in range(args.steps):
        start = time.perf_counter()
        opt.zero_grad()
        out = model(xs).local_value()
        loss = torch.nn.functional.cross_entropy(out, ts)
        loss.backward()
        opt.step()
        times.append((time.perf_counter() - start) * 1000.0)
        losses.append(loss.item())
    rpc.shutdown()
    print(json.dumps({"runner": f"torch Pipe (GPipe) chunks={chunks}", "threads": args.threads, "steps": args.steps,
                      "step_ms_median": round(statistics.median(times), 4), "step_ms_min": round(min(times), 4),
                      "loss_first": round(losses[0], 6), "loss_last": round(losses[-1], 6),
                      "torch": torch.__version__}))


if __name__ == "__main__":
    sys.exit(main())
