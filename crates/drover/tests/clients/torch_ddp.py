"""A torch.distributed (gloo) DistributedDataParallel step, its ranks started by torchrun or
by srun: every rank adds its rank (all_reduce), trains one step of a shared model on its own
data (DDP averages the gradients), and rank 0 checks that every rank holds the same weights
after it."""
import os
import socket
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

if "RANK" not in os.environ:
    # Started by srun: Slurm's variables name the ranks (as Lightning and submitit read them).
    os.environ.update(RANK=os.environ["SLURM_PROCID"], WORLD_SIZE=os.environ["SLURM_NTASKS"],
                      LOCAL_RANK=os.environ["SLURM_LOCALID"])
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
total = torch.tensor([float(rank)])
dist.all_reduce(total)
torch.manual_seed(0)
model = DDP(torch.nn.Linear(4, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.full((8, 4), float(rank + 1))
model(x).pow(2).mean().backward()
opt.step()
w = model.module.weight.detach().clone()
every = [torch.zeros_like(w) for _ in range(world)]
dist.all_gather(every, w)
hosts = [None] * world
dist.all_gather_object(hosts, socket.gethostname())
if rank == 0:
    same = all(torch.equal(every[0], v) for v in every)
    print(f"ddp {sys.argv[1]}: world={world} sum={int(total.item())} in_sync={same} "
          f"hosts={','.join(sorted(set(hosts)))}")
# Every rank past its last collective before any tears gloo down: torch 1.13's gloo aborts a
# rank ("terminate called without an active exception") whose peer left while it still had
# the pair open.
dist.barrier()
dist.destroy_process_group()
