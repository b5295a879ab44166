#!/usr/bin/env python3
"""Data-parallel balance of a benchmark workload, computed offline (no GPU).

  python3 scripts/dp_balance.py [--model qwen2_5_vl|qwen3_vl] [--workload mixed]
                                [--ranks 2] [--request 16]

The workloads and the FLOP count are scripts/gpu/bench.py's (the towers at their
released sizes, bench configs: no resize). Every request of --request items is
assigned to --ranks ranks as the runtime does (core/src/load_balance.cpp: largest
first onto the least-loaded rank, ties to the lowest), once by patch count (what
input_size was) and once by the work estimate the qwen_vl plugins report
(plugins/qwen_vl/work.cpp: the forward's FLOPs in patch-equivalents). With FLOPs
as the truth, it prints per balancing the rank imbalance (max rank FLOPs / mean,
averaged over requests, and the worst request) and the speed-up over one GPU that
imbalance allows (total FLOPs / the sum over requests of the busiest rank's),
assuming run time follows FLOPs.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "gpu"))
from bench import QWEN2_5, QWEN3  # noqa: E402


def patch_unit_flops(tower):
    """What one patch costs in the blocks' products: the estimate's unit."""
    d, inter = tower.d, tower.inter
    mlp_in = 2 * inter if tower.gated else inter
    return tower.depth * 2 * (d * 3 * d + d * d + d * mlp_in + inter * d)


def estimate(tower, item):
    """The plugin's input_size: FLOPs / unit, rounded half up."""
    whole, rest = divmod(tower.item_flops(item), patch_unit_flops(tower))
    return whole + (1 if 2 * rest >= patch_unit_flops(tower) else 0)


def patches(tower, item):
    t, h, w = tower.grid(item)
    return t * h * w


def balance(sizes, ranks):
    """Item indices per rank, as balance_by_input_size assigns them."""
    order = sorted(range(len(sizes)), key=lambda i: -sizes[i])  # stable: ties keep order
    load, per_rank = [0] * ranks, [[] for _ in range(ranks)]
    for i in order:
        r = min(range(ranks), key=lambda k: (load[k], k))
        per_rank[r].append(i)
        load[r] += sizes[i]
    return per_rank


def budgets(step, largest, smallest=64):
    """The budgets token_step generates: doubling from the smallest up to step, then steps."""
    out, b = [], smallest
    while b < step:
        out.append(b)
        b *= 2
    out.extend(range(step, largest + 1, step))
    return out


def attention_flops(tower, item):
    """The item's attention FLOPs: its FLOPs less those of its products (linear in patches)."""
    t, h, w = tower.grid(item)
    # One merged unit of one temporal patch: its products, less its attention
    # (one sequence of merge^2 patches in every block).
    side, unit = tower.patch * tower.merge, tower.merge * tower.merge
    one = dict(item, height=side, width=side, frames=1)
    linear_per_patch = (tower.item_flops(one) - tower.depth * 4 * tower.d * unit * unit) / unit
    return tower.item_flops(item) - linear_per_patch * t * h * w, linear_per_patch


def rank_time(tower, items, grid, max_items):
    """FLOPs a rank runs for its items as the packer batches them (core/src/packer.cpp):
    sorted by output tokens, at most max_items and the largest budget a batch, each batch
    padded to its smallest fitting budget; padded rows cost products, not attention."""
    batches, cur, cur_tokens = [], [], 0
    for it in sorted(items, key=tower.output_tokens):
        n = tower.output_tokens(it)
        if cur and (len(cur) == max_items or cur_tokens + n > grid[-1]):
            batches.append((cur, cur_tokens))
            cur, cur_tokens = [], 0
        cur.append(it)
        cur_tokens += n
    if cur:
        batches.append((cur, cur_tokens))
    total = 0
    for batch, tokens in batches:
        budget = min(b for b in grid if b >= tokens)
        attn = [attention_flops(tower, it) for it in batch]
        total += attn[0][1] * budget * tower.merge * tower.merge + sum(a for a, _ in attn)
    return total


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="qwen2_5_vl", choices=["qwen2_5_vl", "qwen3_vl"])
    ap.add_argument("--workload", default="mixed")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--request", type=int, default=16, help="items a request (bench: 16)")
    ap.add_argument("--token-step", type=int, default=1024, help="the bench config's budgets")
    ap.add_argument("--max-budget", type=int, default=16384)
    ap.add_argument("--max-items", type=int, default=16, help="max_items_per_batch")
    args = ap.parse_args()
    grid = budgets(args.token_step, args.max_budget)
    tower = QWEN2_5 if args.model == "qwen2_5_vl" else QWEN3
    items = tower.workloads()[args.workload]
    flops = [tower.item_flops(it) for it in items]
    print(f"{args.model} {args.workload}: {len(items)} items, requests of {args.request}, "
          f"{args.ranks} ranks; FLOPs as the truth")
    print(f"{'balanced by':<14} {'mean max/mean':>14} {'worst':>8} {'speed-up bound':>15}")
    for name, size in (("patches", patches), ("work estimate", estimate)):
        ratios, busiest = [], 0
        for start in range(0, len(items), args.request):
            chunk = list(range(start, min(start + args.request, len(items))))
            per_rank = balance([size(tower, items[i]) for i in chunk], args.ranks)
            rank_flops = [sum(flops[chunk[k]] for k in ks) for ks in per_rank]
            ratios.append(max(rank_flops) / (sum(rank_flops) / args.ranks))
            busiest += max(rank_flops)
        print(f"{name:<14} {sum(ratios) / len(ratios):>14.4f} {max(ratios):>8.4f} "
              f"{sum(flops) / busiest:>14.3f}x")
    # The same with each rank's items packed into padded budgets, against one GPU
    # packing the whole request.
    print(f"packed into budgets ({grid[0]}..{grid[-1]}, step {args.token_step}, "
          f"{args.max_items} items a batch): speed-up over one GPU")
    for name, size in (("patches", patches), ("work estimate", estimate)):
        one, busiest = 0, 0
        for start in range(0, len(items), args.request):
            chunk = items[start:start + args.request]
            one += rank_time(tower, chunk, grid, args.max_items)
            per_rank = balance([size(tower, it) for it in chunk], args.ranks)
            busiest += max(rank_time(tower, [chunk[k] for k in ks], grid, args.max_items)
                           for ks in per_rank)
        print(f"{name:<14} {one / busiest:>14.3f}x")


if __name__ == "__main__":
    main()
