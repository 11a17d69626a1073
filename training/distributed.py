"""Data parallelism under `torchrun`: which rank this is, and the three collectives training needs.

Every rank holds a full replica and takes its own rows of each global batch. Gradients are
summed, not averaged: each rank scales its loss by its share of the global batch's target
tokens (`local targets / global targets`), so the sum over ranks is exactly the gradient of
the global-batch mean loss that one process would compute (a plain mean over ranks would
weight a rank's tokens by how many its rows happened to have). Expert loads are summed the
same way, so every rank applies the same bias update. Gloo on CPU, NCCL on CUDA; one process
without torchrun needs no process group at all.
"""

import os
from dataclasses import dataclass, field

import torch
import torch.distributed as dist
from torch import Tensor, nn


@dataclass(frozen=True)
class DataParallel:
    rank: int = 0
    world_size: int = 1
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))

    @property
    def is_main(self) -> bool:
        """Only rank 0 writes checkpoints, logs and plots."""
        return self.rank == 0

    @classmethod
    def from_env(cls) -> "DataParallel":
        """The rank torchrun gave this process (WORLD_SIZE, RANK, LOCAL_RANK), its process
        group started; one process when torchrun did not start it. CUDA when there is one
        (each rank on its LOCAL_RANK's GPU), else CPU."""
        world_size = int(os.environ.get("WORLD_SIZE", "1"))
        cuda = torch.cuda.is_available()
        local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        device = torch.device("cuda", local_rank) if cuda else torch.device("cpu")
        if cuda:
            torch.cuda.set_device(device)
        if world_size == 1:
            return cls(0, 1, device)
        if not dist.is_initialized():
            dist.init_process_group("nccl" if cuda else "gloo")
        return cls(dist.get_rank(), world_size, device)

    def sum(self, tensor: Tensor) -> Tensor:
        """The tensor summed over ranks (a new tensor; the input is left as it was)."""
        if self.world_size == 1:
            return tensor
        out = tensor.detach().clone().to(self.device)
        dist.all_reduce(out)
        return out.to(tensor.device)

    def sum_gradients(self, model: nn.Module) -> None:
        """Every parameter's gradient summed over ranks, in one flat all-reduce per dtype.
        Which parameters have a gradient depends only on the code path (an unused MTP layer
        has none on every rank), never on the data, so the flat buffers line up."""
        if self.world_size == 1:
            return
        by_dtype: dict[torch.dtype, list[Tensor]] = {}
        for param in model.parameters():
            if param.grad is not None:
                by_dtype.setdefault(param.grad.dtype, []).append(param.grad)
        for grads in by_dtype.values():
            flat = torch.cat([g.reshape(-1) for g in grads])
            dist.all_reduce(flat)
            offset = 0
            for grad in grads:
                grad.copy_(flat[offset : offset + grad.numel()].view_as(grad))
                offset += grad.numel()

    def barrier(self) -> None:
        if self.world_size > 1:
            dist.barrier()

    def close(self) -> None:
        if self.world_size > 1 and dist.is_initialized():
            dist.destroy_process_group()
