"""Linear layers whose weights are also packed for one row count, for speculative verification
on CPU.

A speculating sequence's forward runs its k drafts and the token before them: k + 1 rows. On
CPU, MKL's sgemm for a handful of rows packs the weight matrix anew at every call, so the rows
cost far more than their arithmetic: SmolLM2-135M's forward over 4 tokens took 1.65x one over
a single token, which eats most of what accepted drafts gain. MKL's packed GEMM packs once: the
same forward over 4 tokens then took 1.23x (2 threads; the figures of `engine bench`). The pack
is a second copy of each weight, kept beside the original, which serves every other row count
(prefill, plain decoding, batches), so it is made only where speculation runs.

A `PackedLinear` is the `nn.Linear` it replaces, parameters included (same objects, same
names: checkpoints and weight updates see no difference); it repacks after its weight changes
in place (an update bumps the tensor's version), and runs the packed product only without
autograd, in float32, for exactly its row count.
"""

import torch
import torch.nn.functional as F
from torch import Tensor, nn


def packing_available() -> bool:
    """Whether this torch build has MKL's packed GEMM (x86 builds with MKL)."""
    return torch.backends.mkl.is_available() and hasattr(torch.ops.mkl, "_mkl_linear")


class PackedLinear(nn.Linear):
    rows: int
    _pack: tuple[int, Tensor] | None

    @classmethod
    def of(cls, linear: nn.Linear, rows: int) -> "PackedLinear":
        """`linear` packed for `rows` (its parameters shared, not copied)."""
        packed = cls.__new__(cls)
        nn.Module.__init__(packed)
        packed.in_features, packed.out_features = linear.in_features, linear.out_features
        packed.weight = linear.weight
        packed.bias = linear.bias
        packed.rows = rows
        packed._pack = None
        return packed

    def forward(self, x: Tensor) -> Tensor:
        rows = x.numel() // x.shape[-1] if x.numel() else 0
        if (
            rows != self.rows
            or torch.is_grad_enabled()
            or x.dtype != torch.float32
            or self.weight.dtype != torch.float32
            or x.device.type != "cpu"
        ):
            return F.linear(x, self.weight, self.bias)
        out = torch.ops.mkl._mkl_linear(
            x.reshape(rows, -1), self._packed(), self.weight, self.bias, rows
        )
        return out.view(*x.shape[:-1], self.out_features)

    def _packed(self) -> Tensor:
        version = self.weight._version
        if self._pack is None or self._pack[0] != version:
            with torch.no_grad():
                pack = torch.ops.mkl._mkl_reorder_linear_weight(self.weight.detach(), self.rows)
            self._pack = (version, pack)
        return self._pack[1]


def pack_linears(model: nn.Module, rows: int) -> int:
    """Every `nn.Linear` of `model` packed for `rows`, now rather than in the next forward
    (which a caller may be timing); a packed one is repacked only for a new count, and 0 drops
    the packs: the plain product for every count. Returns how many; a no-op returning 0 where
    packing is unavailable."""
    if not packing_available():
        return 0
    count = 0
    for module in list(model.modules()):
        for name, child in list(module.named_children()):
            if type(child) is nn.Linear:
                child = PackedLinear.of(child, rows)
                setattr(module, name, child)
            elif not isinstance(child, PackedLinear):
                continue
            elif child.rows != rows:
                child.rows, child._pack = rows, None
            if rows:
                child._packed()
            count += 1
    return count
