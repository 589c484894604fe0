"""The Futhark kernels against the float64 NumPy reference (tests/reference.py).

Every test that takes ``backend``/``rt`` runs on each built backend; see conftest.py.
"""
from __future__ import annotations

import numpy as np
import pytest

import reference as R
from conftest import DATA_DIR, REQUIRED_BACKENDS, get_runtime
from microgpt_fut.models.microgpt import PARAM_NAMES, MicrogptConfig, MicrogptModel
from microgpt_fut.training.family import FAMILIES
from microgpt_fut.training.optimizer import Adam


def names(model, seed: int, n: int, temperature: float, first: int = 0) -> np.ndarray:
    """Names as `sample` makes them (Family.names: n prompts [BOS], stop BOS)."""
    return FAMILIES["microgpt"].names(model, seed, n, temperature, first)


def rel_err(a, b) -> float:
    """||a - b|| / ||b|| over all elements (b must not be all zero)."""
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    nb = np.linalg.norm(b)
    assert nb > 0, "reference is all zero: the comparison would be meaningless"
    return float(np.linalg.norm(a - b) / nb)


# --------------------------------------------------------------------------- CI guard

def test_ci_has_all_default_backends(built):
    """README's test command runs `./build.sh all` first, so c, multicore and opencl
    must be built."""
    missing = [b for b in REQUIRED_BACKENDS if b not in built]
    assert not missing, f"backends {missing} were not built (built: {built})"


# --------------------------------------------------------------------------- loss, gradient

def test_loss_matches_reference(rt, tiny):
    """Batch loss (rows with n_pos 6, 3, 1 and random padding) equals the float64 reference."""
    model = MicrogptModel.from_arrays(rt, tiny.config, tiny.params)
    ref = R.batch_loss(tiny.params, tiny.tokens, tiny.n_pos, tiny.config.n_head)
    assert model.loss(tiny.tokens, tiny.n_pos) == pytest.approx(ref, rel=1e-4)
    loss, _ = model.loss_grad(tiny.tokens, tiny.n_pos)
    assert loss == pytest.approx(ref, rel=1e-4)
    # each row alone (B = 1, microgpt's own loss), and rows that all end before block_size
    for rows in ([0], [1], [2], [1, 2]):
        ref_b = R.batch_loss(tiny.params, tiny.tokens[rows], tiny.n_pos[rows],
                             tiny.config.n_head)
        got_b = model.loss(tiny.tokens[rows], tiny.n_pos[rows])
        assert got_b == pytest.approx(ref_b, rel=1e-4), f"rows {rows}"


# The whole batch (rows with n_pos 6, 3, 1), and row 0 alone: a batch of one document,
# microgpt's job.
FD_ROWS = {"batch": [0, 1, 2], "one document": [0]}


@pytest.fixture(scope="session", params=list(FD_ROWS))
def fd_case(request, tiny) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """(tokens, n_pos, gradients): central finite differences of the float64 loss of
    FD_ROWS[param] for every element of every tensor."""
    rows = FD_ROWS[request.param]
    tokens, n_pos = tiny.tokens[rows], tiny.n_pos[rows]
    return tokens, n_pos, {n: R.finite_diff_grad(tiny.params, tokens, n_pos,
                                                 tiny.config.n_head, n) for n in PARAM_NAMES}


def test_gradients_match_finite_differences(rt, tiny, fd_case):
    """loss_grad's loss vs the float64 reference, and its gradient of every tensor (all
    elements) vs float64 central differences.

    ||g - g_fd|| / ||g_fd|| < 1e-4 per tensor (f32 kernels reach ~2e-7 here); a gradient
    1% off gives 1e-2, a zero one 1. (MicrogptModel.loss_grad reads the gradient out of the
    train kernel, so this checks the gradient that training uses.)
    """
    tokens, n_pos, fd_grads = fd_case
    model = MicrogptModel.from_arrays(rt, tiny.config, tiny.params)
    loss, grads = model.loss_grad(tokens, n_pos)
    ref = R.batch_loss(tiny.params, tokens, n_pos, tiny.config.n_head)
    assert loss == pytest.approx(ref, rel=1e-4)
    errors = {n: rel_err(grads[n], fd_grads[n]) for n in PARAM_NAMES}
    bad = {n: e for n, e in errors.items() if not e < 1e-4}
    assert not bad, f"gradient vs finite differences, relative error per tensor: {bad}"
    for n in PARAM_NAMES:
        assert grads[n].shape == fd_grads[n].shape


