"""A Futhark context that owns the lifetimes of its values.

futhark-ffi frees every value, and the context itself, from the garbage
collector, in no fixed order. At interpreter exit, or when an exception's
traceback keeps values alive, a value could be freed through a context that was
already gone: undefined behaviour, seen as Futhark's memory log printed from the
freed context's memory after a one-line error. Futhark's C API asks instead for
every value to be freed before ``futhark_context_free``, and for a
``futhark_context_sync`` before that.

``OwnedContext`` wraps a ``futhark_ffi.Futhark`` so that it does so: it converts
NumPy inputs to Futhark values itself and frees them as soon as the entry point
returns, keeps a weak reference to every value an entry point returns, and
``close()`` (also run when the object is collected, and at interpreter exit
before any module is torn down) syncs, frees the values still alive, then the
context. The values' destructors are counted (``_Owner``): when values outlive
``close()`` unseen (the cycle collector clears weak references before it runs
finalizers), the context is freed after the last of them.

It also keeps the host arrays of those inputs alive until the next sync: on the
GPU backends ``futhark_new_*`` only enqueues the copy to the device (opencl:
a non-blocking clEnqueueWriteBuffer), which reads the host memory later. Freed
at once, the copy read reused memory: seen on pocl as GPT-2 weights that came
back from the device as garbage in 1 of 20 make_state calls.
"""
from __future__ import annotations

import weakref

import numpy as np
from futhark_ffi import np_types

from ..errors import ContextClosed


class _Owner:
    """The context's side of its values' destructors: it counts the values alive and
    frees the context after the last one when ``close`` came first. The cycle collector
    clears weak references before it calls finalizers, so a context collected in one
    cycle with its values was closed with none of them left to free first, and they
    were freed after it, through freed memory (Futhark's memory log printed from it)."""

    def __init__(self, fut):
        self.fut = fut
        self.live = 0
        self.closed = False

    def destructor(self, free):
        """A destructor for a new value that ``free`` (futhark-ffi's futhark_free_*)
        frees, counted."""
        self.live += 1

        def destroy(ptr) -> None:
            free(self.fut.ctx, ptr)
            self.live -= 1
            if self.closed and self.live == 0:
                self.free_context()
        return destroy

    def free_context(self) -> None:
        self.fut.ffi.release(self.fut.ctx)  # futhark-ffi's destructor: futhark_context_free


def _close(owner: _Owner, values: weakref.WeakSet) -> None:
    """Sync, free every live value of ``owner.fut``, then its context and config (in that
    order; after the last value still alive elsewhere, when one is)."""
    fut = owner.fut
    ctx = getattr(fut, "ctx", None)
    if ctx is None:  # a stand-in without a context (tests)
        return
    fut.lib.futhark_context_sync(ctx)  # an error here is the context's to report, not ours
    for value in list(values):
        fut.ffi.release(value)  # runs its destructor (futhark_free_*) now
    values.clear()
    owner.closed = True
    if owner.live == 0:
        owner.free_context()


class OwnedContext:
    """A ``futhark_ffi.Futhark`` object whose values are freed before its context.

    ``call(name, *args)`` runs entry point ``name``: NumPy arrays given for array
    parameters become Futhark values that are freed when the call returns; the
    Futhark values it returns are tracked (weakly) until they die or the context
    closes. A value must not be used after its context is closed (its memory is
    gone); ``call`` on a closed context raises ContextClosed.
    """

    def __init__(self, fut):
        self.fut = fut
        self._owner = _Owner(fut)
        self._values: weakref.WeakSet = weakref.WeakSet()
        self._input_types: dict[str, list] = {}
        self._uploading: list[np.ndarray] = []  # host arrays of enqueued copies, until a sync
        self._finalizer = weakref.finalize(self, _close, self._owner, self._values)

    @property
    def closed(self) -> bool:
        return not self._finalizer.alive

    def close(self) -> None:
        """Sync, free every value still alive, then the context. Idempotent."""
        self._finalizer()

    def _types(self, name: str) -> list:
        """futhark-ffi's type record for each input parameter of entry ``name``
        (None for scalars and opaque values, which pass through unchanged)."""
        if name not in self._input_types:
            ffi, fut = self.fut.ffi, self.fut
            args = ffi.typeof(getattr(fut.lib, "futhark_entry_" + name)).args[1:]
            # futhark-ffi's split: pointers to primitives or pointers are the outputs
            inputs = [a for a in args
                      if not (a.kind == "pointer" and a.item.kind in ("primitive", "pointer"))]
            self._input_types[name] = [
                fut.types[a] if a in fut.types and hasattr(fut.types[a], "new") else None
                for a in inputs]
        return self._input_types[name]

    def call(self, name: str, *args):
        """Entry point ``name`` on ``args``; returns what futhark-ffi returns (one value
        or a tuple). Raises ContextClosed when closed, and futhark-ffi's ValueError
        (Futhark's message) when the entry point fails."""
        if self.closed:
            raise ContextClosed(f"entry point {name} called after its context was closed")
        ffi = self.fut.ffi
        temps = []
        converted = []
        for t, a in zip(self._types(name), args):
            if t is not None and not isinstance(a, ffi.CData):
                host = np.ascontiguousarray(a, dtype=np_types[t.itemtype.item.cname])
                self._uploading.append(host)  # futhark-ffi uploads from it, without a copy
                a = self.fut.to_futhark(t, host)
                temps.append(a)
            converted.append(a)
        converted.extend(args[len(converted):])  # too many arguments: futhark-ffi says so
        try:
            out = getattr(self.fut, name)(*converted)
        finally:
            for a in temps:
                ffi.release(a)
        tracked = tuple(self._track(r) if isinstance(r, ffi.CData) else r
                        for r in (out if isinstance(out, tuple) else (out,)))
        return tracked if isinstance(out, tuple) else tracked[0]

    def _track(self, value):
        """``value`` (a value an entry point returned) with futhark-ffi's destructor
        replaced by a counted one (``_Owner``), kept weakly until it dies or the context
        closes."""
        ffi = self.fut.ffi
        free = self.fut.types[ffi.typeof(value)].free
        ffi.gc(value, None)  # futhark-ffi's own destructor, removed
        value = ffi.gc(value, self._owner.destructor(free))
        self._values.add(value)
        return value

    def numpy(self, *values):
        """Copy Futhark arrays to NumPy after a sync (one array, or a tuple)."""
        if self.closed:
            raise ContextClosed("values read after their context was closed")
        out = self.fut.from_futhark(*values)
        self._uploading.clear()  # from_futhark synced: every enqueued copy is done
        return out

    def sync(self) -> None:
        """Wait for all queued device work (futhark_context_sync); nothing when closed."""
        if not self.closed and getattr(self.fut, "ctx", None) is not None:
            self.fut.lib.futhark_context_sync(self.fut.ctx)
            self._uploading.clear()
