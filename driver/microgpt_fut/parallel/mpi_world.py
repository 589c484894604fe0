"""One training run over the ranks of an MPI job: joining it, deciding together, ending together.

Under ``mpirun -n N microgpt-fut train ...`` every rank runs the same steps in
lockstep on its share of each batch (exchange.MPIExchange sums the gradients).
Everything that decides which collective comes next is decided once for all:

- the steps of the next call: rank 0's pacer's choice, broadcast (``SharedPacer``);
- whether to stop: after each call the ranks' signal flags are combined by an
  Allreduce (MAX), so a signal to any rank (mpirun turns Ctrl-C into SIGTERM to all
  of them) stops all of them after the same call (``SharedStop``);
- the run itself: rank 0 parses the options, reads the data and the checkpoint,
  builds the run and broadcasts it (cli/mpi.py); the other ranks never read options.

Faults: a watchdog.Watchdog connects every rank to rank 0. A rank that dies,
reports an error or stops answering ends the job: rank 0 prints one line naming
it and what --out still holds (``kept``) and exits; the workers, told by rank 0
(``bye``) or seeing it gone, exit without a word (rank 1 says so if rank 0 itself
died). Ends: status 0 goes through MPI_Finalize on every rank; any other status
ends each process at once (os._exit) after rank 0 has spoken, since a rank in
MPI_Finalize would wait for the others.
"""
from __future__ import annotations

import os
import signal
import socket
import sys
import threading
from dataclasses import dataclass
from typing import Callable, NoReturn

from .exchange import MPIExchange
from ..interrupt import PARTIAL_FILES, StopRequest
from .watchdog import DEFAULT_TIMEOUT, Watchdog, listen

# What MPI launchers put in each rank's environment: Open MPI, MPICH/Hydra (and
# Intel MPI, Slurm's PMI-2), MVAPICH.
_SIZE_VARS = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "MV2_COMM_WORLD_SIZE")
_RANK_VARS = ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "MV2_COMM_WORLD_RANK")
TIMEOUT_VAR = "MICROGPT_FUT_RANK_TIMEOUT"  # seconds of silence before a rank counts as frozen
WORKER_WAIT = 10.0  # seconds a failing worker waits for rank 0 to end first


@dataclass(frozen=True)
class End:
    """What rank 0 shares instead of a run when the command ends before training (a bad
    option, ``train --help``): the workers end with the same status."""

    status: int


def launched(environ=os.environ) -> tuple[int, int]:
    """(rank, size) given to this process by an MPI launcher's environment; (0, 1)
    when it was not started by one (then nothing imports MPI)."""
    for size_var, rank_var in zip(_SIZE_VARS, _RANK_VARS):
        if size_var in environ:
            try:
                return int(environ.get(rank_var, 0)), int(environ[size_var])
            except ValueError:
                continue
    return 0, 1


def rank_timeout(environ=os.environ) -> float:
    """Seconds a rank may stay silent (watchdog heartbeats) before the job ends:
    $MICROGPT_FUT_RANK_TIMEOUT, default watchdog.DEFAULT_TIMEOUT. Raises ValueError
    (one line) for a value that is not a positive number."""
    raw = environ.get(TIMEOUT_VAR)
    if raw is None:
        return DEFAULT_TIMEOUT
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise ValueError(f"${TIMEOUT_VAR} must be a positive number of seconds, got {raw!r}")
    return value


class SharedStop:
    """StopRequest's interface (call it; ``signum``, ``name``) for all ranks at once: each
    call is a collective (``exchange.max_int``) that is true, on every rank, once any
    rank's own StopRequest has a signal; it stays true without further collectives."""

    def __init__(self, exchange, local: StopRequest):
        self.exchange = exchange
        self.local = local
        self.signum: int | None = None

    def __call__(self) -> bool:
        if self.signum is None:
            got = self.exchange.max_int(self.local.signum or 0)
            if got:
                self.signum = got
        return self.signum is not None

    @property
    def requested(self) -> bool:
        return self.signum is not None

    @property
    def name(self) -> str:
        """The agreed signal's name (e.g. "SIGTERM"), "" while none."""
        return signal.Signals(self.signum).name if self.signum else ""


class SharedPacer:
    """A pacing.CallPacer whose choice of steps is rank 0's, broadcast to all ranks
    (each ``next_k`` is a collective: ``exchange.rank0_int``)."""

    def __init__(self, exchange, pacer):
        self.exchange = exchange
        self.pacer = pacer

    def next_k(self, done: int, remaining: int) -> int:
        k = self.pacer.next_k(done, remaining) if self.exchange.rank == 0 else None
        return self.exchange.rank0_int(k)

    def record(self, k: int, seconds: float) -> None:
        self.pacer.record(k, seconds)