# --------------------------------------------------------------------------- Adam

def test_one_adam_step_matches_numpy(rt, tiny):
    """train with K=1 from step 3 with nonzero m, v equals NumPy Adam on loss_grad's gradient."""
    cfg = tiny.config
    rng = np.random.default_rng(11)
    m0 = {n: (0.02 * rng.standard_normal(s)).astype(np.float32) for n, s in cfg.shapes().items()}
    v0 = {n: rng.uniform(1e-5, 1e-3, s).astype(np.float32) for n, s in cfg.shapes().items()}
    hyper = dict(lr=0.02, beta1=0.8, beta2=0.95, eps=1e-7)
    num_steps, step = 10, 3
    model = MicrogptModel.from_arrays(rt, cfg, tiny.params, m0, v0, step=step)
    loss, grads = model.loss_grad(tiny.tokens, tiny.n_pos)
    losses, _ = model.train(tiny.tokens[None], tiny.n_pos[None], Adam(**hyper), num_steps)
    assert losses.shape == (1,)
    assert losses[0] == pytest.approx(loss, rel=1e-6)
    assert model.step() == step + 1

    ref_p, ref_m, ref_v = R.adam_step(tiny.params, grads, m0, v0, step, num_steps, **hyper)
    got_p = model.params()
    got_m, got_v = model.adam()
    for n in PARAM_NAMES:
        old = tiny.params[n].astype(np.float64)
        # the update itself, not just the (mostly unchanged) parameters
        assert rel_err(got_p[n] - old, ref_p[n] - old) < 1e-4, n
        np.testing.assert_allclose(got_p[n], ref_p[n], rtol=1e-5, atol=1e-7, err_msg=n)
        np.testing.assert_allclose(got_m[n], ref_m[n], rtol=1e-5, atol=1e-9, err_msg=n)
        np.testing.assert_allclose(got_v[n], ref_v[n], rtol=1e-5, atol=1e-11, err_msg=n)


@pytest.mark.parametrize("clip", [0.3, 0.0], ids=["clip", "no_clip"])
def test_microgpt_takes_weight_decay_and_clipping(rt, tiny, clip):
    """Issue 42's one optimiser: microgpt with --weight-decay and --grad-clip is the
    kernels' AdamW at microgpt's linear schedule, two steps against the float64
    reference's clip_grad_norm and adamw_step (torch.optim.AdamW's formula; every microgpt
    tensor is >= 2-D, so all decay) fed the kernels' own gradients."""
    import reference_gpt2 as RG

    cfg, opt = tiny.config, Adam(lr=0.05, beta1=0.8, beta2=0.9, weight_decay=0.5, grad_clip=clip)
    model = MicrogptModel.from_arrays(rt, cfg, tiny.params)
    params = {n: a.astype(np.float64) for n, a in tiny.params.items()}
    m = {n: np.zeros_like(a) for n, a in params.items()}
    v = {n: np.zeros_like(a) for n, a in params.items()}
    for step in range(2):
        _, grad = model.loss_grad(tiny.tokens, tiny.n_pos)
        g, norm = RG.clip_grad_norm(grad, clip)
        params, m, v = RG.adamw_step(params, g, m, v, step, opt.lr_at(step, 4), opt.beta1,
                                     opt.beta2, opt.eps, opt.weight_decay)
        _, (got_norm,) = model.train(tiny.tokens[None], tiny.n_pos[None], opt, 4)
        assert got_norm == pytest.approx(norm, rel=1e-5)
        if clip:
            assert norm > clip  # the clip is exercised
    got = model.params()
    for n in PARAM_NAMES:
        old = tiny.params[n].astype(np.float64)
        assert rel_err(got[n] - old, params[n] - old) < 1e-4, n


# --------------------------------------------------------------------------- forwards

