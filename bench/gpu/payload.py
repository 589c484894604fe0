"""The GPU run's carried folder (``bench/gpu/payload``): what the GPU machine lacks.

It holds the CUDA C that ``futhark cuda --library`` generated here for each
library (``<target>/microgpt_<target>.{c.xz,h,json}``: the C, mostly kernel
source in string literals, is 18 MB and more, 1 MB compressed), wheels of the Python
packages that machine's image lacks (``wheels/``), the training data
(``data/``) and ``MANIFEST.json``: the commit and Futhark version it was made
from, a digest of its sources (futhark/*.fut, targets.txt), and every file's SHA-256
and size. ``bench/gpu/prepare`` writes it (``python -m bench.gpu.payload write``);
``bench/gpu/run`` checks it (``verify``) before using it.

``python -m bench.gpu.payload write DIR VERSION`` / ``verify DIR``.
"""
from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import time
from pathlib import Path

from .. import REPO_ROOT
from .build import TABLE, targets_of

TARGETS = targets_of("cuda")  # targets.txt's cuda libraries, as bench/gpu/prepare generates
WHEELS = ("cffi", "pycparser", "futhark_ffi")  # what the GPU machine's image lacks
LIMIT_BYTES = 48 * 2**20  # the device tool carries 64 MiB with the working tree


class PayloadError(RuntimeError):
    """The payload is missing, incomplete or damaged; the message is one line."""


def sha256(path: Path) -> str:
    """SHA-256 of a file's bytes (hex). The same as microgpt_fut.backend.kernel_cache.file_digest,
    kept here on purpose: ``verify`` runs in bench/gpu/run's runner process, under the
    GPU machine's bare python3, whose sys.path has the repository root but not driver/
    (only the runner's child processes get driver/ on PYTHONPATH)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def source_digest(root: Path = REPO_ROOT) -> str:
    """Digest of what the libraries are generated from: futhark/*.fut, and targets.txt
    (each target's layout)."""
    h = hashlib.sha256()
    for p in [*sorted((root / "futhark").glob("*.fut")), root / TABLE.name]:
        h.update(p.name.encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def _git_commit(root: Path) -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True,
                             text=True, timeout=10)
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "futhark", "bench",
                                "driver"], cwd=root, capture_output=True, text=True, timeout=10)
        return out.stdout.strip() + (" (with uncommitted changes)" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def files(payload: Path) -> list[Path]:
    """Every file of the payload but the manifest, sorted."""
    return sorted(p for p in payload.rglob("*") if p.is_file() and p.name != "MANIFEST.json")


def write_manifest(payload: Path, futhark_version: str, root: Path = REPO_ROOT) -> dict:
    """Write MANIFEST.json for the files now in ``payload``; raises PayloadError when
    something the run needs is missing or the whole is over LIMIT_BYTES."""
    manifest = {
        "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "git_commit": _git_commit(root),
        "futhark": futhark_version,
        "source_digest": source_digest(root),
        "targets": sorted(TARGETS),
        "files": {str(p.relative_to(payload)): {"sha256": sha256(p), "bytes": p.stat().st_size}
                  for p in files(payload)},
    }
    manifest["bytes"] = sum(f["bytes"] for f in manifest["files"].values())
    check(payload, manifest)
    (payload / "MANIFEST.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


def check(payload: Path, manifest: dict) -> None:
    """Raise PayloadError unless ``manifest`` lists everything the run needs, under
    the size limit."""
    names = set(manifest["files"])
    need = [f"{t}/microgpt_{t}.{ext}" for t in TARGETS for ext in ("c.xz", "h", "json")]
    missing = [n for n in need if n not in names]
    missing += [f"wheels/{w}-*.whl" for w in WHEELS
                if not any(n.startswith(f"wheels/{w}-") and n.endswith(".whl") for n in names)]
    if missing:
        raise PayloadError(f"{payload}: missing {', '.join(missing)} (run bench/gpu/prepare)")
    if manifest["bytes"] > LIMIT_BYTES:
        raise PayloadError(f"{payload} holds {manifest['bytes'] / 2**20:.1f} MiB, more than the "
                           f"{LIMIT_BYTES / 2**20:.0f} MiB it may take of the 64 MiB carried")


def verify(payload: Path, root: Path = REPO_ROOT) -> dict:
    """The manifest, after checking that every file it lists is there unchanged and
    that its CUDA C was generated from this checkout's futhark/*.fut; raises
    PayloadError naming the first problem."""
    path = payload / "MANIFEST.json"
    if not path.exists():
        raise PayloadError(f"{path} is missing: run bench/gpu/prepare here first, and name "
                           "bench/gpu/payload in the device call's carry list")
    try:
        manifest = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise PayloadError(f"{path} is not a manifest: {e}") from None
    for name, meta in manifest["files"].items():
        p = payload / name
        if not p.is_file():
            raise PayloadError(f"{p} is missing (listed in {path.name})")
        if p.stat().st_size != meta["bytes"] or sha256(p) != meta["sha256"]:
            raise PayloadError(f"{p} differs from {path.name}: run bench/gpu/prepare again")
    check(payload, manifest)
    if manifest.get("source_digest") != source_digest(root):
        raise PayloadError(f"{payload}'s CUDA C was generated from other futhark/*.fut sources "
                           "or targets.txt than this checkout's: run bench/gpu/prepare again")
    return manifest


def main(argv: list[str]) -> int:
    """``write DIR FUTHARK_VERSION`` | ``verify DIR``."""
    if len(argv) < 2 or argv[0] not in ("write", "verify"):
        print("usage: python -m bench.gpu.payload write DIR VERSION | verify DIR",
              file=sys.stderr)
        return 2
    payload = Path(argv[1])
    try:
        if argv[0] == "write":
            m = write_manifest(payload, argv[2] if len(argv) > 2 else "unknown")
            print(f"{payload}: {len(m['files'])} files, {m['bytes'] / 2**20:.1f} MiB "
                  f"(limit {LIMIT_BYTES / 2**20:.0f} MiB), commit {m['git_commit']}")
        else:
            m = verify(payload)
            print(f"{payload}: {len(m['files'])} files as listed, made {m['created']} from "
                  f"commit {m['git_commit']} with Futhark {m['futhark']}")
    except PayloadError as e:
        print(f"payload: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
