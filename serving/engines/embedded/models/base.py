"""What the engine needs from a model family.

A model reads Hugging Face names for its weights (`load_weights` takes `(name, tensor)` pairs
in the checkpoint's own naming, whatever file they came from: safetensors shards or a GGUF
translated to HF names), owns its KV caches (`allocate_kv_cache`), and runs a batch of new
tokens described by a `ForwardContext`. `forward` returns the final hidden states (after the
final norm: what the LM head reads, and what an MTP module takes as its input hidden), and
`compute_logits` turns chosen rows into float32 logits, so the engine computes logits only for
the positions it samples from.

A family with multi-token-prediction layers (DeepSeek-V3: one, at layer index
`num_hidden_layers`) also implements `mtp_forward`: given the token at position i + 1 and the
hidden state at position i, the MTP hidden state that predicts token i + 2 (after the MTP's
own final norm; `compute_logits` applies the shared LM head to it). Its KV entries live in its
own cache at the same slots as the main model's, so one block table serves both.

An MTP layer may draft from a reduced vocabulary (FR-Spec, EAGLE-3): the corpus's most frequent
tokens. A draft scores only those rows of the LM head, which for a small model with a large
vocabulary (SmolLM2: the head is a fifth of the weights) is most of a draft's cost; the main
model still verifies over the whole vocabulary, so the output does not change, only how often
a draft is right.
"""

from abc import ABC, abstractmethod
from collections.abc import Iterable
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from opencomposer.serving.engines.embedded.attention import ForwardContext


class CausalLM(nn.Module, ABC):
    """Which `model_type` a class serves is the loader's registry (`loader.FAMILIES`)."""

    vocab_size: int
    hidden_size: int
    max_positions: int
    """Longest context the model was built for (max_position_embeddings)."""

    num_mtp_layers: int = 0

    lm_head: nn.Linear
    """[vocab, hidden]: every family's output projection (tied or not)."""

    draft_token_ids: Tensor | None = None
    """The token ids MTP drafts may be (`use_draft_vocab`); None: the whole vocabulary."""

    @classmethod
    @abstractmethod
    def from_config(cls, config: dict[str, Any]) -> "CausalLM":
        """Build (uninitialized weights) from a Hugging Face config.json dict."""

    @abstractmethod
    def load_weights(self, weights: Iterable[tuple[str, Tensor]]) -> None:
        """Copy checkpoint tensors (Hugging Face names) into the model. Unknown names and
        missing weights are errors, except tensors the family knows to skip (e.g. rotary
        caches, or MTP weights when the model was built without MTP)."""

    def own_tensors(self) -> dict[str, Tensor]:
        """Parameters and persistent buffers by name: the very tensors the model computes
        with (moving the model keeps them). Built once, not per checkpoint tensor: a state
        dict per tensor would make updating a large model quadratic."""
        tensors: dict[str, Tensor] | None = self.__dict__.get("_own_tensors")
        if tensors is None:
            tensors = dict(self.state_dict(keep_vars=True))
            self.__dict__["_own_tensors"] = tensors
        return tensors

    @abstractmethod
    def checkpoint_targets(self, name: str, tensor: Tensor) -> list[tuple[Tensor, Tensor]]:
        """Where a checkpoint tensor (Hugging Face name) lives in the model: pairs of (our
        tensor or a view of it, the part of `tensor` that goes there); none for a tensor the
        family skips. Raises KeyError for a name the model does not have. New weights are
        written through these, so an update takes the names training saves."""

    @abstractmethod
    def allocate_kv_cache(self, num_slots: int, dtype: torch.dtype | None = None) -> None:
        """(Re)allocate every attention layer's cache (MTP layers included) for `num_slots`
        token slots, zero-filled, on the model's device."""

    @abstractmethod
    def forward(self, input_ids: Tensor, ctx: ForwardContext) -> Tensor:
        """[T] token ids -> [T, hidden] final hidden states (after the final norm)."""

    @abstractmethod
    def compute_logits(self, hidden: Tensor) -> Tensor:
        """[N, hidden] -> [N, vocab] float32 logits."""

    def mtp_forward(self, input_ids: Tensor, hidden: Tensor, ctx: ForwardContext) -> Tensor:
        """[T] next tokens and [T, hidden] previous hidden states -> [T, hidden] MTP states."""
        raise TypeError(f"{type(self).__name__} has no multi-token-prediction layer")

    def use_draft_vocab(self, token_ids: Tensor) -> None:
        """Draft from these token ids only ([n] distinct ids of the vocabulary)."""
        ids = token_ids.to(torch.long).flatten()
        if len(ids) == 0 or len(ids.unique()) != len(ids):
            raise ValueError("a draft vocabulary is a non-empty list of distinct token ids")
        if int(ids.min()) < 0 or int(ids.max()) >= self.vocab_size:
            raise ValueError(f"draft token ids must lie in [0, {self.vocab_size})")
        self.draft_token_ids = ids.to(self.lm_head.weight.device)
        self.__dict__.pop("_draft_rows", None)

    def draft_argmax(self, states: Tensor) -> Tensor:
        """[N, hidden] MTP states -> [N] the greedy draft of each, from the draft vocabulary."""
        if self.draft_token_ids is None:
            return torch.argmax(self.compute_logits(states), dim=-1)
        logits = F.linear(states, self._draft_head())
        return self.draft_token_ids[torch.argmax(logits, dim=-1)]

    def _draft_head(self) -> Tensor:
        """The LM head's draft rows, copied once and again only after the weights change in
        place (a weight update bumps the tensor's version), so drafts never score stale rows."""
        assert self.draft_token_ids is not None
        weight = self.lm_head.weight
        cached: tuple[int, Tensor] | None = self.__dict__.get("_draft_rows")
        if cached is None or cached[0] != weight._version:
            with torch.no_grad():
                rows = weight.index_select(0, self.draft_token_ids)
            cached = (weight._version, rows)
            self.__dict__["_draft_rows"] = cached
        return cached[1]