def test_logits_seq_matches_cached_and_reference(rt, tiny):
    """Position-parallel logits == KV-cache logits == float64 reference, at every position."""
    T = tiny.config.block_size
    toks = tiny.tokens[:, :T]
    model = MicrogptModel.from_arrays(rt, tiny.config, tiny.params)
    seq = model.logits_seq(toks)
    assert seq.shape == (len(toks), T, tiny.config.vocab_size)
    for b in range(len(toks)):
        ref = R.forward(tiny.params, toks[b], tiny.config.n_head)
        cached = model.logits_cached(toks[b])
        atol = 1e-5 * np.abs(ref).max()
        np.testing.assert_allclose(cached, seq[b], rtol=1e-5, atol=atol, err_msg=f"row {b}")
        np.testing.assert_allclose(seq[b], ref, rtol=1e-4, atol=atol, err_msg=f"row {b}")
        np.testing.assert_allclose(cached, ref, rtol=1e-4, atol=atol, err_msg=f"row {b}")


# --------------------------------------------------------------------------- K steps per call

def test_k_steps_in_one_call_equal_k_calls(rt, tiny):
    """train(K=4) once == train(K=1) four times: same losses, params and moments.

    Each returned loss is also checked against the reference loss of the parameters
    before that step (so the losses are the pre-update ones and are not stale).
    """
    cfg, K, B = tiny.config, 4, 3
    rng = np.random.default_rng(5)
    tokens = rng.integers(0, cfg.vocab_size, size=(K, B, cfg.block_size + 1), dtype=np.int64)
    n_pos = rng.integers(1, cfg.block_size + 1, size=(K, B), dtype=np.int64)
    once = MicrogptModel.from_arrays(rt, cfg, tiny.params)
    losses_once = once.train(tokens, n_pos, Adam(), 8)[0]
    stepwise = MicrogptModel.from_arrays(rt, cfg, tiny.params)
    losses_steps = []
    for k in range(K):
        before = stepwise.params()
        losses_steps.append(stepwise.train(tokens[k:k + 1], n_pos[k:k + 1], Adam(), 8)[0][0])
        ref = R.batch_loss(before, tokens[k], n_pos[k], cfg.n_head)
        assert losses_steps[k] == pytest.approx(ref, rel=1e-4), f"step {k}"
    assert once.step() == stepwise.step() == K
    np.testing.assert_allclose(losses_once, losses_steps, rtol=1e-5)
    p1, p2 = once.params(), stepwise.params()
    (m1, v1), (m2, v2) = once.adam(), stepwise.adam()
    for n in PARAM_NAMES:
        np.testing.assert_allclose(p1[n], p2[n], rtol=1e-5, atol=1e-6, err_msg=n)
        np.testing.assert_allclose(m1[n], m2[n], rtol=1e-4, atol=1e-7, err_msg=n)
        np.testing.assert_allclose(v1[n], v2[n], rtol=1e-4, atol=1e-9, err_msg=n)
        assert not np.allclose(p1[n], tiny.params[n]), f"{n} did not change"


# ------------------------------------------------------------ real data, backends agree

NAMES_CFG = MicrogptConfig(vocab_size=27, n_embd=16, n_head=4, n_layer=1, block_size=16)
N_STEPS, NAMES_B = 20, 4


@pytest.fixture(scope="session")
def names_batches():
    """20 batches of 4 encoded names: tokens int64 [20, 4, 17], n_pos int64 [20, 4]."""
    path = DATA_DIR / "names.txt"
    names = [w.strip() for w in path.read_text().splitlines() if w.strip()]
    names = [w for w in names if w.isalpha() and w.islower()]
    rng = np.random.default_rng(1234)
    pick = [names[i] for i in rng.choice(len(names), N_STEPS * NAMES_B, replace=False)]
    tokens, n_pos = R.encode_names(pick, NAMES_CFG.block_size)
    return (tokens.reshape(N_STEPS, NAMES_B, -1), n_pos.reshape(N_STEPS, NAMES_B))


def train_names(backend: str, batches) -> tuple[np.ndarray, dict, dict]:
    """20 steps from MicrogptModel.init(seed 42) in two calls of 10.

    Returns (losses float32 [20], initial params, final params).
    """
    tokens, n_pos = batches
    model = MicrogptModel.init(get_runtime(backend), NAMES_CFG, seed=42)
    init = model.params()
    losses = np.concatenate([model.train(tokens[:10], n_pos[:10], Adam(), N_STEPS)[0],
                             model.train(tokens[10:], n_pos[10:], Adam(), N_STEPS)[0]])
    return losses, init, model.params()


