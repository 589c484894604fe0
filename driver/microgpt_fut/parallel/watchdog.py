"""A side channel between the ranks of an MPI job, so that a rank that dies, fails or
freezes ends the job within seconds instead of leaving the others in a collective.

Open MPI 4 does not tell a rank that a peer died: a collective that waits for a
dead peer waits forever (mpirun notices the death and ends the job two seconds
later with SIGTERM and SIGKILL, but nobody says which rank failed or why). So each
worker (rank > 0) keeps one TCP connection to rank 0 beside MPI, and a thread on
each end reads it while the main thread computes or waits in MPI:

- a process that dies (killed, crashed, out of memory) has its connection closed by
  the kernel at once: the other end reads end-of-file;
- a worker that fails with an error sends it first (``error <one line>``);
- both ends send a heartbeat (``hb``) every HEARTBEAT seconds; a peer silent for
  ``timeout`` seconds is frozen (stopped, swapping) — a thread beats even while its
  process is inside a kernel call, so this does not bound a step's length;
- an orderly end is announced (``bye <status>``), so that it is not taken for a death.

The Watchdog only detects and reports: ``on_failure(rank, what)`` (``what``: a few
words such as "died (killed or crashed; pid 123 on node1)") and ``on_bye(rank,
status)`` are called from its thread; what to print and how to end is the caller's
(mpi_world.py). Messages are lines of text; connections present a random token, so
that no other process can pose as a rank.
"""
from __future__ import annotations

import math
import os
import secrets
import select
import socket
import threading
import time
from typing import Callable

from ..errors import WatchdogError

HEARTBEAT = 1.0          # seconds between heartbeats
DEFAULT_TIMEOUT = 30.0   # seconds of silence after which a peer counts as frozen
CONNECT_SECONDS = 60.0   # how long rank 0 waits for every worker to connect

OnFailure = Callable[[int, str], None]
OnBye = Callable[[int, int], None]


class _Peer:
    """One connection: the rank at its other end, who it is, and what it said."""

    def __init__(self, sock: socket.socket, rank: int, pid: str = "?", host: str = "?"):
        self.sock, self.rank, self.pid, self.host = sock, rank, pid, host
        self.buf = b""
        self.last_seen = time.monotonic()
        self.bye: int | None = None      # the status it announced, once it did
        self.error: str | None = None    # the error it reported, if any
        self.open = True                 # False once its end closed, failed or was reported
        self.lock = threading.Lock()     # sends come from two threads

    def send(self, line: str) -> None:
        with self.lock:
            try:
                self.sock.sendall(line.encode("utf-8", "replace") + b"\n")
            except OSError:
                pass  # its end is gone: the reader thread reports it

    @property
    def who(self) -> str:
        return f"pid {self.pid} on {self.host}"


def listen(bind: str) -> tuple[socket.socket, int, str]:
    """Rank 0: a listening socket on ``bind`` (an address, "" for all), its port and a
    fresh token for the workers' hello."""
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind((bind, 0))
    srv.listen(64)
    return srv, srv.getsockname()[1], secrets.token_hex(16)


