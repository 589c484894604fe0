"""One training run over any model family and any dataset: start, resume, run, checkpoint.

The Python side of futhark/train.fut's ``trainer``, written once over
family.Family (microgpt, GPT-2) and datasets (Lines, Stream): K consecutive steps
are fused into one device call (the family's ``train``) on the dataset's batches
for those steps; a stream dataset is evaluated at step 0, every ``eval_every``
steps and at the end (nanoGPT's estimate_loss). A step's batches depend only on
(seed, step), so a run stopped after any call, saved (``checkpoint``) and
continued (``Run.resume``) computes exactly what the uninterrupted run would.

No state holding a NaN or an infinity is ever made: the kernels take a step only when
its loss, its gradient norm and every weight and moment it would write are finite
(futhark/train.fut's ``step``), and the first step not taken ends its call. The
run is then left at the step before it, with the losses of the good steps recorded
as a run that never diverged records them, and Diverged names it; no state is held
to go back to (GPT-2 124M: 1.5 GB). The host copies a ``checkpoint`` is made of are
checked again.

settings: settings.Settings (num_steps, batch_size, grad_accum, the optimizer, seed,
steps_per_call, threads; eval_every and eval_iters for stream datasets).
"""
from __future__ import annotations

import math
import time
from typing import Callable

import numpy as np

from . import choices
from .checkpoint import Checkpoint
from ..errors import Diverged
from ..parallel.exchange import Exchange
from .family import Family, family_of
from ..pacing import CallPacer
from ..backend.runtime import Runtime

# progress(step, num_steps, mean loss of steps first..step, the gradient norm of step (NaN:
# none), tokens per second over them, first): first is the step after the previous report
Progress = Callable[[int, int, float, float, float, int], None]
# on_eval(step, train loss, val loss or nan[, acc, acc_norm with choices])
OnEval = Callable[..., None]


def finite(arrays: dict[str, np.ndarray]) -> bool:
    """Whether every array of the dict is free of NaN and infinities."""
    return all(np.isfinite(a).all() for a in arrays.values())


class Series:
    """A float32 series of one value per step that grows with the run (--steps may be
    huge: it doubles, up to num_steps); ``view(step)`` is values [0, step)."""

    def __init__(self, num_steps: int, values=()):
        self.num_steps = num_steps
        self._a = np.zeros(0, np.float32)
        self.put(0, np.asarray(values, np.float32))

    def put(self, first: int, values: np.ndarray) -> None:
        """values [k] as steps first+1..first+k."""
        end = first + len(values)
        if end > len(self._a):
            grown = np.zeros(min(self.num_steps, max(end, 2 * len(self._a), 1024)), np.float32)
            grown[:len(self._a)] = self._a
            self._a = grown
        self._a[first:end] = values

    def view(self, step: int) -> np.ndarray:
        return self._a[:step]


