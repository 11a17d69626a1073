"""The learning rate of a step: linear warmup, then a cosine down to a floor.

One schedule spans the whole run, every stage included: the long-context stage continues the
cosine where the short stage left it (as a single CPT run does), so resuming or switching stage
never restarts warmup. The rate is a pure function of the step, so a resumed run needs only the
step to be on the same curve.
"""

import math
from dataclasses import dataclass

from opencomposer.training.errors import TrainingError


@dataclass(frozen=True)
class Schedule:
    peak: float
    """The rate reached at the end of warmup."""

    warmup: int
    """Steps of linear warmup from peak / warmup (never zero: step 0 already learns)."""

    total: int
    """Steps of the whole run; the cosine reaches the floor at the last one."""

    floor: float = 0.1
    """The final rate as a fraction of the peak (nanochat and Megatron end at 0 to 0.1)."""

    def __post_init__(self) -> None:
        if self.peak <= 0 or self.total < 1 or not 0 <= self.warmup <= self.total:
            raise TrainingError(
                f"bad schedule: peak {self.peak}, {self.warmup} warmup of {self.total} steps"
            )
        if not 0 <= self.floor <= 1:
            raise TrainingError(f"the schedule's floor {self.floor} is not a fraction of the peak")

    def lr(self, step: int) -> float:
        """The rate of step `step` (0-based)."""
        if step < self.warmup:
            return self.peak * (step + 1) / self.warmup
        decay_steps = self.total - self.warmup
        progress = min(1.0, (step - self.warmup) / max(1, decay_steps - 1))
        cosine = 0.5 * (1 + math.cos(math.pi * progress))
        return self.peak * (self.floor + (1 - self.floor) * cosine)