@pytest.fixture(scope="session")
def c_trajectory(names_batches):
    """The c backend's train_names result (the baseline the other backends must match)."""
    return train_names("c", names_batches)


def test_backends_agree_on_20_step_trajectory(backend, names_batches, c_trajectory):
    """Same seed, same names: this backend's 20 losses equal c's to 1e-4 relative.

    Also checks independently that the initial weights are N(0, 0.08), that the first
    loss is the reference loss of the initial weights, that the final weights give the
    reference loss, and that training helped.
    """
    losses, init, final = (c_trajectory if backend == "c"
                           else train_names(backend, names_batches))
    tokens, n_pos = names_batches
    assert losses.shape == (N_STEPS,)
    assert losses[0] == pytest.approx(
        R.batch_loss(init, tokens[0], n_pos[0], NAMES_CFG.n_head), rel=1e-4)
    assert np.all(np.diff(losses) != 0), "consecutive losses equal: stale read?"
    # microgpt's initialisation: every weight N(0, 0.08)
    w = np.concatenate([a.ravel() for a in init.values()])
    assert abs(w.mean()) < 0.005 and abs(w.std() - 0.08) < 0.004, (w.mean(), w.std())
    # microgpt's init gives near-uniform predictions; 20 Adam steps lower the loss
    assert abs(losses[0] - np.log(27)) < 0.2
    assert losses[-5:].mean() < losses[:5].mean() - 0.2
    model = MicrogptModel.from_arrays(get_runtime(backend), NAMES_CFG, final)
    assert model.loss(tokens[-1], n_pos[-1]) == pytest.approx(
        R.batch_loss(final, tokens[-1], n_pos[-1], NAMES_CFG.n_head), rel=1e-4)
    if backend != "c":
        c_losses, c_init, c_final = c_trajectory
        for n in PARAM_NAMES:  # same RNG; transcendentals may differ by an ulp
            np.testing.assert_allclose(init[n], c_init[n], rtol=1e-5, atol=1e-7,
                                       err_msg=f"init {n}")
        np.testing.assert_allclose(losses, c_losses, rtol=1e-4)
        for n in PARAM_NAMES:
            assert rel_err(final[n], c_final[n]) < 1e-3, n


# --------------------------------------------------------------------------- opencl staleness

def test_opencl_losses_are_fresh(tiny):
    """futhark-ffi stale-scalar guard: on opencl, per-step losses change and equal c's."""
    for b in ("opencl", "c"):
        get_runtime(b)  # skips when either is not built
    cfg = tiny.config
    rng = np.random.default_rng(77)
    K = 8
    tokens = rng.integers(0, cfg.vocab_size, size=(K, 3, cfg.block_size + 1), dtype=np.int64)
    n_pos = rng.integers(1, cfg.block_size + 1, size=(K, 3), dtype=np.int64)
    out = {}
    for b in ("opencl", "c"):
        model = MicrogptModel.from_arrays(get_runtime(b), cfg, tiny.params)
        per_call = [model.train(tokens[k:k + 1], n_pos[k:k + 1], Adam(), 2 * K)[0][0]
                    for k in range(4)]
        batched = model.train(tokens[4:], n_pos[4:], Adam(), 2 * K)[0]
        out[b] = np.concatenate([per_call, batched])
        assert model.step() == K
    assert np.all(np.diff(out["opencl"]) != 0), f"opencl losses repeat: {out['opencl']}"
    np.testing.assert_allclose(out["opencl"], out["c"], rtol=1e-5)
    # loss() on alternating batches: each answer is its own batch's
    model = MicrogptModel.from_arrays(get_runtime("opencl"), cfg, tiny.params)
    for k in (0, 1, 0, 2):
        ref = R.batch_loss(tiny.params, tokens[k], n_pos[k], cfg.n_head)
        assert model.loss(tokens[k], n_pos[k]) == pytest.approx(ref, rel=1e-4), f"batch {k}"


# --------------------------------------------------------------------------- generate

