"""A run's settings: one class for every model family and dataset.

nanoGPT's names: ``num_steps`` in all (the learning-rate schedule's end), ``batch_size``
rows (documents or windows) per micro-batch, ``grad_accum`` micro-batches per step,
the optimiser (optimizer.Adam: microgpt's Adam; optimizer.Recipe: nanoGPT's AdamW recipe), the
evaluations of a dataset that evaluates (``eval_every``, ``eval_iters``), the seed
(initial weights, data order, windows), and how a run executes: ``steps_per_call``
steps fused into one device call, ``threads`` c contexts a step is split over.
"""
from __future__ import annotations

from dataclasses import MISSING, dataclass, field, fields

from ..errors import OptionConflict
from .optimizer import Adam, Recipe, optimizer_from_train


@dataclass(frozen=True)
class Settings:
    """A run's settings; the defaults are microgpt's job (1000 steps of one document,
    Adam at lr 0.01). Only ``steps_per_call`` and ``threads`` may change when a run is
    resumed; the rest are the checkpoint's (``from_train``)."""

    num_steps: int = 1000
    batch_size: int = 1
    optimizer: Adam | Recipe = field(default_factory=Adam)
    grad_accum: int = 1
    eval_every: int = 250
    eval_iters: int = 20
    seed: int = 42
    steps_per_call: int = 50
    threads: int = 1

    def __post_init__(self):
        self.validate()  # the one check of a run's settings: every Settings is usable

    @property
    def contexts(self) -> int:
        """Kernel contexts a step is split over: --threads, but no more than a step's
        rows (with one, the whole run stays on the device and steps_per_call steps are
        fused)."""
        return min(self.threads, self.batch_size * self.grad_accum)

    def validate(self) -> None:
        """Raise OptionConflict naming the option when a setting is unusable (the
        optimiser's too: its ``validate``). Made settings have passed it."""
        for name in ("num_steps", "batch_size", "grad_accum", "eval_every", "eval_iters",
                     "steps_per_call", "threads"):
            if getattr(self, name) < 1:
                opt = "--steps" if name == "num_steps" else f"--{name.replace('_', '-')}"
                raise OptionConflict(f"{opt} must be at least 1, got {getattr(self, name)}")
        self.optimizer.validate()
        if not 0 <= self.seed < 2**63:
            raise OptionConflict(f"--seed must be in [0, 2**63), got {self.seed}")

    def to_train(self) -> dict:
        """The checkpoint's ``train`` entries of the steps, batch, seed and optimiser (a
        dataset that evaluates adds grad_accum and its evaluations: datasets.Stream)."""
        return {"num_steps": self.num_steps, "batch_size": self.batch_size, "seed": self.seed,
                **self.optimizer.to_train()}

    @classmethod
    def from_train(cls, train: dict, steps_per_call: int, threads: int = 1) -> "Settings":
        """The settings a checkpoint's ``train`` entries hold, run with ``steps_per_call``
        and ``threads``. KeyError when one is missing (grad_accum, eval_every and
        eval_iters take their defaults, as for a run on lines, which has none)."""
        return cls(train["num_steps"], train["batch_size"], optimizer_from_train(train),
                   train.get("grad_accum", DEFAULTS["grad_accum"]),
                   train.get("eval_every", DEFAULTS["eval_every"]),
                   train.get("eval_iters", DEFAULTS["eval_iters"]), train["seed"],
                   steps_per_call, threads)


# The settings' defaults, declared once (the fields above): a fresh run's where an option
# is not given (plan.make), the command line's (cli/options.py) and their help's.
DEFAULTS = {f.name: f.default for f in fields(Settings) if f.default is not MISSING}
