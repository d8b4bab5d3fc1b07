"""Device memory of the GPU backend: a typed view of an allocation (:class:`PyCudaArray`), and a CUDA
context's scratch (:class:`Scratch`): what the context reuses from one case, one timing and one part to
the next, a worker's pool of case buffers (:class:`PoolBlock`) among it."""

from __future__ import annotations

import numpy as np

from grader.backends.base import DeviceArray

__all__ = ["PyCudaArray", "PoolBlock", "Scratch", "POOL_MIN_BYTES", "POOL_MAX_BYTES", "POOL_GRAIN", "SCRATCH_SHARE"]


class PyCudaArray(DeviceArray):
    """A typed view of a ``cuda.mem_alloc`` allocation (or of a :class:`PoolBlock` of the worker's pool)."""

    def __init__(self, allocation, base: int, count: int, dtype: np.dtype) -> None:
        self._allocation, self._base = allocation, base  # keeps the allocation alive
        self.count, self.dtype = count, np.dtype(dtype)

    @property
    def address(self) -> int:
        return self._base

    def view(self, offset: int, count: int) -> "PyCudaArray":
        if offset < 0 or count < 0 or offset + count > self.count:
            raise ValueError(f"view [{offset}, {offset + count}) outside a buffer of {self.count} elements")
        return PyCudaArray(self._allocation, self._base + offset * self.dtype.itemsize, count, self.dtype)


#: The smallest and the largest buffer (bytes, rounded up to :data:`POOL_GRAIN`) a worker's pool keeps
#: for the next case when it is freed (:func:`grader.backends.pycuda.contexts.pool_device_memory`): the
#: driver suballocates smaller ones without a call to its resource manager, and a larger one (a 2^28
#: timing's input) is needed once a size.
POOL_MIN_BYTES = 2 * 2**20
POOL_MAX_BYTES = 256 * 2**20
#: The pool's rounding of a buffer's size: the GPU's large-page size, so sizes a few elements apart (n =
#: 2^20 - 1, 2^20, 2^20 + 1, and their guard zones) share the same blocks.
POOL_GRAIN = 2 * 2**20
#: The share of the GPU's memory one context's scratch (:class:`Scratch`: the L2 flush buffer and the
#: pool's free blocks) may hold while unused: sixteen workers a GPU then keep at most a quarter of it.
SCRATCH_SHARE = 64


class PoolBlock:
    """A pooled allocation of ``nbytes`` (a multiple of :data:`POOL_GRAIN`): when the last array viewing
    it goes, it goes back to ``scratch`` (:meth:`Scratch.give`) instead of to the driver."""

    __slots__ = ("allocation", "nbytes", "scratch")

    def __init__(self, allocation, nbytes: int, scratch: "Scratch") -> None:
        self.allocation, self.nbytes, self.scratch = allocation, nbytes, scratch

    def __int__(self) -> int:
        return int(self.allocation)

    def free(self) -> None:
        """Give the memory back to the driver now (not to the pool)."""
        self.scratch = None
        self.allocation.free()

    def __del__(self) -> None:
        if self.scratch is not None:
            self.scratch.give(self.allocation, self.nbytes)