def test_generate_shape_range_padding_and_seeds(rt, tiny):
    """Rows of block_size tokens in [0, V), BOS-padded after the first BOS; seeds reproduce."""
    cfg = tiny.config
    bos = cfg.vocab_size - 1
    model = MicrogptModel.from_arrays(rt, cfg, tiny.params)
    s = names(model, seed=5, n=40, temperature=1.0)
    assert s.shape == (40, cfg.block_size) and s.dtype == np.int64
    assert s.min() >= 0 and s.max() < cfg.vocab_size
    for row in s:
        ends = np.flatnonzero(row == bos)
        if len(ends):
            assert np.all(row[ends[0]:] == bos), row
    assert np.any(s != bos), "every sample is empty"
    assert len({tuple(r) for r in s}) > 5, "samples barely differ from each other"
    np.testing.assert_array_equal(names(model, seed=5, n=40, temperature=1.0), s)
    assert not np.array_equal(names(model, seed=6, n=40, temperature=1.0), s)
    # sample i does not depend on how the request is split into calls
    five = names(model, seed=5, n=5, temperature=1.0)
    np.testing.assert_array_equal(five, s[:5])
    chunks = np.concatenate([names(model, seed=5, n=2, temperature=1.0, first=0),
                             names(model, seed=5, n=3, temperature=1.0, first=2)])
    np.testing.assert_array_equal(chunks, five)


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_generate_greedy_matches_reference(rt, tiny, seed):
    """temperature 0 gives the float64 reference's argmax chain (margins > 1e-3)."""
    cfg = tiny.config
    params = R.random_params(cfg.shapes(), np.random.default_rng(seed))
    expected, margins = R.greedy_decode(params, cfg.n_head, cfg.block_size)
    assert margins.min() > 1e-3, "test model has a near-tie; choose another seed"
    model = MicrogptModel.from_arrays(rt, cfg, params)
    got = names(model, seed=99, n=3, temperature=0.0)
    for row in got:
        np.testing.assert_array_equal(row, expected)


@pytest.mark.parametrize("temperature", [0.5, 2.0])
def test_generate_first_token_frequencies(rt, tiny, temperature):
    """First-token frequencies of 4000 samples match softmax(reference logits / temperature)."""
    cfg = tiny.config
    params = R.random_params(cfg.shapes(), np.random.default_rng(21), std=0.5)
    logits = R.forward(params, [cfg.vocab_size - 1], cfg.n_head)[0]
    expected = R.softmax(logits / temperature)
    # the check must tell temperature apart from no temperature
    assert np.abs(R.softmax(logits) - expected).max() > 0.08
    n = 4000
    model = MicrogptModel.from_arrays(rt, cfg, params)
    first = names(model, seed=3, n=n, temperature=temperature)[:, 0]
    freq = np.bincount(first, minlength=cfg.vocab_size) / n
    assert np.abs(freq - expected).max() < 0.03, \
        f"freq {freq.round(3)} expected {expected.round(3)}"
    # chi-square with V-1 = 6 degrees of freedom; 22.5 is its 0.999 quantile
    chi2 = float(np.sum((freq - expected) ** 2 / expected) * n)
    assert chi2 < 22.5, f"chi2 {chi2:.1f}"


# --------------------------------------------------------------------------- continue prompts

# prompts of different lengths (token ids < V-1); the last is longer than block_size 6, and
# 9 new tokens carry every row past the context, where the model sees the last 6 tokens
CONT_PROMPTS = ([3], [0, 5, 2], [1, 1, 4, 0, 2], [2, 0, 3, 3, 1, 5, 0, 4])


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_generate_prompts_greedy_matches_reference(rt, tiny, seed):
    """microgpt's continuations (the library's generate_prompts: KV cache, then the
    whole-sequence forward past the context) at temperature 0, and at top_k 1 with
    temperature 1, are the float64 reference's argmax chain of each prompt (nanoGPT's
    generate: the last block_size tokens), batched with prompts of other lengths."""
    cfg = tiny.config
    params = R.random_params(cfg.shapes(), np.random.default_rng(seed))
    max_new = 9
    expected = []
    for p in CONT_PROMPTS:
        new, margins = R.greedy_continue(params, cfg.n_head, cfg.block_size, p, max_new)
        assert margins.min() > 1e-3, "test model has a near-tie; choose another seed"
        expected.append(new)
    model = MicrogptModel.from_arrays(rt, cfg, params)
    got = model.generate_prompts(seed=7, temperature=0.0, top_k=0, prompts=CONT_PROMPTS,
                                 max_new=max_new)
    np.testing.assert_array_equal(got, np.array(expected))
    top1 = model.generate_prompts(7, 1.0, 1, CONT_PROMPTS, max_new, first=3)
    np.testing.assert_array_equal(top1, np.array(expected))
    assert model.generate_prompts(7, 1.0, 0, CONT_PROMPTS, 0).shape == (4, 0)
    with pytest.raises(ValueError, match="at least one token"):
        model.generate_prompts(7, 1.0, 0, [[1], []], 3)


