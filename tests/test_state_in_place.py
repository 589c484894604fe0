"""The training state is consumed by each training call: AdamW's moments are written
in place (futhark/train.fut's ``step``), so a step is taken only when everything it
writes is finite, and nothing else may hold the state's memory.

Each test compares two ways of reaching the same state, bit for bit, on every backend
of both libraries: a state whose m and v shared memory, a step written before its
check, or a copy that shares the original's arrays would each break the equality.
"""
from __future__ import annotations

import numpy as np
import pytest

from conftest import backend_params, get_runtime
from microgpt_fut.models.gpt2 import GPT2Config, GPT2Model
from microgpt_fut.models.microgpt import MicrogptConfig, MicrogptModel
from microgpt_fut.models.base import valid_positions
from microgpt_fut.training.optimizer import Recipe

PROGRAMS = [pytest.param(p, b, id=f"{p}-{b}") for p in ("microgpt", "gpt2")
            for b in (x.values[0] for x in backend_params(p))]
OPT = Recipe(lr=1e-2, min_lr=1e-3, warmup_steps=0, lr_decay_steps=10, grad_clip=1.0)


def model_of(program: str, backend: str):
    """A fresh small model of ``program`` on ``backend`` (GPT-2 with biases: every tensor
    has a gradient), and its random batches: int64 [K=3, B=4, T+1]."""
    rt = get_runtime(backend, program)
    if program == "gpt2":
        config, cls = GPT2Config(40, 32, 2, 2, 16, bias=True), GPT2Model
    else:
        config, cls = MicrogptConfig(40, 16, 4, 1, 16), MicrogptModel
    tokens = np.random.default_rng(5).integers(0, 40, (3, 4, 17))
    return rt, config, cls, tokens


def state_arrays(model) -> list[np.ndarray]:
    """The state's parameters and moments as host copies, in the config's order."""
    p, (m, v) = model.params(), model.adam()
    return [g[k].copy() for g in (p, m, v) for k in p]


def assert_same(a: list[np.ndarray], b: list[np.ndarray]) -> None:
    assert len(a) == len(b)
    for i, (x, y) in enumerate(zip(a, b)):
        assert np.array_equal(x, y), i


@pytest.mark.parametrize("program,backend", PROGRAMS)
def test_every_constructor_trains_to_the_same_bits(program, backend):
    """A state from ``init``, from ``make_state_params`` (zero moments made on the
    device) and from ``make_state`` (zero moments from the host) takes the same three
    steps to the same bits: none of them gives m and v one array."""
    rt, config, cls, tokens = model_of(program, backend)
    a = cls.init(rt, config, 3)
    params = a.params()
    zeros = {k: np.zeros_like(x) for k, x in params.items()}
    b = cls.from_arrays(rt, config, params)
    c = cls.from_arrays(rt, config, params, zeros, zeros)
    ends = []
    for model in (a, b, c):
        model.train(tokens, None, OPT, 10)
        ends.append(state_arrays(model))
    assert_same(ends[0], ends[1])
    assert_same(ends[0], ends[2])


@pytest.mark.parametrize("program,backend", PROGRAMS)
def test_a_step_that_breaks_the_weights_is_not_taken(program, backend):
    """Three steps in one call, the second at an infinite learning rate: the call takes
    step 1, refuses step 2 (its loss and norm are finite and recorded, the weights it
    would make are not) and ends there. The state is the one a one-step call leaves."""
    rt, config, cls, tokens = model_of(program, backend)
    one = cls.init(rt, config, 4)
    one.train(tokens[:1], None, OPT, 10)
    model = cls.init(rt, config, 4)
    lrs = np.array([OPT.lr_at(0), np.inf, OPT.lr_at(2)], np.float32)
    t = tokens[:, None]
    model.state, losses, norms = rt.entry("train", model.state, t,
                                          valid_positions(t, None), lrs, *OPT.kernel_args())
    losses, norms = rt.numpy(losses, norms)
    assert model.step() == 1
    assert np.isfinite(losses[:2]).all() and np.isfinite(norms[:2]).all()
    assert np.isnan(losses[2]) and np.isnan(norms[2])
    assert_same(state_arrays(model), state_arrays(one))


@pytest.mark.parametrize("program,backend", PROGRAMS)
def test_a_gradient_with_nan_is_not_applied(program, backend):
    """``apply_gradient`` (--threads, MPI) on a gradient holding a NaN reports the step
    not taken and leaves the state as it was; a finite one is applied."""
    rt, config, cls, tokens = model_of(program, backend)
    model = cls.init(rt, config, 5)
    before = state_arrays(model)
    _, grad = model.loss_grad_flat(tokens[0])
    bad = grad.copy()
    bad[7] = np.nan
    norm, taken = model.apply_gradient(bad, OPT.lr, OPT)
    assert not taken and np.isnan(norm) and model.step() == 0
    assert_same(state_arrays(model), before)
    norm, taken = model.apply_gradient(grad, OPT.lr, OPT)
    assert taken and np.isfinite(norm) and model.step() == 1


@pytest.mark.parametrize("program,backend", PROGRAMS)
def test_a_gradient_leaves_the_state_alone(program, backend):
    """``loss_grad_flat`` trains a copy of the state (``copy_state``) to read the
    gradient: the model's own weights and moments are untouched, after a step too (when
    the moments are not zero)."""
    rt, config, cls, tokens = model_of(program, backend)
    model = cls.init(rt, config, 6)
    model.train(tokens[:1], None, OPT, 10)
    before = state_arrays(model)
    _, grad = model.loss_grad_flat(tokens[1])
    assert np.isfinite(grad).all() and np.abs(grad).max() > 0
    assert_same(state_arrays(model), before)
    assert model.step() == 1
