"""The GPU run's configurations: the CPU sweep's A-G, shapes that fill a GPU, and
GPT-2 124M's shape (``--arch gpt2``), with their scaled-down versions for the
dry run on a CPU.

Order is cheapest first, so that a run cut short by its time budget has measured
the small configurations. ``torch_compile``: also measured with ``torch.compile``,
where issue 17 compares with it (n_embd 512-768), at D (the time-to-first-step
configuration) and at the largest batch (H); each takes tens of seconds to
compile. Only where every batch has the same shape: block_size > 16 trains on
tinyshakespeare chunks that fill every row (names rows vary in length, and each
new length would compile again).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, replace

from ..configs import CONFIGS, BenchConfig

GPT2_VOCAB = 50257  # GPT-2's BPE vocabulary; tokens are drawn uniformly (no tokenizer there)


@dataclass(frozen=True)
class GPUConfig(BenchConfig):
    """One configuration: model sizes, batch, samples per generate call (0: no
    sampling measured) and the architecture ("microgpt" or "gpt2").

    The sweep's fields (bench.configs.BenchConfig), then ``arch`` and ``torch_compile``.
    """

    arch: str = "microgpt"
    torch_compile: bool = False

    @property
    def data(self) -> str:
        """names (block_size <= 16), shakespeare, or random tokens (gpt2)."""
        return "random" if self.arch == "gpt2" else super().data

    def to_dict(self) -> dict:
        return {**super().to_dict(), "data": self.data}


def _from_sweep(name: str, torch_compile: bool = False) -> GPUConfig:
    return GPUConfig(**asdict(CONFIGS[name]), torch_compile=torch_compile)


GPU_CONFIGS: dict[str, GPUConfig] = {c.name: c for c in (
    *(_from_sweep(n) for n in ("A", "B", "G", "C")),
    _from_sweep("D", torch_compile=True),
    GPUConfig("H", 128, 4, 4, 64, 512, 512, torch_compile=True, note="D at batch 512"),
    _from_sweep("E"),
    GPUConfig("I", 256, 8, 4, 128, 256, 256, note="E at batch 256"),
    _from_sweep("F", torch_compile=True),
    GPUConfig("J", 512, 8, 6, 256, 64, 128, torch_compile=True, note="F at batch 64"),
    GPUConfig("K", 768, 12, 12, 1024, 16, 64, torch_compile=True,
              note="GPT-2 124M's width, depth and context on microgpt's architecture"),
    GPUConfig("gpt2-124M", 768, 12, 12, 1024, 8, 0, arch="gpt2", torch_compile=True,
              note=f"GPT-2 124M (--arch gpt2, vocabulary {GPT2_VOCAB}, biases)"),
)}

# The dry run (CPU): a few of them, shrunk so that the whole run takes minutes on 2 vCPUs.
DRY_RUN: dict[str, dict] = {
    "A": {},
    "C": {"batch": 8, "sample_n": 16, "torch_compile": True},
    "H": {"n_embd": 32, "n_layer": 2, "block_size": 32, "batch": 64, "sample_n": 64},
    "K": {"n_embd": 48, "n_layer": 2, "block_size": 64, "batch": 4, "sample_n": 8},
    "gpt2-124M": {"n_embd": 48, "n_layer": 2, "block_size": 64, "batch": 2},
}

# time to first step is measured at these, one per architecture (GPT-2 124M at batch 1:
# the time it measures is the kernels' compile or load, not a big batch's step)
FIRST_STEP = {"microgpt": "D", "gpt2": "gpt2-124M"}
DRY_FIRST_STEP = {"microgpt": "C", "gpt2": "gpt2-124M"}


def configs(dry_run: bool = False, arch: str | None = None) -> list[GPUConfig]:
    """The run's configurations in order (the dry run's shrunk ones), of one
    architecture when ``arch`` is given."""
    out = ([replace(GPU_CONFIGS[n], **o, note=f"dry run: {n} shrunk")
            for n, o in DRY_RUN.items()] if dry_run else list(GPU_CONFIGS.values()))
    return [c for c in out if arch is None or c.arch == arch]


def first_step_config(arch: str, dry_run: bool = False) -> GPUConfig:
    """The configuration whose first training step is timed for ``arch``."""
    name = (DRY_FIRST_STEP if dry_run else FIRST_STEP)[arch]
    cfg = next(c for c in configs(dry_run) if c.name == name)
    return replace(cfg, name=f"{name}-B1", batch=1) if arch == "gpt2" else cfg
