"""A worker's CUDA contexts kept from one backend to the next, and its pool of case buffers: what a
process that grades part after part (:func:`grader.grading.worker.main.serve`) turns on, and how a
kept context is cleared or dropped before another submission's kernels run in it.

A context is kept with its scratch (:class:`grader.backends.pycuda.memory.Scratch`), by device
ordinal, current on the thread that made it; :class:`grader.backends.pycuda.backend.PyCudaBackend`
takes one when it starts (:func:`take_kept`) and offers its own when it closes (:func:`offer`)."""

from __future__ import annotations

__all__ = ["keep_context", "pool_device_memory", "pools", "take_kept", "offer", "drop", "start_grading",
           "release_kept_contexts", "kept_context_works"]

#: Whether a closed backend keeps its context for the next one of this process (:func:`keep_context`).
_KEEP = False
#: The contexts kept, by device ordinal: ``(context, scratch)``, current on the thread that made them.
_KEPT: dict = {}
#: Whether buffers of this process's backends come from their context's pool (:func:`pool_device_memory`).
_POOL = False


def keep_context() -> None:
    """From now on, a closed backend leaves its CUDA context current, and the next backend made in
    this process on that device takes it, instead of making its own: a worker that grades a
    submission's parts one after the other (:func:`grader.grading.worker.main.serve`) makes one
    context, not one per part (the driver makes contexts one at a time: docs/throughput.md). A
    context a fault lost (:attr:`~grader.backends.base.Backend.broken`) is not kept, nor one in which a
    hidden case ran (:attr:`~grader.backends.base.Backend.ran_hidden`: a new context keeps the next part
    from memory that held the private inputs, as a new process's did)."""
    global _KEEP
    _KEEP = True


def pool_device_memory() -> None:
    """From now on, a buffer of :data:`~grader.backends.pycuda.memory.POOL_MIN_BYTES` to
    :data:`~grader.backends.pycuda.memory.POOL_MAX_BYTES` that a case frees is kept by its context
    (:class:`~grader.backends.pycuda.memory.Scratch`) for the next case of the same size, not given back
    to the driver: a worker's cases allocate the same sizes over and over, and each large allocation
    and free takes the driver's resource-manager lock, one for every GPU of the machine. Only a grading
    worker pools; compute-sanitizer's replay (:mod:`grader.grading.sanitizer_child`) lays its buffers
    out between gaps it frees, which a reused block would not keep. A block is reused only in its own
    context, so a context dropped after a hidden case (:func:`keep_context`) takes its pool with it."""
    global _POOL
    _POOL = True


def pools() -> bool:
    """Whether this process pools its case buffers (:func:`pool_device_memory` was called)."""
    return _POOL


def take_kept(ordinal: int):
    """The ``(context, scratch)`` kept for device ``ordinal``, no longer kept, or None."""
    return _KEPT.pop(ordinal, None)


def offer(ordinal: int, context, scratch) -> bool:
    """Keep a closing backend's ``context`` (still current) and its ``scratch`` for the next backend on
    device ``ordinal``, where this process keeps contexts (:func:`keep_context`). The caller offers only
    a context it may keep (not lost, no hidden case ran in it).

    Returns:
        Whether it is kept (else the caller drops it: :func:`drop`).
    """
    if not _KEEP:
        return False
    _KEPT[ordinal] = (context, scratch)
    return True


def drop(context, scratch, *, lost: bool = False) -> None:
    """Pop and detach ``context``, its ``scratch`` closed first unless the context is ``lost`` (a
    fault lost it: nothing can be freed in it)."""
    if not lost:
        scratch.close()
    context.pop()
    context.detach()


def start_grading() -> None:
    """Before a worker that kept its context (:func:`keep_context`) runs another submission's jobs (a
    batch's next submission, :func:`grader.grading.worker.main.serve`): each kept context is cleared
    (:meth:`grader.backends.pycuda.memory.Scratch.clear`), or, where a module of the last submission used
    local memory or the device heap, which no call clears, dropped (the next backend makes a new one, as
    a new process would). Memory the grader freed to the driver may hold the last submission's cases'
    data when the driver hands it out again; every buffer the grader hands a kernel is poisoned or
    written first (:class:`grader.assignment.plans.Run`), so a kernel reaches the rest only by an
    out-of-bounds access (docs/security.md)."""
    for ordinal, (ctx, scratch) in list(_KEPT.items()):
        if not scratch.leaves_state:
            try:
                scratch.clear()
                continue
            except Exception:  # noqa: BLE001 - any driver error: the context is not to be trusted, dropped
                pass
        del _KEPT[ordinal]
        drop(ctx, scratch)


def release_kept_contexts() -> None:
    """Pop and detach every context kept (:func:`keep_context`): before the process exits, as PyCUDA
    aborts a process that ends with a context still current."""
    while _KEPT:
        _, (ctx, scratch) = _KEPT.popitem()
        drop(ctx, scratch)


def kept_context_works() -> bool:
    """Whether every context kept (:func:`keep_context`) still runs work: its stream synchronizes
    without an error (a fault the grader did not see would show here). True where none is kept."""
    for ctx, _ in list(_KEPT.values()):
        try:
            ctx.synchronize()
        except Exception:  # noqa: BLE001 - any driver error: the context is not to be trusted
            return False
    return True
