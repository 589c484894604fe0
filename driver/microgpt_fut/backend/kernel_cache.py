"""Compiled GPU kernels kept between processes (Futhark's kernel cache file).

Creating a cuda context compiles every kernel of the program (NVRTC, then the
driver's PTX compiler: 144 s for microgpt's library on an H200), and an opencl
context on a GPU driver builds its program likewise. Futhark can keep the
result in a file (``futhark_context_config_set_cache_file``): later contexts
given that file load it instead of compiling. This module decides which file.

- **Where**: ``$MICROGPT_FUT_KERNEL_CACHE`` when set (``off``/``0``/``no`` turns
  the cache off), else ``$XDG_CACHE_HOME/microgpt-fut/kernels``, else
  ``~/.cache/microgpt-fut/kernels``: per user.
- **Which file**: ``<library>-<build>-<device>.bin``, keyed by a digest of the
  compiled library itself (a rebuild is a new key) and a description of the
  device and driver (another GPU or driver is a new key).
- **Never trusted blindly**: Futhark checks only a header, a size and a hash of
  the kernel source; a file whose bytes were damaged after that passes its
  checks and is loaded (a flipped byte in cached PTX would be wrong code). So a
  file is used only when its SHA-256 matches the digest written beside it
  (``.sha256``) once a context had been created from it; anything else is
  removed and the kernels are compiled again.
- **Written atomically**: a process that compiles gives Futhark a file of its
  own (``.tmp-<pid>``) and moves it into place only after its context was
  created, so two processes compiling at once, or one killed mid-write, never
  leave a partial file under the final name.
- At most ``KEEP`` files per library and device are kept (the most recently
  used); older builds' files are removed when a new one is written.
"""
from __future__ import annotations

import contextlib
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

ENV = "MICROGPT_FUT_KERNEL_CACHE"
OFF = ("0", "off", "no", "false", "none")
KEEP = 3
HEADER = b"FUTHARK\0"  # Futhark's cache.h: header, int64 file size, 8 x u32 hash, payload
_HEADER_SIZE = len(HEADER) + 8 + 32
_digests: dict[tuple[str, int, int], str] = {}


def cache_dir() -> Path | None:
    """The per-user folder of cache files, or None when ``$MICROGPT_FUT_KERNEL_CACHE``
    turns the cache off."""
    env = os.environ.get(ENV)
    if env is not None and env.strip().lower() in OFF + ("",):
        return None
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "microgpt-fut" / "kernels"


