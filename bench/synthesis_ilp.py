#!/usr/bin/env python3
"""How close synthesis comes to the best order: the Zero Bubble paper's ILP (its appendix G), solved
by CBC, against `ctpipe synth` (the heuristic's own order, and the better-of), for one stage a rank
and for V placement (rank r holds stages r and 2p-1-r; the same ILP over a rank's two stages).

The ILP, in ctpipe's memory unit (+1 activation at a microbatch's F, -1 at its W, 0 at its I):
  - E[s, j, k]: when op k (F, I or W) of microbatch j ends on stage s; it takes T[s][k];
  - F of stage s starts after F of stage s-1 ends plus comm, I of s after I of s+1 plus comm (the
    last stage's I after its own F), W after its own I;
  - one op at a time on a rank: for each pair of ops whose order is not already implied, a binary
    chooses which runs first (big-M disjunction);
  - ops of one kind run in microbatch order on a stage (as the heuristic and every ctpipe schedule
    run them; it also breaks the symmetry of identical microbatches);
  - memory: when an F starts, the F already started on its rank (this one too) less the W already
    ended there <= limit;
  - minimise the largest span, max over ranks of E[last W] - E[first F] + T_F (the paper's (3),
    which is what synthesis reports); the span is at least the rank's work (a cut that tightens
    the relaxation's bound, nothing more).
Each case gets a time limit; where CBC stops on it, the gap is reported against its best bound.

Usage: python3 bench/synthesis_ilp.py CTPIPE_BINARY [--seconds 30] [--placement one|v|both] [--ranks 2 3]
       [--cutoff]
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

KINDS = ("F", "I", "W")


def heuristic_spans(ctpipe, p, m, stage_costs, comm, limit, v):
    """(the heuristic's own span, the better-of span and its source) from `ctpipe synth`."""
    stages = "/".join(",".join(str(x) for x in s) for s in stage_costs)
    out = subprocess.run([ctpipe, "synth", "-p", str(p), "-m", str(m), "--memory", str(limit), "--cost",
                          "F=1,I=1,W=1,comm=%d" % comm, "--stage-costs", stages] + (["--placement", "v"] if v else []),
                         check=False, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit("ctpipe synth failed: " + out.stderr.strip())
    first = out.stdout.splitlines()[0]
    got = re.match(r"synthesised for a limit of \d+ activations (?:of a stage )?a rank: (.*?), span (-?\d+),.*"
                   r"the heuristic's own: span (-?\d+)", first)
    if not got:
        sys.exit("unexpected line from ctpipe synth: " + first)
    return int(got.group(3)), int(got.group(2)), got.group(1)


def lp_model(p, m, T, comm, limit, v=False, shorter_than=None):
    """The ILP as CPLEX LP text; T[s] = (F, I, W) of each stage (2p of them on V placement, where rank r
    holds stages r and 2p-1-r and the turn at stages p-1, p needs no message). With `shorter_than`
    (the synthesised span), only orders shorter by one or more: then two ops of a rank end at most
    that span apart, which bounds the big-M and tightens the relaxation a great deal."""
    stages = 2 * p if v else p
    rank = [s if s < p else 2 * p - 1 - s for s in range(stages)]
    ops = [(s, j, k) for s in range(stages) for j in range(m) for k in KINDS]

    def e(op):
        return "e_%d_%d_%s" % op

    def cost(op):
        return T[op[0]][KINDS.index(op[2])]

    # What must run before what (the dependencies, microbatch order within a stage's kind, F, I, W of a
    # microbatch): a chain a -> b with the least gap between a's end and b's end.
    before = {}
    for (s, j, k) in ops:
        op = (s, j, k)
        if k == "F" and s > 0:
            before[((s - 1, j, "F"), op)] = (0 if rank[s - 1] == rank[s] else comm) + cost(op)
        if k == "I" and s + 1 < stages:
            before[((s + 1, j, "I"), op)] = (0 if rank[s + 1] == rank[s] else comm) + cost(op)
        if k == "I":
            before[((s, j, "F"), op)] = cost(op)
        if k == "W":
            before[((s, j, "I"), op)] = cost(op)
        if j > 0:
            before[((s, j - 1, k), op)] = cost(op)
    # Which pairs on a rank the chains already order (reachability), so that only the others get a binary.
    after = {op: set() for op in ops}
    for (a, b) in before:
        after[a].add(b)
    reach = {}
    for op in ops:
        seen, todo = set(), [op]
        while todo:
            x = todo.pop()
            for y in after[x]:
                if y not in seen:
                    seen.add(y)
                    todo.append(y)
        reach[op] = seen
    horizon = sum(m * sum(T[s]) for s in range(stages)) + 2 * m * stages * comm
    big = 2 * horizon if shorter_than is None else shorter_than + max(max(t) for t in T)
    cons, binaries = [], []
    for (a, b), gap in before.items():
        cons.append("%s - %s >= %d" % (e(b), e(a), gap))
    for s in range(stages):
        cons.append("%s >= %d" % (e((s, 0, "F")), cost((s, 0, "F"))) if s == 0 else "%s >= 0" % e((s, 0, "F")))
    first_of = {}  # each rank's first op: microbatch 0's F of its first stage
    for r in range(p):
        mine = [op for op in ops if rank[op[0]] == r]
        first_of[r] = (r, 0, "F")
        order = {}  # (a, b) -> "1" if a runs before b, "0" if after, or a binary's name
        for x in range(len(mine)):
            for y in range(x + 1, len(mine)):
                a, b = mine[x], mine[y]
                if b in reach[a]:
                    order[(a, b)], order[(b, a)] = "1", "0"
                elif a in reach[b]:
                    order[(a, b)], order[(b, a)] = "0", "1"
                else:
                    name = "y_%d_%d_%s__%d_%d_%s" % (a + b)
                    binaries.append(name)
                    order[(a, b)], order[(b, a)] = name, "1 - " + name
                    # name = 1: a first, b ends >= a's end + b's cost; else a ends >= b's end + a's cost
                    cons.append("%s - %s - %d %s >= %d" % (e(b), e(a), big, name, cost(b) - big))
                    cons.append("%s - %s + %d %s >= %d" % (e(a), e(b), big, name, cost(a)))
        # Memory when an F starts (+1 at every F, -1 at every W; the peak follows an F): the F already
        # started, this one included, less the W already ended, at most the limit.
        for x in [op for op in mine if op[2] == "F"]:
            const, terms = 1, []
            for y in mine:
                if y == x or y[2] == "I":
                    continue
                sign = 1 if y[2] == "F" else -1
                o = order[(y, x)]
                if o == "1":
                    const += sign
                elif o.startswith("1 - "):
                    const += sign
                    terms.append((-sign, o[4:]))
                elif o != "0":
                    terms.append((sign, o))
            if not terms:
                if const > limit:
                    cons.append("z >= %d" % (10 * big))  # infeasible: nothing can order it within the limit
                continue
            lhs = " ".join(("+ " if c > 0 else "- ") + n for c, n in terms).lstrip("+ ")
            cons.append("%s <= %d" % (lhs, limit - const))
        # The span: from the rank's first op's start to its last op's end; at least the rank's work.
        start = "%s" % e(first_of[r])
        for last in [op for op in mine if op[2] == "W" and op[1] == m - 1]:
            cons.append("z - %s + %s >= %d" % (e(last), start, cost(first_of[r])))
        cons.append("z >= %d" % sum(cost(op) for op in mine))
    if shorter_than is not None:
        cons.append("z <= %d" % (shorter_than - 1))
    lines = ["Minimize", " obj: z", "Subject To"]
    lines += [" c%d: %s" % (n, c) for n, c in enumerate(cons)]
    lines += ["Bounds"]
    lines += [" 0 <= %s <= %d" % (e(op), horizon) for op in ops]
    lines += [" 0 <= z <= %d" % (20 * big), "Binaries"] + [" " + y for y in binaries] + ["End"]
    return "\n".join(lines) + "\n"


def solve(lp_text, seconds, cutoff=None):
    """(status, objective, best bound) from CBC; with `cutoff` (the synthesised span) told to look only
    for orders shorter than it: an order's span is a whole number where the costs are, so where CBC
    proves that none is shorter by one, the synthesised order is optimal."""
    with tempfile.TemporaryDirectory() as d:
        lp = os.path.join(d, "model.lp")
        with open(lp, "w") as f:
            f.write(lp_text)
        limit = ["cutoff", str(cutoff - 0.5)] if cutoff is not None else []
        out = subprocess.run(["cbc", lp, "sec", str(seconds), "threads", "1"] + limit + ["solve"],
                             capture_output=True, text=True)
        text = out.stdout
    objective = re.search(r"Objective value:\s+([-\d.e+]+)", text)
    bound = re.search(r"best possible\s+([-\d.e+]+)|Lower bound:\s+([-\d.e+]+)", text)
    if cutoff is not None and "infeasible" in text.lower() and not objective:
        return "optimal", float(cutoff), float(cutoff)  # nothing shorter than the synthesised order
    status = "optimal" if "Result - Optimal solution found" in text else (
        "time limit" if "Stopped on time" in text else "other")
    obj = float(objective.group(1)) if objective else None
    bnd = None
    if bound:
        bnd = float(bound.group(1) or bound.group(2))
    if status == "optimal":
        bnd = obj
    if obj is None and cutoff is not None:  # no shorter order found: the synthesised one stands against the bound
        obj = float(cutoff)
    return status, obj, bnd


def cases(placement, ranks=(2, 3)):
    """p <= 3, m <= 6; F:I:W 1:1:1, 1:2:1, 2:3:1 and a heavy last stage; comm 0 and 1; limits p and
    2p - 1 for one stage a rank, 2p (1F1B's memory) and 3p activations of a stage on V placement."""
    cost_sets = [("1:1:1", lambda n: [(1, 1, 1)] * n), ("1:2:1", lambda n: [(1, 2, 1)] * n),
                 ("2:3:1", lambda n: [(2, 3, 1)] * n),
                 ("heavy last", lambda n: [(2, 3, 1)] * (n - 1) + [(4, 5, 2)])]
    for v in {"one": [False], "v": [True], "both": [False, True]}[placement]:
        for p in ranks:
            for m in (4, 6):
                for name, costs in cost_sets:
                    for comm in (0, 1):
                        for limit in (sorted({2 * p, 3 * p}) if v else sorted({p, 2 * p - 1})):
                            yield v, p, m, name, costs(2 * p if v else p), comm, limit


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ctpipe")
    ap.add_argument("--seconds", type=int, default=30)
    ap.add_argument("--placement", choices=("one", "v", "both"), default="both")
    ap.add_argument("--ranks", type=int, nargs="+", default=[2, 3], help="p of the cases (2, 3)")
    ap.add_argument("--cutoff", action="store_true",
                    help="search only for orders shorter than the synthesised one (a bounded big-M)")
    args = ap.parse_args()
    print("place p m costs       comm limit | heuristic better-of (source)                  |       ILP (status)     "
          "| gap: heuristic, better-of")
    worst, gaps = {False: 0.0, True: 0.0}, {False: [], True: []}
    for v, p, m, name, T, comm, limit in cases(args.placement, args.ranks):
        heur, best, source = heuristic_spans(args.ctpipe, p, m, T, comm, limit, v)
        cut = best if args.cutoff else None
        status, obj, bound = solve(lp_model(p, m, T, comm, limit, v, cut), args.seconds, cut)
        ref = obj if status == "optimal" else bound
        gap_h = (heur - ref) / ref if ref and heur > 0 else float("nan")
        gap_b = (best - ref) / ref if ref else float("nan")
        gaps[v].append(gap_b)
        worst[v] = max(worst[v], gap_b)
        print("%-5s %d %d %-11s %4d %5d | %9d %9d (%-25s) | %9s (%-10s) | %6.2f %%, %6.2f %%%s" % (
            "V" if v else "one", p, m, name, comm, limit, heur, best, source,
            ("%g" % obj) if obj is not None else "-", status, 100 * gap_h, 100 * gap_b,
            "" if status == "optimal" else " (against the bound %g)" % bound))
        sys.stdout.flush()
    for v in (False, True):
        if gaps[v]:
            print("%s: cases %d; the synthesised order (better-of) within %.2f %% of the optimum on the worst, %d of "
                  "them exactly optimal" % ("V placement" if v else "one stage a rank", len(gaps[v]), 100 * worst[v],
                                            sum(1 for g in gaps[v] if g == 0)))


if __name__ == "__main__":
    main()