class Run:
    """A run in progress: the model (on the device or the host), the dataset, the
    losses, gradient norms and evaluations so far. Make one with ``start`` (fresh or
    --init-from weights) or ``resume`` (a checkpoint), advance it with ``run`` and save
    it with ``checkpoint``. ``step`` steps of ``num_steps`` are done."""

    def __init__(self, family: Family, model, dataset, settings, losses, norms, evals,
                 step: int):
        self.family, self.model, self.dataset, self.settings = family, model, dataset, settings
        self._losses = Series(settings.num_steps, np.asarray(losses, np.float32)[:step])
        norms = np.full(step, np.nan, np.float32) if norms is None else norms
        self._norms = Series(settings.num_steps, np.asarray(norms, np.float32)[:step])
        self.evals = [list(e) for e in evals]
        self.step = step
        self.positions = 0   # valid positions trained on by this object's calls
        self.seconds = 0.0   # time in this object's training calls
        self.init_from = ""  # the model the run started from (train --init-from), if any
        self.description = ""  # the data's description in the checkpoint (default: its own)
        # train --eval-choices: (its absolute path, choices.Example list), scored at each
        # evaluation (acc and acc_norm appended to the evaluation's entry)
        self.choices: tuple[str, list] | None = None
        self.pacer = CallPacer(settings.steps_per_call)
        # one evaluation batch a call: multicore splits a call's sums by how many batches
        # it holds (1 or more), so counts chosen by timing made a resumed run's
        # evaluations differ from the straight run's in the last bits
        self.eval_pacer = CallPacer(1)

    @classmethod
    def start(cls, rt: Runtime, dataset, settings, config, params=None, init_from: str = "",
              exchange: Exchange | None = None) -> "Run":
        """A fresh run of config's family on dataset (datasets.Lines or Stream: a kind's
        ``open``): the family's initialisation under settings.seed, or (``train
        --init-from``) the weights ``params`` (float32 arrays of config's shapes) with the
        optimiser's moments at zero; ``init_from`` names that model in the checkpoint.
        exchange: an MPIExchange when MPI ranks share each step's rows.

        settings (settings.Settings) and config check themselves (Settings when made,
        the config when the family's model is made: ValueError naming the option).
        config.vocab_size must be the dataset's vocabulary size, or for given weights on a
        stream larger (a padded vocabulary, as nanoGPT's 50304): else ValueError. The
        dataset's rows are made here (its ``prepare``), before the model and outside the
        timed calls."""
        have = dataset.vocab.size
        padded = params is not None and dataset.evaluates  # lines: BOS is the last token
        if config.vocab_size != have and not (padded and config.vocab_size > have):
            raise ValueError(f"vocab_size {config.vocab_size} does not match the data's {have}")
        dataset.prepare()
        family = family_of(config)
        model = family.model(rt, config, settings.seed, settings.contexts, exchange, params)
        run = cls(family, model, dataset, settings, (), (), [], 0)
        run.init_from = init_from
        return run

    @classmethod
    def resume(cls, rt: Runtime, ck: Checkpoint, dataset, settings,
               exchange: Exchange | None = None) -> "Run":
        """The run saved in ck, continued on dataset with settings (the checkpoint's, made
        by Settings.from_train; only steps_per_call and threads may differ, and the MPI
        ranks: exchange). ck must be resumable and dataset the run's own: the kind checks
        both once (kinds.Kind.check_resumable at the plan, ``open``)."""
        dataset.prepare()
        family = family_of(ck.config)
        model = family.model(rt, ck.config, settings.seed, settings.contexts, exchange,
                             ck.params, ck.m, ck.v, ck.step)
        run = cls(family, model, dataset, settings, ck.losses, ck.norms, ck.evals or [], ck.step)
        run.init_from = ck.train.get("init_from", "")
        return run

    # -- what has been done --------------------------------------------------------------

    @property
    def losses(self) -> np.ndarray:
        """The loss of each step done so far: float32 [step] (a view)."""
        return self._losses.view(self.step)

    @property
    def norms(self) -> np.ndarray:
        """Each step's gradient norm before clipping: float32 [step] (NaN: not measured)."""
        return self._norms.view(self.step)

    @property
    def num_steps(self) -> int:
        return self.settings.num_steps

    @property
    def done(self) -> bool:
        return self.step >= self.settings.num_steps

    # -- training --------------------------------------------------------------------------

    def _call(self, first: int, k: int) -> tuple[np.ndarray, np.ndarray, int]:
        """Steps first+1..first+k in one device call: (losses [k], norms [k], positions)."""
        s = self.settings
        tokens, n_pos, positions = self.dataset.batches(first, k, s)
        losses, norms = self.family.train(self.model, tokens, n_pos, s.num_steps, s.optimizer)
        return losses, norms, positions

    def _record(self, first: int, losses: np.ndarray, norms: np.ndarray) -> None:
        self._losses.put(first, losses)
        self._norms.put(first, norms)

    def _due_eval(self, step: int) -> bool:
        return self.dataset.evaluates and (step % self.settings.eval_every == 0
                                           or step == self.settings.num_steps)

    def evaluate(self, should_stop: Callable[[], bool] | None = None
                 ) -> tuple[float, ...] | None:
        """nanoGPT's estimate_loss at the current step: mean loss over eval_iters
        batches of each split (val: nan without a validation split), and with
        ``choices`` the multiple-choice acc and acc_norm (choices.evaluate: one device
        call per example); recorded and returned as (train, val[, acc, acc_norm]).

        The batches go to the device one a call, so each batch's loss is the same bits
        whatever came before (``eval_pacer``). When
        ``should_stop()`` turns true between calls, the evaluation is abandoned
        (None, nothing recorded); ``run`` does it first when the run continues.
        """
        out = []
        for split in ("train", "val"):
            if split == "val" and not self.dataset.has_val:
                out.append(math.nan)
                continue
            batches = self.dataset.eval_batches(split, self.settings, self.step)
            losses, i = [], 0
            while i < len(batches):
                if should_stop is not None and should_stop():
                    return None
                k = self.eval_pacer.next_k(i, len(batches) - i)
                t0 = time.perf_counter()
                losses.append(self.family.eval_losses(self.model, batches[i:i + k]))
                self.eval_pacer.record(k, time.perf_counter() - t0)
                i += k
            out.append(float(np.mean(np.concatenate(losses).astype(np.float64))))
        if self.choices is not None:
            scores = choices.evaluate(self.choices[1], self.dataset.vocab,
                                      lambda t: self.family.logits(self.model, t),
                                      self.model.config.block_size)
            out += [scores.acc, scores.acc_norm]
        self.evals = [e for e in self.evals if e[0] != self.step] + [[self.step, *out]]
        return tuple(out)

    def run(self, until: int | None = None, progress: Progress | None = None,
            on_eval: OnEval | None = None, report_every: int = 100,
            should_stop: Callable[[], bool] | None = None) -> None:
        """Train up to step ``until`` (default: the end), at most settings.steps_per_call
        steps a call and about pacing.CALL_SECONDS per call; a stream dataset is
        evaluated at step 0, every eval_every steps and at the end (calls end there).

        A step not taken (its loss, norm or update not finite: the kernels' check)
        ends the run at the step before it, those before recorded, and Diverged names
        it. A non-finite evaluation loss of finite weights raises Diverged at the step
        evaluated.
        ``should_stop()`` is asked after each call: when true, run returns early (the
        call's steps are done). ``progress`` is called after the call that
        crosses each multiple of report_every steps, and after step ``until``.
        """
        s = self.settings
        until = s.num_steps if until is None else min(until, s.num_steps)
        if self._due_eval(self.step) and not any(e[0] == self.step for e in self.evals):
            # step 0, or an evaluation a signal abandoned before the run was saved
            result = self.evaluate(should_stop)
            if result is None:
                return
            if on_eval:
                on_eval(self.step, *result)
        last_t, last_step, last_pos = time.perf_counter(), self.step, self.positions
        while self.step < until:
            first = self.step
            end = until
            if self.dataset.evaluates:
                end = min(until, (first // s.eval_every + 1) * s.eval_every)
            k = self.pacer.next_k(first, end - first)
            t0 = time.perf_counter()
            losses, norms, positions = self._call(first, k)
            done = self.model.step() - first
            if done < k:  # step first+done+1 was not taken, and the call ended there
                self._record(first, losses[:done], norms[:done])
                self.step += done
                raise self.diverged(float(losses[done]), float(norms[done]))
            self.pacer.record(k, time.perf_counter() - t0)
            self.seconds += time.perf_counter() - t0
            self._record(first, losses, norms)
            self.step += k
            self.positions += positions
            if progress is not None and (self.step // report_every > first // report_every
                                         or self.step == until):
                now = time.perf_counter()
                rate = (self.positions - last_pos) / max(now - last_t, 1e-9)
                progress(self.step, s.num_steps, float(np.mean(self.losses[last_step:])),
                         float(self.norms[-1]), rate, last_step + 1)
                last_t, last_step, last_pos = now, self.step, self.positions
            if self._due_eval(self.step):
                # the last evaluation is never abandoned: no later run would do it
                result = self.evaluate(None if self.done else should_stop)
                if result is not None and not math.isfinite(result[0]):
                    # finite weights (checked after the call) whose forward overflows
                    raise Diverged(self.step, s.num_steps,
                                   f"the evaluation loss is {result[0]}", hint=self._hint())
                if result is not None and on_eval:
                    on_eval(self.step, *result)
            if should_stop is not None and should_stop():
                break
        self.model.rt.sync()

    # -- divergence ------------------------------------------------------------------------

    def diverged(self, loss: float, norm: float) -> Diverged:
        """The Diverged naming the step after the run's, which the kernels did not take:
        its loss (NaN when its gradient norm is infinite) is not finite, or else the
        update would have made a weight or a moment so."""
        loss = math.nan if math.isinf(norm) else loss
        if not math.isfinite(loss):
            what = f"the loss is {loss}"
        else:
            what = "its update made a parameter or an Adam moment infinite or NaN"
        return Diverged(self.step + 1, self.settings.num_steps, what,
                        getattr(self.model, "bad_ranks", ()), self._hint())

    def checked(self, groups: tuple[dict[str, np.ndarray], ...]) -> None:
        """Check the host copies of the state (params, m, v) that a checkpoint is made
        of: raise Diverged naming the run's step when one holds a NaN or an infinity
        (the kernels never make such a state: a guard against a broken copy)."""
        if not all(finite(g) for g in groups):
            raise Diverged(self.step, self.settings.num_steps,
                           "the state holds a NaN or an infinity", hint=self._hint())

    def _hint(self) -> str:
        """What to change after a divergence: AdamW's decay multiplies each decayed
        weight by 1 - lr x weight_decay, which at 1 or more flips or zeroes it, whatever
        the learning rate's size otherwise."""
        o = self.settings.optimizer
        if o.lr * o.weight_decay >= 1:
            return (f"try a smaller --weight-decay: --lr {o.lr:g} x --weight-decay "
                    f"{o.weight_decay:g} must stay below 1")
        return "try a smaller --lr"

    # -- saving ----------------------------------------------------------------------------

    def checkpoint(self) -> Checkpoint:
        """Everything needed to continue the run, ready for checkpoint.save: the model,
        the optimiser's moments, the settings (settings.to_train()), the data's identity
        (the dataset's train_entries) and the series. Raises Diverged (``checked``) when
        the state holds a NaN or an infinity, after putting the run back to the last
        finite step."""
        params, (m, v) = self.model.params(), self.model.adam()
        self.checked((params, m, v))
        train = self.settings.to_train()
        if self.dataset.evaluates:
            train.update(self.dataset.train_entries(self.step, self.settings, self.description))
        else:
            train.update(self.dataset.train_entries(self.step, self.settings))
            if self.description:
                train["data"] = self.description
        if self.init_from:
            train["init_from"] = self.init_from
        if self.choices is not None:
            train["eval_choices"] = self.choices[0]
        vocab, tokenizer = self.dataset.checkpoint_vocab()
        # each step's gradient norm; none when some are unknown (a microgpt run resumed
        # from a checkpoint of before 2026-12, which kept none)
        norms = self.norms.copy()
        norms = norms if np.isfinite(norms).all() else None
        return Checkpoint(self.model.config, vocab, params, m, v, self.step, train,
                          self.losses.copy(), self.dataset.data_format, norms,
                          [list(e) for e in self.evals] if self.dataset.evaluates else None,
                          tokenizer=tokenizer)
