"""Low-precision training in miniature: the same small language model trained from the same
seed on the same batches, once per numeric recipe, and the final losses compared to bf16.

The model is a byte-level MLP language model (Bengio et al.'s: the embeddings of the last
`context` bytes, concatenated, through two hidden layers to the next byte's logits) whose
three GEMMs are `FakeQuantLinear`s; the corpus is Python source from the standard library,
which every machine has. It is small enough that a recipe trains in seconds on two cores and
large enough that the GEMMs' rounding shows in the loss. The report's claims, checked here:
per-token NVFP4 forward with MXFP8 backward tracks bf16; per-tensor NVFP4 (one scale for a
whole batch, so a token's numerics depend on the others) and an approximate reciprocal in
place of IEEE division do worse.
"""

import sysconfig
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from opencomposer.kernels.fake_quant import FakeQuantLinear, QuantRecipe


@dataclass(frozen=True)
class TrainingConfig:
    steps: int = 400
    batch: int = 64
    context: int = 16
    embedding: int = 32
    hidden: int = 256
    learning_rate: float = 3e-3
    seed: int = 0
    corpus_bytes: int = 2_000_000
    tail: int = 50
    """The final loss is the mean of the last `tail` steps' (one batch's loss is noisy)."""


BF16 = QuantRecipe(forward="bf16", backward="bf16")
RECIPES: dict[str, QuantRecipe] = {
    "bf16": BF16,
    "nvfp4 per-token fwd, mxfp8 bwd": QuantRecipe(),
    "nvfp4 per-tensor fwd, mxfp8 bwd": QuantRecipe(nvfp4_scale="per_tensor"),
    "nvfp4 per-token fwd, reciprocal division, mxfp8 bwd": QuantRecipe(nvfp4_division="reciprocal"),
    "mxfp8 fwd, mxfp8 bwd": QuantRecipe(forward="mxfp8"),
}


def corpus(limit: int) -> Tensor:
    """Up to `limit` bytes of the standard library's Python sources, in a fixed order."""
    chunks, size = [], 0
    for path in sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py")):
        data = path.read_bytes()
        chunks.append(data)
        size += len(data)
        if size >= limit:
            break
    return torch.frombuffer(bytearray(b"".join(chunks)[:limit]), dtype=torch.uint8).long()


class ByteMLP(nn.Module):
    def __init__(self, config: TrainingConfig, recipe: QuantRecipe) -> None:
        super().__init__()
        self.embed = nn.Embedding(256, config.embedding)
        width = config.context * config.embedding
        self.layers = nn.ModuleList(
            [
                FakeQuantLinear(width, config.hidden, recipe=recipe),
                FakeQuantLinear(config.hidden, config.hidden, recipe=recipe),
            ]
        )
        # The output head stays in bf16, as the report keeps everything but the MoE's
        # expert GEMMs out of NVFP4: a 4-bit head over the vocabulary made every recipe's
        # loss spike here (to 10 nats, from 2.3) within 400 steps.
        self.head = FakeQuantLinear(config.hidden, 256, recipe=BF16)

    def forward(self, context: Tensor) -> Tensor:
        x = self.embed(context).flatten(1)
        for layer in self.layers:
            x = F.gelu(layer(x))
        return self.head(x)


def batches(data: Tensor, config: TrainingConfig) -> Iterator[tuple[Tensor, Tensor]]:
    """The same (context, next byte) batches for every recipe, from the config's seed."""
    generator = torch.Generator().manual_seed(config.seed)
    offsets = torch.arange(config.context)
    for _ in range(config.steps):
        starts = torch.randint(
            0, len(data) - config.context - 1, (config.batch,), generator=generator
        )
        yield data[starts[:, None] + offsets], data[starts + config.context]


def train(recipe: QuantRecipe, config: TrainingConfig, data: Tensor) -> list[float]:
    """Each step's training loss."""
    torch.manual_seed(config.seed)
    model = ByteMLP(config, recipe)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.learning_rate)
    losses = []
    for context, target in batches(data, config):
        loss = F.cross_entropy(model(context), target)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def final_loss(losses: list[float], config: TrainingConfig) -> float:
    tail = losses[-config.tail :]
    return sum(tail) / len(tail)


def final_losses(
    config: TrainingConfig, recipes: dict[str, QuantRecipe] = RECIPES
) -> dict[str, float]:
    """Each recipe's final loss, all trained on the same data."""
    data = corpus(config.corpus_bytes)
    return {
        name: final_loss(train(recipe, config, data), config) for name, recipe in recipes.items()
    }
