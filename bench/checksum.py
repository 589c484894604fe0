"""``python -m bench.checksum``: what checking a checkpoint's checksums costs at GPT-2
124M (issue 41: well under a second).

``checkpoint.load`` recomputes the CRC-32 of every tensor it reads and compares it with
the one saved in the file's metadata. This times that check (``checkpoint.check_sums``)
over the weights of GPT-2 small in the checkpoint's layout (OpenAI's sizes: 12 layers,
n_embd 768, 1024 positions, vocabulary 50257, biases: 124,439,808 parameters, 498 MB of
float32), as ``sample``, ``eval``, ``export-hf`` and ``--init-from`` read them; ``train
--resume`` also reads Adam's two moments, three times the bytes. Prints the best and
the median of --repeat runs, in seconds and GB/s.
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from microgpt_fut.models.gpt2 import GPT2Config
from microgpt_fut.training import checkpoint as ckpt

GPT2_SMALL = GPT2Config(vocab_size=50257, n_embd=768, n_head=12, n_layer=12, block_size=1024)


def time_check(config: GPT2Config = GPT2_SMALL, repeat: int = 3) -> tuple[list[float], int]:
    """(seconds of each of ``repeat`` checks of every weight's CRC-32, bytes checked):
    random float32 weights of ``config`` in the file's layout (config.to_file), their
    checksums computed once as ``checkpoint.save`` does, then checked as ``load``."""
    rng = np.random.default_rng(0)
    params = {n: rng.standard_normal(s, dtype=np.float32) for n, s in config.shapes().items()}
    tensors = config.to_file(params)
    sums = {n: ckpt.checksum(a) for n, a in tensors.items()}
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        ckpt.check_sums(tensors, sums, "bench")
        times.append(time.perf_counter() - t0)
    return times, sum(a.nbytes for a in tensors.values())


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.checksum", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeat", type=int, default=3, help="checks timed (default %(default)s)")
    a = p.parse_args(argv)
    times, nbytes = time_check(repeat=a.repeat)
    best, median = min(times), statistics.median(times)
    print(f"CRC-32 check of GPT-2 124M's weights ({GPT2_SMALL.num_params():,} parameters, "
          f"{nbytes / 1e6:,.0f} MB float32): best {best:.3f} s ({nbytes / best / 1e9:.2f} GB/s), "
          f"median {median:.3f} s of {len(times)}; --resume (with Adam's moments) about "
          f"{3 * median:.2f} s")


if __name__ == "__main__":
    main()
