"""PyTorch peer for benchmarks/ddp_step: DistributedDataParallel (gloo, CPU) on the GPT of
benchmarks/gpt_step_torch.py (vocab 256, context 128, 4 layers, width 256, 4 heads, batch 8
per rank, AdamW), 2 processes started here (torch.multiprocessing, env:// rendezvous on
127.0.0.1), one thread each.

Timed as bench_ddp_step times strata: the ranks meet at a barrier before each step (not
timed); a step's time is the slower rank's; the median is printed. Two models with the same
weights are stepped in turn: DDP as shipped (overlap), and the same DDP under no_sync()
(compute only). Bucket caps as strata's run: --bucket-mb (bucket_cap_mb) and PyTorch's fixed
1 MiB first bucket.

Prints one line: `torch_ddp_ms=<ms> torch_compute_ms=<ms> torch_exposed_paired_ms=<ms> ...`
(the last: median over steps of DDP minus compute only).
"""
import argparse
import os
import socket
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpt_step_torch import GPT  # noqa: E402  (the core benchmark's model)


def worker(rank, world, a, port, out):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)  # the same weights on both ranks (DDP broadcasts rank 0's anyway)
    models, opts = [], []
    for _ in range(2):
        m = DDP(GPT(256, 128, 4, 256, 4), bucket_cap_mb=a.bucket_mb, gradient_as_bucket_view=True)
        models.append(m)
        opts.append(torch.optim.AdamW(m.parameters(), lr=3e-4, weight_decay=0.1))
    g = torch.Generator().manual_seed(1000 + rank)  # each rank its own batch
    idx = torch.randint(0, 256, (a.batch, 128), generator=g)
    tgt = torch.randint(0, 256, (a.batch, 128), generator=g)
    times = [[], []]
    for i in range(a.warmup + a.steps):
        for mode in range(2):
            dist.barrier()
            t0 = time.perf_counter()
            model, opt = models[mode], opts[mode]
            if mode == 1:
                with model.no_sync():
                    loss = model(idx, tgt)
                    loss.backward()
            else:
                loss = model(idx, tgt)
                loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=False)  # keeps the bucket views, as strata's run does
            if i >= a.warmup:
                times[mode].append((time.perf_counter() - t0) * 1e3)
    t = torch.tensor(times, dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    if rank == 0:
        paired = (t[0] - t[1]).tolist()  # per step: DDP minus compute only, same machine state
        out.put((statistics.median(t[0].tolist()), statistics.median(t[1].tolist()), statistics.median(paired)))
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--bucket-mb", type=float, default=4)
    a = ap.parse_args()
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=worker, args=(r, 2, a, port, out)) for r in range(2)]
    for p in procs:
        p.start()
    ddp_ms, compute_ms, exposed_ms = out.get()
    for p in procs:
        p.join()
        if p.exitcode != 0:
            sys.exit(f"rank process exited with {p.exitcode}")
    print(f"torch_ddp_ms={ddp_ms:.2f} torch_compute_ms={compute_ms:.2f} torch_exposed_paired_ms={exposed_ms:.2f} "
          f"torch_buckets_mb={a.bucket_mb:g} threads=1")


if __name__ == "__main__":
    main()
