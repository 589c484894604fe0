"""The training loop and name generation, as plain Python functions (the CLI calls them).

microgpt's job: shuffle the documents once under the seed, then step s trains on
documents (s*B + i) % N (B = 1: ``docs[step % len(docs)]``) with Adam and a
learning rate decaying linearly to 0. Here K consecutive steps are fused into one
device call (``Model.train``); the host only builds their [K, B, block_size+1] tokens.

A run (``Training``) can stop after any call, be written to a checkpoint and be
continued from it (``Training.resume``): the data order is a function of the
seed and the documents, and the cursor is step * batch_size, so a resumed run
computes exactly what the uninterrupted run would have.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable, Iterator

import numpy as np

from .checkpoint import Checkpoint
from .data_parallel import DataParallelModel, runtimes
from .exchange import Exchange
from .data import DataInfo, Vocab, batch_indices, docs_sha256, shuffled
from .model import GPTConfig, Model
from .pacing import CallPacer
from .runtime import Runtime

SAMPLE_CHUNK = 4096  # samples per device call in generate_names


@dataclass(frozen=True)
class TrainSettings:
    """Optimisation settings; defaults are microgpt's (steps_per_call, threads are ours).

    threads > 1 (c backend only) trains each step's batch in shards on that many
    threads (data_parallel.DataParallelModel), at most one per document of the batch;
    1 keeps the whole run on the device (unless MPI ranks share the batch:
    ``Training.start``'s exchange).
    """

    num_steps: int = 1000
    batch_size: int = 1
    lr: float = 0.01
    beta1: float = 0.85
    beta2: float = 0.99
    eps: float = 1e-8
    seed: int = 42
    steps_per_call: int = 50
    threads: int = 1

    @property
    def contexts(self) -> int:
        """Kernel contexts a step is split over: threads, but no more than the batch's rows
        (with one, the whole run stays on the device and steps_per_call steps are fused)."""
        return min(self.threads, self.batch_size)

    def validate(self) -> None:
        """Raise ValueError naming the option when a setting is unusable."""
        for name in ("num_steps", "batch_size", "steps_per_call", "threads"):
            if getattr(self, name) < 1:
                opt = "--steps" if name == "num_steps" else f"--{name.replace('_', '-')}"
                raise ValueError(f"{opt} must be at least 1, got {getattr(self, name)}")
        if not (math.isfinite(self.lr) and self.lr > 0):
            raise ValueError(f"--lr must be a positive number, got {self.lr}")
        for name in ("beta1", "beta2"):
            if not 0 <= getattr(self, name) < 1:
                raise ValueError(f"{name} must be in [0, 1), got {getattr(self, name)}")
        if not (math.isfinite(self.eps) and self.eps > 0):
            raise ValueError(f"eps must be positive, got {self.eps}")
        if not 0 <= self.seed < 2**63:
            raise ValueError(f"--seed must be in [0, 2**63), got {self.seed}")


class Diverged(RuntimeError):
    """A step's loss, or the state after it, is NaN or infinite.

    ``step`` is the first such step (1-based: step s is the s-th update); the
    Training it came from is left at step - 1, the last good state. The message
    is one line naming the step.
    """

    def __init__(self, step: int, num_steps: int, what: str, ranks: tuple[int, ...] = ()):
        by = ""
        if ranks:
            by = (f", in rank {ranks[0]}'s share of the batch" if len(ranks) == 1 else
                  f", in the shares of ranks {', '.join(map(str, ranks))}")
        super().__init__(f"training diverged at step {step} of {num_steps}: {what}{by} "
                         "(try a smaller --lr)")
        self.step = step


def bad_ranks(model) -> tuple[int, ...]:
    """The MPI ranks whose shard gave a non-finite loss or gradient in the model's last
    step (data_parallel models under MPI; empty otherwise)."""
    return getattr(model, "bad_ranks", ())


def uses_host_state(contexts: int, exchange: Exchange | None) -> bool:
    """Whether a run trains on the host-state data-parallel models: with several
    contexts (--threads) or several MPI ranks."""
    return contexts > 1 or (exchange is not None and exchange.size > 1)


# progress(step, num_steps, mean loss of steps first..step, tokens per second over them, first):
# first is the step after the previous report (or after where this ``run`` started)
Progress = Callable[[int, int, float, float, int], None]


class CheckedRun:
    """What a run in progress (``Training``, text_training.TextTraining) shares: no state
    holding a NaN or an infinity is ever handed out to be saved, and the step whose
    update brought one in is found and named.

    Each device call's losses are checked as they arrive, and the whole state
    (parameters and both moments) in ``checked``, which ``checkpoint`` calls on
    the host copies it makes anyway: at every save. (The kernels have no reduction
    that says whether the state is finite, so it is not checked after each call,
    which would copy the model to the host each time.) When either check fails,
    ``diverged`` replays the steps since the last state known to be finite (the
    start, or the last checkpoint), a call's worth at a time and then one step at a
    time within the bad call, checking the whole state after each, and leaves the
    run at the last finite step.

    Subclasses set ``model`` (with ``state``, ``finite()``), ``settings`` (with
    ``num_steps`` and ``steps_per_call``) and ``step``, call ``trust()`` once the
    model is set, and implement ``replay`` and ``rewind``.
    """

    def replay(self, first: int, k: int) -> np.ndarray:
        """Train steps first+1..first+k from the model's current state as ``run`` does
        (recording them) and return their losses."""
        raise NotImplementedError

    def rewind(self, step: int) -> None:
        """Forget what was recorded after ``step`` and make it the run's step (the model's
        state is set by the caller)."""
        raise NotImplementedError

    def trust(self) -> None:
        """Record the current state as finite: a replay starts from here."""
        self._good = (self.step, self.model.state)

    def checked(self, groups: tuple[dict[str, np.ndarray], ...]) -> None:
        """Check the host copies of the state (params, m, v) that a checkpoint is made
        of: raise Diverged (``diverged``) when one holds a NaN or an infinity, else
        record the state as the last finite one."""
        if not all(finite(g) for g in groups):
            raise self.diverged(self.step)
        self.trust()

    def call_diverged(self, before, first: int, end: int) -> Diverged:
        """``diverged`` after a call from state ``before`` at step ``first`` gave a
        non-finite loss: the replay starts at ``before`` when that state is finite
        (one host copy), else at the last state known to be."""
        self.model.state = before
        if self.model.finite():
            self._good = (first, before)
        return self.diverged(end)

    def diverged(self, end: int) -> Diverged:
        """Find the first bad step up to ``end`` (the loss is not finite, or its update
        made the state so) by replaying from the last finite state; leave the run at
        the step before it and return the Diverged naming it."""
        step, state = self._good
        k_max = max(1, self.settings.steps_per_call)
        while step < end:
            k = min(k_max, end - step)
            self.model.state = state
            if np.isfinite(self.replay(step, k)).all() and self.model.finite():
                step, state = step + k, self.model.state
                continue
            for _ in range(k):  # the bad call, one step at a time
                self.model.state = state
                loss = float(self.replay(step, 1)[0])
                what = None
                if not math.isfinite(loss):
                    what = f"the loss is {loss}"
                elif not self.model.finite():
                    what = "its update made a parameter or an Adam moment infinite or NaN"
                if what is not None:
                    ranks = bad_ranks(self.model)
                    self.model.state = state
                    self.rewind(step)
                    return Diverged(step + 1, self.settings.num_steps, what, ranks)
                step, state = step + 1, self.model.state
            break
        # Not reproduced (only possible on a non-deterministic backend): name the range.
        first = self._good[0]
        self.model.state = state
        self.rewind(step)
        return Diverged(first + 1, self.settings.num_steps,
                        f"the loss or the state became NaN or infinite within steps "
                        f"{first + 1}..{end}")


def finite(arrays: dict[str, np.ndarray]) -> bool:
    """Whether every array of the dict is free of NaN and infinities."""
    return all(np.isfinite(a).all() for a in arrays.values())


class Training(CheckedRun):
    """A run in progress: the model on the device, the run's data order and its losses.

    Make one with ``start`` (fresh weights) or ``resume`` (a checkpoint), advance
    it with ``run`` and save it with ``checkpoint``. ``step`` steps of
    ``settings.num_steps`` are done; ``losses`` (float32 [step]) holds their losses.
    """

    def __init__(self, model: Model, vocab: Vocab, settings: TrainSettings, docs: list[str],
                 data: DataInfo, losses: np.ndarray, step: int):
        self.model = model
        self.vocab = vocab
        self.settings = settings
        self.data = data
        self.order = shuffled(docs, settings.seed)
        self.tokens, self.n_pos, self.n_cut = vocab.encode(self.order, model.config.block_size)
        self._losses = np.zeros(0, np.float32)  # grows with the run (--steps may be huge)
        self.step = 0
        self._record(0, np.asarray(losses[:step], np.float32))
        self.step = step
        self.positions = 0  # valid positions trained on by this object's calls
        self.seconds = 0.0  # time spent in this object's calls
        self.init_from = ""  # the model the run started from (train --init-from), if any
        self.pacer = CallPacer(settings.steps_per_call)
        self.trust()  # a fresh model, or a checkpoint's (checkpoint.load refuses NaN)

    @classmethod
    def start(cls, rt: Runtime, docs: list[str], settings: TrainSettings, config: GPTConfig,
              data: DataInfo | None = None, vocab: Vocab | None = None,
              params: dict[str, np.ndarray] | None = None,
              exchange: Exchange | None = None) -> "Training":
        """A fresh run: Model.init under settings.seed, or (``train --init-from``) the
        weights ``params`` (device arrays of config's shapes) with Adam's moments at zero.

        vocab: the model's vocabulary (default: the data's, ``Vocab.from_docs(docs)``);
        config.vocab_size must be its size. exchange: an MPIExchange when MPI ranks
        share each batch (the run then trains on DataParallelModel). Raises ValueError
        (naming the option) for bad settings or sizes, and when a document has a
        character outside vocab.
        """
        settings.validate()
        config.validate()
        if not docs:
            raise ValueError("no documents to train on")
        vocab = vocab or Vocab.from_docs(docs)
        if config.vocab_size != vocab.size:
            raise ValueError(f"vocab_size {config.vocab_size} does not match the data's "
                             f"{vocab.size}")
        unknown = sorted(set("".join(docs)) - set(vocab.chars))
        if unknown:
            raise ValueError(f"the data has characters the model does not know: "
                             f"{''.join(unknown)!r}")
        data = data or DataInfo("", "", "utf-8", docs_sha256(docs), len(docs))
        if uses_host_state(settings.contexts, exchange):
            rts = runtimes(rt, settings.contexts)
            model = (DataParallelModel.from_arrays(rts, config, params, exchange=exchange)
                     if params is not None
                     else DataParallelModel.init(rts, config, settings.seed, exchange))
        else:
            model = (Model.from_arrays(rt, config, params) if params is not None
                     else Model.init(rt, config, settings.seed))
        return cls(model, vocab, settings, docs, data, np.zeros(0, np.float32), 0)

    @classmethod
    def resume(cls, rt: Runtime, ck: Checkpoint, docs: list[str], settings: TrainSettings,
               data: DataInfo, exchange: Exchange | None = None) -> "Training":
        """The run saved in ck, continued on docs (which must be the run's own data).

        settings must be the checkpoint's (resume.settings_for gives them);
        only steps_per_call and threads may differ (and the MPI ranks: exchange, as
        in ``start``). ck needs Adam's moments. Raises
        ValueError when docs are not the checkpoint's documents or ck cannot
        continue (no Adam moments or loss history, step beyond the total).
        """
        settings.validate()
        if ck.m is None or ck.v is None:
            raise ValueError("the checkpoint was loaded without Adam's moments")
        if data.sha256 != ck.train.get("data_sha256"):
            raise ValueError("the documents are not the ones the checkpoint was trained on")
        if not 0 <= ck.step <= settings.num_steps:
            raise ValueError(f"checkpoint step {ck.step} is outside 0..{settings.num_steps}")
        vocab = Vocab(tuple(ck.vocab))
        # a run started --init-from another model may know more characters than its data
        if not set("".join(docs)) <= set(vocab.chars):
            raise ValueError("the documents' characters differ from the checkpoint's vocabulary")
        if ck.losses is None:
            raise ValueError("the checkpoint has no loss history ('train.losses')")
        if uses_host_state(settings.contexts, exchange):
            model = DataParallelModel.from_arrays(runtimes(rt, settings.contexts), ck.config,
                                                  ck.params, ck.m, ck.v, ck.step, exchange)
        else:
            model = Model.from_arrays(rt, ck.config, ck.params, ck.m, ck.v, ck.step)
        run = cls(model, vocab, settings, docs, data, ck.losses, ck.step)
        run.init_from = ck.train.get("init_from", "")
        return run

    @property
    def losses(self) -> np.ndarray:
        """The loss of each step done so far: float32 [step] (a view)."""
        return self._losses[:self.step]

    def _record(self, first: int, losses: np.ndarray) -> None:
        end = first + len(losses)
        if end > len(self._losses):
            grown = np.zeros(min(self.settings.num_steps, max(end, 2 * len(self._losses), 1024)),
                             np.float32)
            grown[:len(self._losses)] = self._losses
            self._losses = grown
        self._losses[first:end] = losses

    @property
    def num_steps(self) -> int:
        return self.settings.num_steps

    @property
    def done(self) -> bool:
        return self.step >= self.settings.num_steps

    def _call(self, first: int, k: int) -> tuple[np.ndarray, int]:
        """Steps first+1 .. first+k in one device call: (losses [k], valid positions)."""
        s = self.settings
        idx = batch_indices(first, k, s.batch_size, len(self.order))
        n_pos = self.n_pos[idx]
        losses = self.model.train(self.tokens[idx], n_pos, s.num_steps, s.lr, s.beta1,
                                  s.beta2, s.eps)
        return losses, int(n_pos.sum())

    def replay(self, first: int, k: int) -> np.ndarray:
        """CheckedRun's: steps first+1..first+k, their losses recorded."""
        losses, _ = self._call(first, k)
        self._record(first, losses)
        return losses

    def rewind(self, step: int) -> None:
        """CheckedRun's: the losses after ``step`` are forgotten (``losses`` is a view)."""
        self.step = step

    def run(self, until: int | None = None, progress: Progress | None = None,
            report_every: int = 100, should_stop: Callable[[], bool] | None = None) -> None:
        """Train up to step ``until`` (default: the end), at most settings.steps_per_call
        steps a call and about pacing.CALL_SECONDS per call.

        After each call its losses are checked (and the whole state at each
        ``checkpoint``: CheckedRun); on a NaN or infinity the run is put back to
        the last good step and Diverged is raised. ``should_stop()`` is asked after
        each call: when true, run returns early (the call's steps are done).
        ``progress`` is called after the call that crosses each multiple of
        report_every steps, and after step ``until``.
        """
        until = self.settings.num_steps if until is None else min(until, self.settings.num_steps)
        last_t, last_step, last_pos = time.perf_counter(), self.step, self.positions
        while self.step < until:
            k = self.pacer.next_k(self.step, until - self.step)
            before, first = self.model.state, self.step
            t0 = time.perf_counter()
            losses, positions = self._call(first, k)
            if not np.isfinite(losses).all():
                raise self.call_diverged(before, first, first + k)
            self.pacer.record(k, time.perf_counter() - t0)
            self.seconds += time.perf_counter() - t0
            self._record(first, losses)
            self.step += k
            self.positions += positions
            if progress is not None and (self.step // report_every > first // report_every
                                         or self.step == until):
                now = time.perf_counter()
                rate = (self.positions - last_pos) / max(now - last_t, 1e-9)
                progress(self.step, self.settings.num_steps,
                         float(np.mean(self._losses[last_step:self.step])), rate, last_step + 1)
                last_t, last_step, last_pos = now, self.step, self.positions
            if should_stop is not None and should_stop():
                break
        self.model.rt.sync()

    def checkpoint(self) -> Checkpoint:
        """Everything needed to continue the run, ready for checkpoint.save.

        Raises Diverged (CheckedRun.checked) when the state holds a NaN or an
        infinity, after putting the run back to the last finite step.
        """
        params, (m, v) = self.model.params(), self.model.adam()
        self.checked((params, m, v))
        s, d = self.settings, self.data
        train = {"num_steps": s.num_steps, "lr": float(s.lr), "beta1": float(s.beta1),
                 "beta2": float(s.beta2), "eps": float(s.eps), "seed": s.seed,
                 "batch_size": s.batch_size, "data": d.description, "data_path": d.path,
                 "data_sha256": d.sha256, "n_docs": d.n_docs, "encoding": d.encoding,
                 "cursor": self.step * s.batch_size}
        if self.init_from:
            train["init_from"] = self.init_from
        return Checkpoint(self.model.config, list(self.vocab.chars), params, m, v,
                          self.step, train, self.losses.copy())


@dataclass
class TrainResult:
    """A finished run: the model on the device and what happened.

    losses: float32 [num_steps], the loss of each step before its update
    (mean negative log-likelihood per valid position, nats). tokens: number of
    valid positions trained on (sum of n_pos). n_cut: documents longer than
    block_size-1 characters, cut to fit.
    """

    model: Model
    vocab: Vocab
    settings: TrainSettings
    losses: np.ndarray
    n_docs: int
    n_cut: int
    tokens: int
    seconds: float
    training: Training | None = None

    def mean_loss(self, last: int = 100) -> float:
        """Mean loss of the last min(last, num_steps) steps."""
        return float(np.mean(self.losses[-last:]))

    def checkpoint(self, data: str = "") -> Checkpoint:
        """The model, Adam's moments, the settings and the losses, ready for checkpoint.save."""
        ck = self.training.checkpoint()
        if data:
            ck.train["data"] = data
        return ck


def train(rt: Runtime, docs: list[str], settings: TrainSettings = TrainSettings(), *,
          n_embd: int = 16, n_head: int = 4, n_layer: int = 1, block_size: int = 16,
          mlp_width: int | None = None, progress: Progress | None = None,
          report_every: int = 100) -> TrainResult:
    """Train a fresh model (Model.init under settings.seed) on docs, all steps.

    The vocabulary comes from docs (data.Vocab); documents are shuffled as
    microgpt does (data.shuffled) and encoded by Vocab.encode. ``progress`` as
    in ``Training.run``. Raises ValueError (naming the option) for bad settings
    or sizes, Diverged on a NaN or infinity, and the runtime's errors.
    """
    settings.validate()
    if not docs:
        raise ValueError("no documents to train on")
    config = GPTConfig(Vocab.from_docs(docs).size, n_embd, n_head, n_layer, block_size,
                       mlp_width)
    start = time.perf_counter()
    t = Training.start(rt, docs, settings, config)
    t.run(progress=progress, report_every=report_every)
    return TrainResult(t.model, t.vocab, settings, t.losses, len(docs), t.n_cut, t.positions,
                       time.perf_counter() - start, t)


def iter_names(model: Model, vocab: Vocab, n: int, temperature: float, seed: int,
               chunk: int | None = None) -> Iterator[list[str]]:
    """n samples (microgpt's inference loop) decoded to strings, a device call's worth
    at a time: ``chunk`` samples a call, or (None) as many as take about
    pacing.CALL_SECONDS, at most SAMPLE_CHUNK, so that a printer shows them as they
    come and Ctrl-C waits little.

    Sample i uses the kernels' RNG stream i under seed, so the samples do not
    depend on the chunks. temperature 0 is greedy (argmax). Raises ValueError for a
    negative, NaN or infinite temperature or a negative n.
    """
    if n < 0:
        raise ValueError(f"the number of samples must be at least 0, got {n}")
    if not (math.isfinite(temperature) and temperature >= 0):
        raise ValueError(f"--temperature must be a finite number >= 0, got {temperature}")
    pacer = CallPacer(SAMPLE_CHUNK)
    first = 0
    while first < n:
        k = min(chunk, n - first) if chunk else pacer.next_k(first, n - first)
        t0 = time.perf_counter()
        rows = model.generate(seed, k, temperature, first)
        pacer.record(k, time.perf_counter() - t0)
        first += k
        yield [vocab.decode(r) for r in rows]


def generate_names(model: Model, vocab: Vocab, n: int, temperature: float, seed: int,
                   chunk: int = SAMPLE_CHUNK) -> list[str]:
    """The samples of ``iter_names`` as one list (``chunk`` samples per device call)."""
    return [name for part in iter_names(model, vocab, n, temperature, seed, chunk)
            for name in part]
