#!/usr/bin/env python3
"""How close synthesis comes to the best order: the Zero Bubble paper's ILP (its appendix G), solved
by CBC, against `ctpipe synth` (the heuristic's own order, and the better-of), for one stage a rank.

The ILP, in ctpipe's memory unit (+1 activation at a microbatch's F, -1 at its W, 0 at its I):
  - E[s, j, k]: when op k (F, I or W) of microbatch j ends on stage s; it takes T[s][k];
  - F of stage s starts after F of stage s-1 ends plus comm, I of s after I of s+1 plus comm (the
    last stage's I after its own F), W after its own I;
  - one op at a time on a stage: for each pair of ops whose order is not already implied, a binary
    chooses which runs first (big-M disjunction);
  - ops of one kind run in microbatch order on a stage (as the heuristic and every ctpipe schedule
    run them; it also breaks the symmetry of identical microbatches);
  - memory: when microbatch j's F starts, j + 1 - (the W already run) <= limit;
  - minimise the largest span, max over stages of E[last W] - E[first F] + T_F (the paper's (3),
    which is what synthesis reports); the span is at least the stage's work (a cut that tightens
    the relaxation's bound, nothing more).
Each case gets a time limit; where CBC stops on it, the gap is reported against its best bound.

Usage: python3 bench/synthesis_ilp.py CTPIPE_BINARY [--seconds 30]
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

KINDS = ("F", "I", "W")


def heuristic_spans(ctpipe, p, m, stage_costs, comm, limit):
    """(the heuristic's own span, the better-of span and its source) from `ctpipe synth`."""
    stages = "/".join(",".join(str(x) for x in s) for s in stage_costs)
    out = subprocess.run([ctpipe, "synth", "-p", str(p), "-m", str(m), "--memory", str(limit), "--cost",
                          "F=1,I=1,W=1,comm=%d" % comm, "--stage-costs", stages],
                         check=False, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit("ctpipe synth failed: " + out.stderr.strip())
    first = out.stdout.splitlines()[0]
    got = re.match(r"synthesised for a limit of \d+ activations a rank: (.*?), span (-?\d+),.*"
                   r"the heuristic's own: span (-?\d+)", first)
    if not got:
        sys.exit("unexpected line from ctpipe synth: " + first)
    return int(got.group(3)), int(got.group(2)), got.group(1)


def lp_model(p, m, T, comm, limit):
    """The ILP as CPLEX LP text."""
    def e(s, j, k):
        return "e_%d_%d_%s" % (s, j, k)
    horizon = sum(m * sum(T[s]) for s in range(p)) + 2 * m * p * comm
    big = 2 * horizon
    cons, binaries = [], []
    for s in range(p):
        for j in range(m):
            tf, ti, tw = T[s]
            # dependencies
            if s > 0:
                cons.append("%s - %s >= %d" % (e(s, j, "F"), e(s - 1, j, "F"), comm + tf))
            else:
                cons.append("%s >= %d" % (e(s, j, "F"), tf))
            if s + 1 < p:
                cons.append("%s - %s >= %d" % (e(s, j, "I"), e(s + 1, j, "I"), comm + ti))
            cons.append("%s - %s >= %d" % (e(s, j, "I"), e(s, j, "F"), ti))
            cons.append("%s - %s >= %d" % (e(s, j, "W"), e(s, j, "I"), tw))
            # microbatch order within a kind
            if j > 0:
                for k, t in zip(KINDS, T[s]):
                    cons.append("%s - %s >= %d" % (e(s, j, k), e(s, j - 1, k), t))
        # disjunctions for the pairs whose order is not implied: F_j or I_k, F_j or W_k, I_j or W_k, k < j
        for j in range(m):
            for k in range(j):
                for a, b in (("F", "I"), ("F", "W"), ("I", "W")):
                    y = "y_%d_%s%d_%s%d" % (s, a, j, b, k)  # 1: a_j before b_k
                    binaries.append(y)
                    ta, tb = T[s][KINDS.index(a)], T[s][KINDS.index(b)]
                    # a_j first: b_k ends >= a_j's end + tb;  else a_j ends >= b_k's end + ta
                    cons.append("%s - %s - %d %s >= %d" % (e(s, k, b), e(s, j, a), big, y, tb - big))
                    cons.append("%s - %s + %d %s >= %d" % (e(s, j, a), e(s, k, b), big, y, ta))
        # memory when F_j starts: j + 1 - (W_k before F_j) <= limit; W_k is before F_j iff not y(F_j before W_k)
        # (only W_k with k < j can run before F_j): j + 1 - sum_k (1 - y_k) <= limit, i.e. sum_k y_k <= limit - 1,
        # which binds only where j + 1 > limit
        for j in range(limit, m):
            cons.append("%s <= %d" % (" + ".join("y_%d_F%d_W%d" % (s, j, k) for k in range(j)), limit - 1))
        cons.append("z - %s + %s >= %d" % (e(s, m - 1, "W"), e(s, 0, "F"), T[s][0]))
        # a valid cut (it tightens the big-M relaxation's bound): a stage's span holds all its work
        cons.append("z >= %d" % (m * sum(T[s])))
    lines = ["Minimize", " obj: z", "Subject To"]
    lines += [" c%d: %s" % (n, c) for n, c in enumerate(cons)]
    lines += ["Bounds"]
    for s in range(p):
        for j in range(m):
            for k in KINDS:
                lines.append(" 0 <= %s <= %d" % (e(s, j, k), horizon))
    lines += [" 0 <= z <= %d" % horizon, "Binaries"] + [" " + y for y in binaries] + ["End"]
    return "\n".join(lines) + "\n"


def solve(lp_text, seconds):
    """(status, objective, best bound) from CBC."""
    with tempfile.TemporaryDirectory() as d:
        lp = os.path.join(d, "model.lp")
        with open(lp, "w") as f:
            f.write(lp_text)
        out = subprocess.run(["cbc", lp, "sec", str(seconds), "threads", "1", "solve"], capture_output=True, text=True)
        text = out.stdout
    objective = re.search(r"Objective value:\s+([-\d.e+]+)", text)
    bound = re.search(r"best possible\s+([-\d.e+]+)|Lower bound:\s+([-\d.e+]+)", text)
    status = "optimal" if "Result - Optimal solution found" in text else (
        "time limit" if "Stopped on time" in text else "other")
    obj = float(objective.group(1)) if objective else None
    bnd = None
    if bound:
        bnd = float(bound.group(1) or bound.group(2))
    if status == "optimal":
        bnd = obj
    return status, obj, bnd


def cases():
    """p <= 3, m <= 6; F:I:W 1:1:1, 1:2:1, 2:3:1 and a heavy last stage; comm 0 and 1; limits p and 2p - 1."""
    cost_sets = [("1:1:1", lambda p: [(1, 1, 1)] * p), ("1:2:1", lambda p: [(1, 2, 1)] * p),
                 ("2:3:1", lambda p: [(2, 3, 1)] * p),
                 ("heavy last", lambda p: [(2, 3, 1)] * (p - 1) + [(4, 5, 2)])]
    for p in (2, 3):
        for m in (4, 6):
            for name, costs in cost_sets:
                for comm in (0, 1):
                    for limit in sorted({p, 2 * p - 1}):
                        yield p, m, name, costs(p), comm, limit


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ctpipe")
    ap.add_argument("--seconds", type=int, default=30)
    args = ap.parse_args()
    print("p m costs       comm limit | heuristic better-of (source)                  |       ILP (status)     | gap: heuristic, better-of")
    worst, gaps = 0.0, []
    for p, m, name, T, comm, limit in cases():
        heur, best, source = heuristic_spans(args.ctpipe, p, m, T, comm, limit)
        status, obj, bound = solve(lp_model(p, m, T, comm, limit), args.seconds)
        ref = obj if status == "optimal" else bound
        gap_h = (heur - ref) / ref if ref else float("nan")
        gap_b = (best - ref) / ref if ref else float("nan")
        gaps.append(gap_h)
        worst = max(worst, gap_h)
        print("%d %d %-11s %4d %5d | %9d %9d (%-25s) | %9s (%-10s) | %6.2f %%, %6.2f %%%s" % (
            p, m, name, comm, limit, heur, best, source, ("%g" % obj) if obj is not None else "-", status,
            100 * gap_h, 100 * gap_b, "" if status == "optimal" else " (against the bound %g)" % bound))
        sys.stdout.flush()
    print("cases %d; the heuristic's own order within %.2f %% of the optimum on the worst, %d of them exactly optimal" % (
        len(gaps), 100 * worst, sum(1 for g in gaps if g == 0)))


if __name__ == "__main__":
    main()
