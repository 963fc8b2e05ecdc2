#!/usr/bin/env python3
"""Turns the benchmarks' JSON into the Markdown tables of bench/README.md.

Usage: report.py dispatch|handoff|efficiency BENCH.json   (Google Benchmark --benchmark_format=json)
       report.py steps BENCH.json [BENCH.json ...]         (bench_async, bench_elastic: ms a step, ratios
                                                           to the first of each group, run side by side)
       report.py pipe RESULTS.jsonl                       (bench/pytorch_pipe.sh's JSON lines)
Medians are taken where the run has repetitions (aggregate "median"), else the single run."""
import json
import statistics
import sys
from collections import defaultdict


def runs(path):
    data = json.load(open(path))
    out = {}
    for b in data["benchmarks"]:
        if b.get("run_type") == "aggregate" and b.get("aggregate_name") != "median":
            continue
        out[b["run_name"]] = b  # the median aggregate replaces the repetitions it summarises
    return data.get("context", {}), out


def context_line(ctx):
    return (f"{ctx.get('num_cpus', '?')} CPUs at {ctx.get('mhz_per_cpu', '?')} MHz, load average "
            f"{', '.join(str(round(x, 2)) for x in ctx.get('load_avg', []))}, {ctx.get('date', '')}")


def dispatch(path):
    ctx, r = runs(path)
    rows = defaultdict(dict)
    for name, b in r.items():
        _, program, size = name.split("/")
        rows[int(b["tasks"])][program] = b["ns_per_task"] * 1e9  # the counter is in seconds a task
    print(context_line(ctx) + "\n")
    print("| tasks | (a) unrolled | (a) table walk | (b) straight-line | (b') loop | (c) interpreter "
          "| a/b unrolled | a/b walk | c/a unrolled | c/a walk |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for tasks in sorted(rows):
        x = rows[tasks]
        au, aw, b, bl, c = (x.get(k) for k in ("a_unrolled", "a_table_walk", "b_straight_line", "b_loop", "c_interpreter"))
        print(f"| {tasks} | {au:.2f} ns | {aw:.2f} ns | {b:.2f} ns | {bl:.2f} ns | {c:.2f} ns "
              f"| {au / b:.2f} | {aw / b:.2f} | {c / au:.2f} | {c / aw:.2f} |")


def handoff(path):
    ctx, r = runs(path)
    print(context_line(ctx) + "\n")
    print("| program | hand-offs | median | p90 | p99 | max |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name, b in r.items():
        print(f"| {name.split('/')[1]} | {int(b['handoffs'])} | {b['median_ns']:.0f} ns | {b['p90_ns']:.0f} ns "
              f"| {b['p99_ns']:.0f} ns | {b['max_ns'] / 1000:.1f} us |")


def efficiency(path):
    ctx, r = runs(path)
    print(context_line(ctx) + "\n")
    print("| tasks | schedule | p | measured (median step) | simulated | measured / simulated "
          "| mean task F / B | simulated with those | measured / that |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, b in r.items():
        # efficiency/<mode...>/<schedule>/p:<p>/m:<m>[/real_time]; the mode is spin or sleep, and the
        # split-backward runs add their F:I:W ratio (spin/FIW:1:2:1).
        parts = name.split("/")[1:]
        at = next(i for i, x in enumerate(parts) if x.startswith("p:"))
        mode, schedule, p = " ".join(parts[:at - 1]), parts[at - 1], parts[at]
        extra = "| - | - | - |"
        if "measured_over_actual" in b:
            extra = (f"| {b['task_F_us']:.0f} / {b['task_B_us']:.0f} us | {b['simulated_actual_ms']:.2f} ms "
                     f"| {b['measured_over_actual']:.3f} |")
        print(f"| {mode} | {schedule} | {p.split(':')[1]} | {b['measured_ms']:.2f} ms | {b['simulated_ms']:.2f} ms "
              f"| {b['measured_over_simulated']:.3f} {extra}")


def steps(*paths):
    for path in paths:
        ctx, r = runs(path)
        print(context_line(ctx) + "\n")
        print("| benchmark | ms a step (median) | vs the first of its group |")
        print("| --- | --- | --- |")
        base = {}
        for name, b in r.items():
            group = name.split("/")[1]  # spin, sleep
            base.setdefault(group, b["ms_per_step"])
            print(f"| {name} | {b['ms_per_step']:.2f} | {b['ms_per_step'] / base[group]:.3f} |")
        print()
        sent = {name: b["bytes_per_step"] for name, b in r.items() if "bytes_per_step" in b}
        if sent:  # bytes sent between ranks a step, against the first of each group
            print("| benchmark | bytes a step | vs the first of its group |")
            print("| --- | --- | --- |")
            first = {}
            for name, v in sent.items():
                group = name.split("/")[1]
                first.setdefault(group, v)
                print(f"| {name} | {v:.0f} | {v / first[group]:.3f} |")
            print()


def pipe(path):
    """One table per model size (the GPT comparison's "size"; the MLP's lines have none)."""
    sizes = defaultdict(lambda: defaultdict(list))
    for line in open(path):
        line = line.strip()
        if line.startswith("{"):
            j = json.loads(line)
            sizes[j.get("size", "")][(j["runner"], j["threads"])].append(j)
    for size, by in sizes.items():
        if size:
            print(f"Size {size}:\n")
        torch = [statistics.median(x["step_ms_median"] for x in v) for k, v in by.items() if k[0].startswith("torch")]
        torch_best = min(torch) if torch else None  # None: only ctpipe's side ran (no PyTorch here)
        print("| runner | threads | rounds | step time (median of rounds) | vs best torch | loss, first step | loss, last step |")
        print("| --- | --- | --- | --- | --- | --- | --- |")
        for (runner, threads), v in by.items():
            ms = statistics.median(x["step_ms_median"] for x in v)
            ratio = f"{ms / torch_best:.2f}x" if torch_best else "-"
            print(f"| {runner} | {threads} | {len(v)} | {ms:.2f} ms | {ratio} | {v[0]['loss_first']:.7f} "
                  f"| {v[0]['loss_last']:.7f} |")
        print()


if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1] not in ("dispatch", "handoff", "efficiency", "pipe", "steps") or (
            sys.argv[1] != "steps" and len(sys.argv) != 3):
        sys.stderr.write(__doc__)
        sys.exit(2)
    globals()[sys.argv[1]](*sys.argv[2:])
