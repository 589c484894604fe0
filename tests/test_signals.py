"""SIGTERM and SIGHUP stop a training run as Ctrl-C does: the current device call
finishes, the checkpoint is saved, and the exit status is 128 + the signal's number."""
from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from cli_helpers import need_backend, small_data
from conftest import DATA_DIR
from microgpt_fut.training import checkpoint as ckpt

STEPS = 1_000_000


def _run_until_progress(args: list[str]) -> subprocess.Popen:
    """A training subprocess, returned once it printed its first progress line (on
    stderr, where progress goes)."""
    p = subprocess.Popen([sys.executable, "-m", "microgpt_fut", "train", *args, "--steps",
                          str(STEPS), "--samples", "0"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, start_new_session=True)
    for line in p.stderr:
        if line.startswith("step ") and "/" in line:
            return p
    p.kill()
    raise AssertionError(f"no progress line; stdout: {p.stdout.read()}")


def _messages(err: str) -> list[str]:
    """stderr's lines without the progress lines (``step N / M | ...``) around them."""
    return [ln for ln in err.strip().splitlines()
            if not (ln.startswith("step ") and " / " in ln)]


def _long_run(tmp_path, kind: str, out) -> list[str]:
    """`train` options of a run of STEPS steps writing ``out``: microgpt on names, or
    GPT-2 on text."""
    if kind == "names":
        return ["--data", str(small_data(tmp_path)), "--out", str(out)]
    text = tmp_path / "t.txt"
    text.write_text((DATA_DIR / "tinyshakespeare.txt").read_text(encoding="utf-8")[:20000])
    return ["--arch", "gpt2", "--data-format", "text", "--data", str(text), "--n-embd", "16",
            "--n-layer", "1", "--block-size", "16", "--batch-size", "2", "--eval-every",
            "100000", "--eval-iters", "1", "--out", str(out)]


@pytest.mark.parametrize("sig, status", [(signal.SIGTERM, 143), (signal.SIGHUP, 129)],
                         ids=["SIGTERM", "SIGHUP"])
@pytest.mark.parametrize("kind", ["names", "text"])
def test_signal_saves_and_exits_with_its_status(tmp_path, sig, status, kind):
    need_backend("c")
    out = tmp_path / "m.safetensors"
    args = _long_run(tmp_path, kind, out)
    p = _run_until_progress(args)
    p.send_signal(sig)
    _, err = p.communicate(timeout=120)
    assert p.returncode == status, err
    name = signal.Signals(sig).name
    lines = _messages(err)
    assert len(lines) == 1 and lines[0].startswith(f"stopped by {name}: saved the checkpoint of step")
    step = ckpt.load(out).step
    assert 0 < step < STEPS and f"step {step} of {STEPS}" in lines[0]


def test_two_runs_never_write_one_out_at_once(tmp_path):
    """While one training holds --out, a second one started on the same --out is refused
    with one line naming the first's pid; the first ends normally; afterwards the lock
    is gone."""
    need_backend("c")
    out = tmp_path / "m.safetensors"
    first = _run_until_progress(["--data", str(small_data(tmp_path)), "--out", str(out)])
    second = subprocess.run([sys.executable, "-m", "microgpt_fut", "train", "--data",
                             str(small_data(tmp_path)), "--steps", "5", "--out", str(out)],
                            capture_output=True, text=True, timeout=120)
    assert second.returncode == 1
    lines = second.stderr.strip().splitlines()
    assert len(lines) == 1 and f"another microgpt-fut process (pid {first.pid})" in lines[0]
    first.send_signal(signal.SIGINT)
    _, err = first.communicate(timeout=120)
    assert first.returncode == 130, err
    assert ckpt.load(out).step > 0
    assert not (tmp_path / ".m.safetensors.lock").exists()


# A training run whose first device call (MicrogptModel.train) never returns, as a call that
# takes hours would: it says "in call" on stderr first. The run is the real command.
_BLOCKED_RUN = """
import sys, threading
from microgpt_fut.cli.commands import main
from microgpt_fut.models.microgpt import MicrogptModel

def never_returns(self, *args, **kwargs):
    print("in call", file=sys.stderr, flush=True)
    threading.Event().wait()

MicrogptModel.train = never_returns
main(args=sys.argv[1:], prog_name="microgpt-fut")
"""


def _signal_delivered(pid: int, sig: int) -> bool:
    """True when no ``sig`` is pending for the process (Linux: /proc/PID/status)."""
    bit = 1 << (sig - 1)
    status = open(f"/proc/{pid}/status").read().splitlines()
    return not any(int(ln.split()[1], 16) & bit for ln in status
                   if ln.startswith(("SigPnd:", "ShdPnd:")))


def test_second_sigint_stops_at_once_without_saving(tmp_path):
    """Ctrl-C twice during a device call that never returns ends the run anyway: status
    130, one line saying that nothing was saved, and no file left beside --out (no
    partial checkpoint, no lock). The second signal is sent once the first has been
    delivered, so the two cannot merge into one."""
    import time

    need_backend("c")
    data = small_data(tmp_path)
    out = tmp_path / "m.safetensors"
    p = subprocess.Popen([sys.executable, "-c", _BLOCKED_RUN, "train", "--data", str(data),
                          "--steps", "3", "--samples", "0", "--out", str(out)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    assert "in call\n" in iter(p.stderr.readline, "")  # after the data and model lines
    p.send_signal(signal.SIGINT)
    deadline = time.monotonic() + 60
    while not _signal_delivered(p.pid, signal.SIGINT) and time.monotonic() < deadline:
        time.sleep(0.01)
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 130, err
    lines = err.strip().splitlines()
    assert lines == [f"Error: interrupted twice: stopped without saving; nothing was saved to "
                     f"{str(out)!r}"], err
    assert sorted(q.name for q in tmp_path.iterdir()) == ["names.txt"]


def test_a_signal_does_not_wait_for_a_long_fused_call(tmp_path):
    """--steps-per-call 1000000 would fuse minutes of steps into one call; calls are
    cut to about half a second (pacing.py), so SIGTERM still stops the run within
    seconds, saved."""
    need_backend("c")
    out = tmp_path / "m.safetensors"
    p = _run_until_progress(["--data", str(small_data(tmp_path)), "--n-embd", "64",
                             "--n-layer", "2", "--batch-size", "32", "--steps-per-call",
                             "1000000", "--out", str(out)])
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=30)  # one fused call of 10**6 steps: hours
    assert p.returncode == 143, err
    assert 0 < ckpt.load(out).step < STEPS


def test_second_signal_removes_partial_files_and_says_what_out_holds(tmp_path, monkeypatch,
                                                                     capfd):
    """The watcher's second-signal path (which ends the process, so it is called here
    with the exit replaced): partial files and cleanups go, the message is printed."""
    from microgpt_fut import interrupt

    partial = tmp_path / ".m.safetensors.x.tmp"
    partial.write_bytes(b"half")
    interrupt.PARTIAL_FILES.add(str(partial))
    exits, cleaned = [], []
    monkeypatch.setattr(interrupt, "_exit", exits.append)
    req = interrupt.StopRequest()
    req.on_second = lambda: "interrupted twice: stopped without saving; nothing was saved"
    req.cleanups.append(lambda: cleaned.append(True))
    req._signal(signal.SIGINT)
    assert req() and req.name == "SIGINT" and not exits and partial.exists()
    req._signal(signal.SIGTERM)
    assert exits == [143] and cleaned == [True] and not partial.exists()
    assert capfd.readouterr().err == ("Error: interrupted twice: stopped without saving; "
                                      "nothing was saved\n")
    interrupt.PARTIAL_FILES.discard(str(partial))


@pytest.mark.parametrize("per_step, expected", [(None, [1, 4, 5, 5]), (0.1, [1, 4, 5, 5]),
                                                (0.2, [1, 1, 2, 2]), (10.0, [1, 1, 1, 1])])
def test_calls_are_paced_by_time_and_end_at_multiples(per_step, expected):
    """The first call is one step; then as many as fit in CALL_SECONDS (0.5 s) at the
    measured speed, at most --steps-per-call (5 here), ending at multiples of it."""
    from microgpt_fut.pacing import CallPacer

    pacer, done, ks = CallPacer(5, seconds=0.5), 0, []
    for _ in range(4):
        k = pacer.next_k(done, 100)
        ks.append(k)
        pacer.record(k, k * (per_step if per_step is not None else 0.0))
        done += k
    assert ks == expected
    assert CallPacer(5).next_k(3, 1) == 1


def test_a_killed_runs_lock_is_not_in_the_way(tmp_path):
    """SIGKILL leaves the lock file behind, but not the lock (flock dies with its
    process): the killed run's last periodic checkpoint is whole, and a new run on the
    same --out proceeds (and removes the lock file when it ends)."""
    need_backend("c")
    out = tmp_path / "m.safetensors"
    data = small_data(tmp_path)
    p = subprocess.Popen([sys.executable, "-m", "microgpt_fut", "train", "--data", str(data),
                          "--steps", str(STEPS), "--save-every", "200", "--samples", "0",
                          "--out", str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, start_new_session=True)
    for line in p.stderr:
        if line.startswith("saved checkpoint"):
            break
    p.kill()
    p.wait(timeout=60)
    assert (tmp_path / ".m.safetensors.lock").exists()
    step = ckpt.load(out).step
    assert step % 200 == 0 and step > 0  # the last periodic save is whole
    r = subprocess.run([sys.executable, "-m", "microgpt_fut", "train", "--data", str(data),
                        "--steps", "5", "--samples", "0", "--overwrite", "--out", str(out)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert ckpt.load(out).step == 5 and not (tmp_path / ".m.safetensors.lock").exists()


@pytest.mark.parametrize("kind", ["names", "text"])
def test_a_closed_stdout_does_not_stop_training(tmp_path, kind):
    """`train ... | head -1`: stdout holds only the samples, so a reader that goes away
    during training stops nothing (it used to stop the run at step 0 after reading the
    data line); the run trains to its end and saves, and the samples then meet the
    closed pipe: status 141, as SIGPIPE, with no message (stderr holds the progress)."""
    need_backend("c")
    out = tmp_path / "m.safetensors"
    args = _long_run(tmp_path, kind, out)
    p = subprocess.Popen([sys.executable, "-m", "microgpt_fut", "train", *args, "--steps",
                          "30", "--samples", "3"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    p.stdout.close()  # the reader left at once
    err = p.stderr.read()
    assert p.wait(timeout=120) == 141, err
    assert ckpt.load(out).step == 30
    assert "Traceback" not in err and "Error" not in err
    assert any(ln.startswith("saved ") for ln in err.splitlines()), err


def test_progress_bar_and_evaluations_on_a_terminal_leave_stdout_empty(tmp_path):
    """Typed in a terminal with stdout piped (`train ... | head -2`): stderr is a
    terminal, so a text run shows tqdm's bar there and prints its evaluation lines above
    it, on stderr too; stdout (--samples 0) gets nothing."""
    import os
    import pty
    import threading

    need_backend("c")
    out = tmp_path / "m.safetensors"
    text = tmp_path / "t.txt"
    text.write_text((DATA_DIR / "tinyshakespeare.txt").read_text(encoding="utf-8")[:20000])
    master, slave = pty.openpty()
    p = subprocess.Popen([sys.executable, "-m", "microgpt_fut", "train", "--arch", "gpt2",
                          "--data-format", "text", "--data", str(text), "--n-embd", "16",
                          "--n-layer", "1", "--block-size", "16", "--batch-size", "2",
                          "--eval-every", "20", "--eval-iters", "1", "--steps", "40",
                          "--samples", "0", "--out", str(out)],
                         stdout=subprocess.PIPE, stderr=slave, text=True)
    os.close(slave)
    seen = []

    def drain():  # the terminal: keep reading what the bar draws
        while True:
            try:
                data = os.read(master, 4096)
            except OSError:
                return
            if not data:
                return
            seen.append(data)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    assert p.stdout.read() == ""
    assert p.wait(timeout=120) == 0
    reader.join(timeout=10)
    os.close(master)
    err = b"".join(seen).decode(errors="replace")
    for fragment in ("data: ", "step 0: train loss", "step 20: train loss", "\r",  # the bar
                     f"saved {out}"):
        assert fragment in err, (fragment, err)
    assert "Traceback" not in err and ckpt.load(out).step == 40
