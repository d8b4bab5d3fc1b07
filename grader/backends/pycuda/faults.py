"""A CUDA error of a launch, a copy or a synchronisation on the GPU, told in plain words as a failure
kind of :data:`grader.core.kinds.KINDS`, and whether it may have lost the context."""

from __future__ import annotations

from grader.core.errors import KernelError

__all__ = ["FAULTS", "kernel_fault"]

#: CUDA errors of a launch: (text in the driver's message, kind, what it means in plain words).
FAULTS = (
    ("illegal memory access", "illegal-address", "an illegal memory access (a read or write of memory that is not "
                                                 "allocated: usually an index past the end of an array, or a wild "
                                                 "pointer)"),
    # CUDA_ERROR_INVALID_ADDRESS_SPACE: what a store far past an output buffer gives.
    ("not supported on global/shared address space", "illegal-address",
     "an access outside the memory it may reach (an address far past an array, or a wild pointer)"),
    ("misaligned address", "misaligned", "a misaligned access (an address that is not a multiple of the size read "
                                         "or written)"),
    ("illegal instruction", "illegal-instruction", "an illegal instruction (often undefined behaviour, or __trap())"),
    ("assert", "assert", "a device assert() failed"),
    ("hardware stack error", "stack-overflow", "a thread overflowed its stack (a large local array or deep "
                                               "recursion)"),
    ("launch timed out", "timeout", "the kernel ran too long and the driver stopped it"),
    ("too many resources", "launch-refused", "the launch needs more registers or shared memory than a block may "
                                             "have"),
    ("unspecified launch failure", "launch-failure", "the kernel stopped with an unspecified launch failure (an "
                                                     "access outside memory, or __trap())"),
)


def kernel_fault(kernel: str, exc: Exception) -> tuple[KernelError, bool]:
    """The CUDA error ``exc`` that stopped ``kernel`` (a kernel's name, or what ran: ``the kernel``) as a
    KernelError of the first row of :data:`FAULTS` whose text its message holds (else ``cuda-error``,
    the driver's own words quoted), and whether the context may be lost: a fault kind
    (:data:`grader.core.kinds.FAULT_KINDS`), a timeout, or an error the driver does not explain."""
    text = str(exc)
    low = text.lower()
    for needle, kind, words in FAULTS:
        if needle in low:
            break
    else:
        kind, words = "cuda-error", f"the CUDA driver reported an error ({text})"
    from grader.core.kinds import FAULT_KINDS
    lost = kind in FAULT_KINDS or kind in ("timeout", "cuda-error")
    return KernelError(f"{kernel} stopped on the GPU: {words}", kind=kind), lost