def file_digest(path: Path) -> str:
    """SHA-256 of a file's bytes (hex)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def library_digest(path: Path) -> str:
    """The first 16 hex digits of the compiled library's SHA-256 (once per process
    for a given file, size and modification time)."""
    st = path.stat()
    key = (str(path), st.st_size, st.st_mtime_ns)
    if key not in _digests:
        _digests[key] = file_digest(path)[:16]
    return _digests[key]


def looks_complete(path: Path) -> bool:
    """Whether ``path`` has Futhark's cache header and the size that header records
    (a file cut short by a crash or a full disk has not)."""
    try:
        with open(path, "rb") as f:
            head = f.read(_HEADER_SIZE)
            size = os.fstat(f.fileno()).st_size
    except OSError:
        return False
    return (len(head) == _HEADER_SIZE and head[:len(HEADER)] == HEADER
            and int.from_bytes(head[len(HEADER):len(HEADER) + 8], "little") == size)


@contextlib.contextmanager
def _locked(path: Path):
    """An exclusive advisory lock on ``path`` (created if needed) for the block;
    no lock where fcntl does not exist."""
    try:
        import fcntl
    except ImportError:  # not POSIX: the atomic rename alone
        yield
        return
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _remove(*paths: Path) -> None:
    for p in paths:
        with contextlib.suppress(OSError):
            p.unlink()


@dataclass
class KernelCache:
    """The cache file of one library on one device, for one context creation.

    ``path`` is what to give Futhark: ``final`` itself when it held verified
    kernels (``hit``), else a temporary file of this process that ``commit``
    moves into place once the context exists. ``damaged`` says a file was there
    but failed its check (and was removed).
    """

    final: Path
    path: Path
    hit: bool
    damaged: bool = False
    mtime_ns: int = 0  # of ``final`` when it was verified (hit)

    @property
    def digest_file(self) -> Path:
        return self.final.with_name(self.final.name + ".sha256")

    @property
    def lock_file(self) -> Path:
        return self.final.with_name(self.final.name + ".lock")

    def commit(self) -> bool:
        """After the context was created: move the kernels Futhark wrote into place
        with their digest, and drop this library's oldest files on this device.
        Returns whether a new file was stored. Errors (a read-only or full disk) only
        mean nothing is cached."""
        if self.hit:
            return self._refresh()
        try:
            if not looks_complete(self.path):
                _remove(self.path)
                return False
            digest = file_digest(self.path)
            with _locked(self.lock_file):
                os.replace(self.path, self.final)
                tmp = self.digest_file.with_name(f"{self.digest_file.name}.tmp-{os.getpid()}")
                tmp.write_text(digest + "\n")
                os.replace(tmp, self.digest_file)
            self._prune()
            return True
        except OSError:
            _remove(self.path)
            return False

    def _refresh(self) -> bool:
        """After a hit: mark the file most recently used; and when Futhark rewrote it
        (its driver refused the cached kernels, so it compiled them again and stored
        them in the same file), record the new file's digest. Returns whether it did."""
        try:
            with _locked(self.lock_file):
                rewritten = self.final.stat().st_mtime_ns != self.mtime_ns
                if rewritten and looks_complete(self.final):
                    self.digest_file.write_text(file_digest(self.final) + "\n")
                os.utime(self.final)  # most recently used: the last to be pruned
            return rewritten
        except OSError:
            return False

    def discard(self) -> None:
        """The context could not be created: remove this process's temporary file,
        and the cached file too when it was the one given (it may be the cause)."""
        if self.hit:
            with _locked(self.lock_file):
                _remove(self.final, self.digest_file)
        else:
            _remove(self.path)

    def _prune(self) -> None:
        """Keep the KEEP most recently used files of this library and device."""
        target, _, device = self.final.stem.rsplit("-", 2)
        same = sorted(self.final.parent.glob(f"{target}-*-{device}.bin"),
                      key=lambda p: p.stat().st_mtime, reverse=True)
        for old in same[KEEP:]:
            if old.stem.rsplit("-", 2)[0] == target:  # not a library whose name extends ours
                _remove(old, old.with_name(old.name + ".sha256"))


def open_cache(target: str, library: Path, device: str) -> KernelCache | None:
    """The cache of library file ``library`` (build.sh's ``target``, e.g. "cuda" or
    "gpt2_cuda") on the device described by ``device``; None when the cache is off,
    or its folder cannot be created or written, or its path is not ASCII.

    A file there is verified against its digest: one that fails is removed
    (``damaged``) and a fresh temporary path is returned, as on a miss.
    """
    folder = cache_dir()
    if folder is None:
        return None
    try:
        folder.mkdir(parents=True, exist_ok=True)
        if not os.access(folder, os.W_OK | os.X_OK):
            return None
        build = library_digest(library)
    except OSError:
        return None
    dev = hashlib.sha256(device.encode()).hexdigest()[:12]
    final = folder / f"{target}-{build}-{dev}.bin"
    if not str(final).isascii():  # futhark-ffi passes the path as ASCII
        return None
    cache = KernelCache(final, final.with_name(f"{final.name}.tmp-{os.getpid()}"), False)
    if not final.exists():
        return cache
    try:
        with _locked(cache.lock_file):
            recorded = cache.digest_file.read_text().strip() if cache.digest_file.exists() else ""
            mtime_ns = final.stat().st_mtime_ns
            ok = looks_complete(final) and recorded == file_digest(final)
            if not ok:
                _remove(final, cache.digest_file)
    except OSError:
        return cache
    if ok:
        return KernelCache(final, final, True, mtime_ns=mtime_ns)
    cache.damaged = True
    return cache