class Scratch:
    """What a CUDA context of the grader's reuses from one case, one timing and one part to the next:
    the L2 flush buffer of the timed runs, the 8-byte cell the device checks read back, the grader's
    own PTX modules (loaded once, not once a part), and the pool's free blocks
    (:func:`grader.backends.pycuda.contexts.pool_device_memory`). Each allocation and free of a large
    buffer, and each module loaded, is a call to the driver's resource manager, whose lock is one for
    every GPU of the machine: a timed window that makes one may wait there for the other GPUs'
    workers. The scratch lives and goes with its context
    (:func:`grader.backends.pycuda.contexts.keep_context`): a context dropped after a hidden case drops
    it too.

    Memory it holds while unused stays under the GPU's memory / :data:`SCRATCH_SHARE`; an allocation
    the driver refuses for lack of memory frees every unused block and is tried once more
    (:meth:`alloc`)."""

    def __init__(self, cuda, total_bytes: int) -> None:
        self._cuda = cuda
        self.budget = total_bytes // SCRATCH_SHARE
        self.free_blocks: dict[int, list] = {}  # size -> allocations not in use
        self.held = 0  # bytes of free_blocks
        self.flush = None  # (allocation, bytes): kept where it fits the budget
        self.cell = None  # 8 bytes on the device
        self.fill = None  # the shared-memory fill's module and kernel (grader.backends.pycuda.ptx.fill_kernel)
        self.checks = None  # CHECK_PTX's module and kernels (grader.backends.pycuda.ptx.check_kernels)
        self.hold = None  # HOLD_CLOCKS_PTX's module and kernel (grader.backends.pycuda.ptx.hold_clocks)
        self.closed = False
        self.leaves_state = False  # a student's module here uses local memory or the device heap (start_grading)

    def alloc(self, nbytes: int):
        """A new allocation of ``nbytes`` from the driver; where the GPU is out of memory, once more after
        freeing the unused blocks and the flush buffer.

        Raises:
            pycuda.driver.MemoryError: the GPU cannot hold it even then.
        """
        try:
            return self._cuda.mem_alloc(nbytes)
        except self._cuda.MemoryError:
            self.drop_unused()
            return self._cuda.mem_alloc(nbytes)

    def take(self, nbytes: int):
        """A free block of exactly ``nbytes``, or None."""
        blocks = self.free_blocks.get(nbytes)
        if not blocks:
            return None
        self.held -= nbytes
        return blocks.pop()

    def give(self, allocation, nbytes: int) -> None:
        """Keep ``allocation`` (``nbytes``, no longer viewed) for the next :meth:`take`, where the budget
        allows; else it goes to the driver as it did before (its own finalizer)."""
        flush = self.flush[1] if self.flush is not None else 0
        if self.closed or self.held + nbytes + flush > self.budget:
            return
        self.free_blocks.setdefault(nbytes, []).append(allocation)
        self.held += nbytes

    def flush_buffer(self, nbytes: int):
        """``(allocation, kept)``: a buffer of ``nbytes`` for the L2 flush, the context's own where it
        fits the budget (``kept``), else a new one the caller frees."""
        if self.flush is not None and self.flush[1] == nbytes:
            return self.flush[0], True
        if self.flush is not None:
            self.flush[0].free()
            self.flush = None
        if nbytes + self.held > self.budget:
            return self.alloc(nbytes), False
        self.flush = (self.alloc(nbytes), nbytes)
        return self.flush[0], True

    def drop_unused(self) -> None:
        """Free the blocks not in use and the flush buffer now."""
        for blocks in self.free_blocks.values():
            for allocation in blocks:
                allocation.free()
        self.free_blocks.clear()
        self.held = 0
        if self.flush is not None:
            self.flush[0].free()
            self.flush = None

    def clear(self) -> None:
        """Before another submission's kernels run in this context
        (:func:`grader.backends.pycuda.contexts.start_grading`): zero the free blocks, the flush buffer
        and the cell (so no buffer the grader hands out, and no memory the next kernels could reach,
        holds what the last submission's cases left there), and drop the grader's own modules (loaded
        again when used: nothing the last kernels wrote in them stays)."""
        cuda = self._cuda
        kept = [(a, size) for size, blocks in self.free_blocks.items() for a in blocks]
        kept += [self.flush] if self.flush is not None else []
        kept += [(self.cell, 8)] if self.cell is not None else []
        for allocation, nbytes in kept:
            cuda.memset_d8(allocation, 0, nbytes)
        cuda.Context.synchronize()
        self.fill = self.checks = self.hold = None

    def close(self) -> None:
        """Before the context goes: free what is unused; blocks still in use go to the driver when freed."""
        self.drop_unused()
        if self.cell is not None:
            self.cell.free()
            self.cell = None
        self.fill = self.checks = self.hold = None
        self.closed = True