class Watchdog:
    """The channel of one rank: rank 0 holds one _Peer per worker, a worker holds
    one, rank 0. Make it with ``serve`` (rank 0) or ``connect`` (a worker), then
    ``start`` the reader thread."""

    def __init__(self, rank: int, peers: list[_Peer], on_failure: OnFailure, on_bye: OnBye,
                 timeout: float = DEFAULT_TIMEOUT):
        self.rank = rank
        self.peers = peers
        self.on_failure = on_failure
        self.on_bye = on_bye
        self.timeout = timeout
        self._closed = False
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name="microgpt-fut watchdog")

    @classmethod
    def serve(cls, srv: socket.socket, token: str, workers: int, on_failure: OnFailure,
              on_bye: OnBye, timeout: float = DEFAULT_TIMEOUT,
              connect_seconds: float = CONNECT_SECONDS) -> "Watchdog":
        """Rank 0: accept the hello of ranks 1..workers on ``srv`` (then closed). Raises
        WatchdogError naming the missing ranks when they have not all connected
        within connect_seconds."""
        peers: dict[int, _Peer] = {}
        deadline = time.monotonic() + connect_seconds
        try:
            while len(peers) < workers:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([srv], [], [], left)[0]:
                    missing = sorted(set(range(1, workers + 1)) - set(peers))
                    raise WatchdogError(
                        f"rank {', '.join(map(str, missing))} did not connect to rank 0's "
                        f"watchdog (port {srv.getsockname()[1]}) within {connect_seconds:.0f} s")
                sock, _ = srv.accept()
                sock.settimeout(10)
                try:
                    hello = sock.makefile("rb").readline().decode("utf-8", "replace").split()
                except OSError:
                    hello = []
                if len(hello) != 5 or hello[0] != "hello" or hello[1] != token:
                    sock.close()  # not one of ours
                    continue
                rank = int(hello[2])
                sock.settimeout(None)
                peers[rank] = _Peer(sock, rank, hello[3], hello[4])
        finally:
            srv.close()
        return cls(0, [peers[r] for r in sorted(peers)], on_failure, on_bye, timeout)

    @classmethod
    def connect(cls, rank: int, addresses: list[str], port: int, token: str,
                on_failure: OnFailure, on_bye: OnBye, timeout: float = DEFAULT_TIMEOUT,
                who: tuple[str, str] = ("?", "?")) -> "Watchdog":
        """A worker: connect to rank 0 (the first of ``addresses`` that answers; ``who``:
        its pid and host, for messages) and say hello. Raises WatchdogError when none
        answers."""
        errors = []
        for address in addresses:
            try:
                sock = socket.create_connection((address, port), timeout=10)
            except OSError as e:
                errors.append(f"{address}: {e.strerror or e}")
                continue
            sock.settimeout(None)
            peer = _Peer(sock, 0, *who)
            peer.send(f"hello {token} {rank} {os.getpid()} {socket.gethostname()}")
            return cls(rank, [peer], on_failure, on_bye, timeout)
        raise WatchdogError(f"rank {rank} cannot reach rank 0's watchdog on port {port} "
                            f"({'; '.join(errors)})")

    def start(self) -> None:
        self._thread.start()

    def send(self, line: str, rank: int | None = None) -> None:
        """Send one line to every peer (or to ``rank``); newlines become spaces."""
        line = " ".join(line.splitlines())
        for p in list(self.peers):
            if rank is None or p.rank == rank:
                p.send(line)

    def bye(self, status: int) -> None:
        """Announce an orderly end with this exit status."""
        self.send(f"bye {int(status)}")

    def report(self, error: str) -> None:
        """A worker's one-line error, for rank 0 to print."""
        self.send(f"error {error}")

    def close(self) -> None:
        """Stop reporting (the process is ending in order) and close the connections."""
        self._closed = True
        for p in self.peers:
            # Read what the peer sent first: closing a socket with unread data makes the
            # kernel send a reset, which can discard our last "bye" on the other side.
            try:
                p.sock.setblocking(False)
                while p.sock.recv(65536):
                    pass
            except OSError:
                pass
            for close in (lambda: p.sock.shutdown(socket.SHUT_RDWR), p.sock.close):
                try:
                    close()
                except OSError:
                    pass

    def join(self, seconds: float | None = None) -> bool:
        """Wait until the reader thread has ended (every peer's connection has ended, or
        ``close``): then every message and end it will see was reported. True if it
        ended within ``seconds`` (None: no limit)."""
        self._thread.join(seconds)
        return not self._thread.is_alive()

    def wait_bye(self, rank: int, seconds: float | None) -> None:
        """Wait until ``rank`` has said bye or its connection ended (at most seconds;
        None: no limit)."""
        deadline = time.monotonic() + seconds if seconds is not None else math.inf
        peer = next((p for p in self.peers if p.rank == rank), None)
        while peer is not None and peer.bye is None and peer.open \
                and time.monotonic() < deadline:
            time.sleep(0.01)

    # --- the reader thread ---------------------------------------------------
    def _run(self) -> None:
        next_beat = 0.0
        while not self._closed:
            watched = [p for p in self.peers if p.open]
            if not watched:
                return
            now = time.monotonic()
            if now >= next_beat:
                self.send("hb")
                next_beat = now + HEARTBEAT
            try:
                ready = select.select([p.sock for p in watched], [], [], HEARTBEAT / 4)[0]
            except (OSError, ValueError):
                return  # closed under us: the process is ending
            for p in watched:
                if p.sock in ready:
                    self._read(p)
            # Silence is judged by the clock read before the select: were this process
            # itself stopped (or this thread kept from the GIL) after it, what the peer
            # sent meanwhile is read by the next select before the peer is blamed.
            for p in watched:
                if p.open and p.bye is None and now - p.last_seen > self.timeout:
                    self._fail(p, f"has not answered for {self.timeout:.0f} s (stopped or "
                                  f"frozen; {p.who})")

    def _read(self, p: _Peer) -> None:
        try:
            data = p.sock.recv(65536)
        except OSError:
            data = b""
        if not data:
            if p.bye is None and p.error is None:
                self._fail(p, f"died (killed or crashed; {p.who})")
            p.open = False
            return
        p.last_seen = time.monotonic()
        p.buf += data
        while b"\n" in p.buf:
            raw, p.buf = p.buf.split(b"\n", 1)
            kind, _, rest = raw.decode("utf-8", "replace").partition(" ")
            if kind == "error":
                p.error = rest
                self._fail(p, f"failed: {rest}")
            elif kind == "bye":
                p.bye = int(rest or 0)
                self.on_bye(p.rank, p.bye)

    def _fail(self, p: _Peer, what: str) -> None:
        """Report p once (its connection stays open for a last ``bye``)."""
        if p.open and not self._closed:
            p.open = False
            self.on_failure(p.rank, what)