class World:
    """This process's place in the job: ``comm`` (MPI.COMM_WORLD), ``rank``, ``size``,
    ``local_rank`` and ``local_size`` (ranks on this node), ``exchange`` (the gradient
    sum) and ``watchdog``. ``kept()`` (rank 0; set by the command) says what --out
    holds, for the line that reports a failed rank; ``cleanups`` run before a
    failed rank ends this one (partial checkpoint files are removed too)."""

    def __init__(self, comm, local_rank: int, local_size: int):
        self.comm = comm
        self.rank = comm.Get_rank()
        self.size = comm.Get_size()
        self.local_rank = local_rank
        self.local_size = local_size
        self.exchange = MPIExchange(comm)
        self.watchdog: Watchdog | None = None
        self.kept: Callable[[], str] = lambda: ""
        self.cleanups: list[Callable[[], None]] = []
        self._exit = threading.Lock()    # the first to print an ending line wins it
        self._finishing = threading.Event()
        self._shared = False

    # --- deciding together -----------------------------------------------------
    def share(self, obj=None):
        """rank 0's ``obj``, on every rank (a broadcast; the run, or the end of it). Rank
        0 shares exactly once before finishing (``finish`` does it if the command did
        not), so that the workers never wait for it in vain."""
        self._shared = True
        return self.comm.bcast(obj if self.rank == 0 else None, root=0)

    def shared_stop(self, local: StopRequest) -> SharedStop:
        return SharedStop(self.exchange, local)

    def shared_pacer(self, pacer) -> SharedPacer:
        return SharedPacer(self.exchange, pacer)

    # --- ending ----------------------------------------------------------------
    def claim_exit(self) -> None:
        """Become the one thread that prints the job's last line and ends this process
        (blocks for ever when another thread already is: it is ending the process)."""
        self._exit.acquire()

    def abandon(self) -> None:
        """Rank 0 ends at once (a second signal): release the workers (status 1)."""
        if self.watchdog is not None and self.rank == 0:
            self.watchdog.bye(1)

    def finish(self, status: int) -> NoReturn:
        """End this rank with ``status``: 0 through MPI_Finalize (mpi4py's, at exit) on
        every rank, a worker once rank 0 has ended too (it may print samples for long:
        a worker waits on the watchdog's socket rather than in MPI_Finalize, which
        would poll a core); otherwise at once, after announcing it (a worker first
        waits, up to WORKER_WAIT seconds, for rank 0 to end, so that rank 0's status
        and line come first)."""
        self._finishing.set()
        if self.rank == 0 and not self._shared:
            self.share(End(status))
        sys.stdout.flush()
        sys.stderr.flush()
        wd = self.watchdog
        if wd is not None:
            wd.bye(status)
            if self.rank > 0:
                wd.wait_bye(0, WORKER_WAIT if status else None)
            wd.close()
        if status == 0:
            sys.exit(0)
        os._exit(status)

    def _on_failure(self, rank: int, what: str) -> None:
        """The watchdog saw rank ``rank`` die, fail or freeze: end the job with one line
        (from rank 0; from rank 1 when rank 0 is the one that failed). A worker that is
        ending itself only lets its ``finish`` go on."""
        if self.rank > 0 and self._finishing.is_set():
            return
        self.claim_exit()
        if self.rank == 0:
            kept = ""
            try:
                kept = self.kept()
            except Exception:  # never let a message stop the exit
                pass
            write_line(f"Error: rank {rank} {what}" + (f"; {kept}" if kept else ""))
            self.watchdog.bye(1)
            for path in list(PARTIAL_FILES):  # a save in progress: --out keeps the last one
                try:
                    os.unlink(path)
                except OSError:
                    pass
            for f in self.cleanups:
                try:
                    f()
                except Exception:
                    pass
        elif self.rank == 1:
            write_line(f"Error: rank 0 {what}: the job stops")
        os._exit(1)

    def _on_bye(self, rank: int, status: int) -> None:
        """A peer announced its end. A worker that is not ending itself follows rank 0
        out when rank 0 ends with an error (it may be waiting in a collective)."""
        if self.rank > 0 and rank == 0 and status != 0 and not self._finishing.is_set():
            self.claim_exit()
            os._exit(status)


def write_line(line: str) -> None:
    """Print one line on stderr at once (os.write: safe from the watchdog's thread while
    the process is about to end)."""
    try:
        sys.stderr.flush()
        os.write(2, (line + "\n").encode("utf-8", "replace"))
    except OSError:
        pass


def _addresses_of(host: str) -> list[str]:
    """IPv4 addresses other nodes may reach ``host`` at (loopback last)."""
    try:
        found = socket.gethostbyname_ex(host)[2]
    except OSError:
        found = []
    return sorted(set(found), key=lambda a: a.startswith("127.")) or [host]


def join() -> World:
    """Initialise MPI (mpi4py, thread level "funneled": only the main thread calls MPI)
    and connect the watchdog; collective over MPI.COMM_WORLD. Raises WatchdogError
    (one line) when a rank cannot reach rank 0, and ValueError for a bad
    $MICROGPT_FUT_RANK_TIMEOUT."""
    timeout = rank_timeout()
    # Open MPI's blocking waits (the start, MPI_Finalize) yield the core they poll on
    os.environ.setdefault("OMPI_MCA_mpi_yield_when_idle", "1")
    import mpi4py

    mpi4py.rc.thread_level = "funneled"
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    node = comm.Split_type(MPI.COMM_TYPE_SHARED)
    world = World(comm, node.Get_rank(), node.Get_size())
    node.Free()
    host = MPI.Get_processor_name() or socket.gethostname()
    hosts = comm.allgather(host)
    one_node = len(set(hosts)) == 1
    srv = info = None
    if world.rank == 0:
        srv, port, token = listen("127.0.0.1" if one_node else "")
        info = (["127.0.0.1"] if one_node else _addresses_of(host), port, token,
                str(os.getpid()), host)
    addresses, port, token, pid0, host0 = comm.bcast(info, root=0)
    if world.rank == 0:
        world.watchdog = Watchdog.serve(srv, token, world.size - 1, world._on_failure,
                                        world._on_bye, timeout)
    else:
        if hosts[world.rank] == host0:
            addresses = ["127.0.0.1"] + [a for a in addresses if a != "127.0.0.1"]
        world.watchdog = Watchdog.connect(world.rank, addresses, port, token,
                                          world._on_failure, world._on_bye, timeout,
                                          (pid0, host0))
    world.watchdog.start()
    return world


__all__ = ["World", "SharedStop", "SharedPacer", "join", "launched", "rank_timeout"]