@pytest.mark.parametrize("temperature,top_k", [(0.5, 0), (2.0, 3)])
def test_generate_prompts_first_token_frequencies(rt, tiny, temperature, top_k):
    """First new tokens of 4000 continuations of one prompt follow nanoGPT's
    softmax(top_k(reference logits / temperature)): chi-square over the kept tokens."""
    cfg = tiny.config
    params = R.random_params(cfg.shapes(), np.random.default_rng(21), std=0.5)
    prompt = [6]
    z = R.forward(params, prompt, cfg.n_head)[-1] / temperature
    if top_k:
        z = np.where(z < np.sort(z)[-top_k], -np.inf, z)
    expected = R.softmax(z)
    assert np.abs(R.softmax(R.forward(params, prompt, cfg.n_head)[-1]) - expected).max() > 0.08
    n = 4000
    model = MicrogptModel.from_arrays(rt, cfg, params)
    first = model.generate_prompts(3, temperature, top_k, [prompt] * n, 1)[:, 0]
    freq = np.bincount(first, minlength=cfg.vocab_size) / n
    assert np.all(freq[expected == 0] == 0), f"top-k kept {freq.round(3)}"
    kept = expected > 0
    chi2 = float(np.sum((freq[kept] - expected[kept]) ** 2 / expected[kept]) * n)
    # the 0.999 quantile of chi-square with kept-1 degrees of freedom
    df = int(kept.sum()) - 1
    assert chi2 < {2: 13.82, 3: 16.27, 4: 18.47, 5: 20.52, 6: 22.46}[df], \
        f"chi2 {chi2:.1f} {freq.round(3)}"


def test_generate_prompts_rows_do_not_depend_on_the_batch(rt, tiny):
    """Row i of a batch is sample first+i: the same tokens whether the prompts come
    together, one per call, or in another split; another seed draws others."""
    cfg = tiny.config
    params = R.random_params(cfg.shapes(), np.random.default_rng(5), std=0.5)
    model = MicrogptModel.from_arrays(rt, cfg, params)
    whole = model.generate_prompts(11, 1.0, 0, CONT_PROMPTS, 8, first=2)
    for i, p in enumerate(CONT_PROMPTS):
        np.testing.assert_array_equal(model.generate_prompts(11, 1.0, 0, [p], 8, first=2 + i)[0],
                                      whole[i], err_msg=f"row {i}")
    np.testing.assert_array_equal(model.generate_prompts(11, 1.0, 0, CONT_PROMPTS[2:], 8,
                                                         first=4), whole[2:])
    assert not np.array_equal(model.generate_prompts(12, 1.0, 0, CONT_PROMPTS, 8, first=2),
                              whole)


def _advance_in(cont, sizes) -> np.ndarray:
    """A continuation advanced in calls of the given numbers of steps, the columns joined."""
    return np.concatenate([cont.advance(k) for k in sizes], axis=1)


def test_paced_continuation_equals_one_call(rt, tiny):
    """Issue 41: a continuation advanced in calls of 1, 2, 5, ... steps (the KV cache,
    the last block_size tokens and the RNG state carried from call to call, across the
    step where rows pass the context) makes the tokens of one call
    (``generate_prompts``), at temperature 1 and greedy; column s of a call is position
    steps + s + 1, so row i's new tokens start at column lens[i] - 1."""
    cfg = tiny.config
    params = R.random_params(cfg.shapes(), np.random.default_rng(5), std=0.5)
    model = MicrogptModel.from_arrays(rt, cfg, params)
    max_new = 14
    for temperature, top_k in ((1.0, 0), (0.0, 0), (0.7, 3)):
        whole = model.generate_prompts(11, temperature, top_k, CONT_PROMPTS, max_new, first=2)
        cont = model.start_prompts(11, temperature, top_k, CONT_PROMPTS, first=2)
        lens = cont.lens
        steps = int(lens.max()) + max_new - 1
        out = _advance_in(cont, [1, 2, 5, 1, steps - 9])
        assert cont.steps == steps and out.shape == (len(CONT_PROMPTS), steps)
        for i, n in enumerate(lens):
            np.testing.assert_array_equal(out[i, n - 1:n - 1 + max_new], whole[i],
                                          err_msg=f"row {i}, temperature {temperature}")
            # before its new tokens, a row repeats its prompt (cropped to block_size)
            np.testing.assert_array_equal(out[i, :n - 1], CONT_PROMPTS[i][-cfg.block_size:][1:])


@pytest.mark.parametrize("stop", [0, 4])
def test_stop_token_ends_each_row(rt, tiny, stop):
    """Issue 42's one sampler: with a stop token, each row is the row drawn without one
    up to and including its first drawn stop token, then the stop token to the end
    (prompt tokens equal to it do not end a row), in one call and in paced calls (whose
    steps after every row has ended are not computed); with every row ended at the
    first draw, later calls give only stop tokens."""
    cfg = tiny.config
    params = R.random_params(cfg.shapes(), np.random.default_rng(9), std=0.5)
    model = MicrogptModel.from_arrays(rt, cfg, params)
    prompts = [[stop], [0, 5, 2], [stop, 1, 4, 0, 2], [2, 0, 3, 3, 1, 5, 0, 4]] * 4
    free = model.generate_prompts(3, 1.0, 0, prompts, 12)
    ended = model.generate_prompts(3, 1.0, 0, prompts, 12, stop=stop)
    hits = 0
    for row, got in zip(free, ended):
        at = np.flatnonzero(row == stop)
        end = at[0] + 1 if len(at) else len(row)
        hits += len(at) > 0 and end < len(row)
        np.testing.assert_array_equal(got[:end], row[:end])
        assert np.all(got[end:] == stop), (row, got)
    assert hits >= 4, "too few rows stop early: the test would not see the stop"
    cont = model.start_prompts(3, 1.0, 0, prompts, stop=stop)
    paced = _advance_in(cont, [3, 7, 40])
    for i, n in enumerate(cont.lens):
        np.testing.assert_array_equal(paced[i, n - 1:n - 1 + 12], ended[i], err_msg=f"row {i}")
    one = model.start_prompts(5, 1.0, 0, [[stop]], stop=stop)
    assert stop in one.advance(60)[0], "no stop in 60 draws: choose another seed"
    np.testing.assert_array_equal(one.advance(5), [[stop] * 5])


def test_one_call_sizes_are_checked_before_the_call(rt, tiny, monkeypatch):
    """Issue 41: the one-call continuation's [n, longest + max_new] tokens are checked
    before the library allocates them: more than the machine has is a ValueError
    (Futhark's raw "Failed to allocate memory" before), and a size whose bytes overflow
    int64 too (the allocation wrapped: a corrupted heap)."""
    model = MicrogptModel.from_arrays(rt, tiny.config, tiny.params)
    with pytest.raises(ValueError, match="available"):
        model.generate_prompts(1, 1.0, 0, [[1]], 4611686018427387)
    with pytest.raises(ValueError, match="more than int64 can count"):
        model.generate_prompts(1, 1.0, 0, [[1]], 2**62)
    with pytest.raises(ValueError, match="available"):
        names(model, 1, 2**40, 1.0)
    # the CPU libraries themselves refuse a size whose bytes wrap (where the heap was
    # corrupted), before they allocate, called past the driver's check; the GPU
    # pipelines hoist the allocation above the assertion (sample.fut's fits_i64), so
    # there the driver's check above is the guard
    cont = model.start_prompts(1, 1.0, 0, [[1]])
    if rt.backend in ("c", "multicore"):
        with pytest.raises(RuntimeError, match="Assertion is false"):
            rt.entry("advance", model.state, cont.value, 2**62)
        with pytest.raises(RuntimeError, match="Assertion is false"):
            rt.entry("generate_prompts", model.state, 1, 0, np.float32(1), 0, -1,
                     np.ones((1, 1), np.int64), np.ones(1, np.int64), 2**62)
    # the paced path's KV caches, against a machine with 1 MB available
    from microgpt_fut import host_memory

    monkeypatch.setattr(host_memory, "available_memory", lambda: 2**20)
    with pytest.raises(ValueError, match="KV caches of 4096 continuations"):
        model.start_prompts(1, 1.0, 0, [[1]] * 4096)
