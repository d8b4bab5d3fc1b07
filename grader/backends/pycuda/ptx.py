"""The grader's own kernels on a GPU, as PTX the driver compiles when it loads them (no nvcc):
the shared-memory fill before each case (:data:`FILL_PTX`), the checks of a run where it ran
(:data:`CHECK_PTX`) and the clock warm-up before a timed run (:data:`HOLD_CLOCKS_PTX`), launched by
:class:`grader.backends.pycuda.backend.PyCudaBackend`, and loaded once a context (:func:`fill_kernel`,
:func:`check_kernels`, :func:`hold_clocks`: kept in its
:class:`~grader.backends.pycuda.memory.Scratch`). Written by hand for PTX ISA 7.0 and sm_70, so that
any Volta-or-later GPU and driver loads them; ``tests/backends/test_device_checks.py`` assembles them with
ptxas where the CUDA toolkit is."""

from __future__ import annotations

import numpy as np

__all__ = ["CHECK_PTX", "FILL_PTX", "HOLD_CLOCKS_PTX", "check_kernels", "fill_kernel", "hold_clocks"]

#: The kernel :meth:`grader.backends.pycuda.backend.PyCudaBackend.poison_shared` launches: each
#: thread of a block writes the pattern to every blockDim.x-th word of the block's dynamic shared
#: memory.
FILL_PTX = """
.version 7.0
.target sm_70
.address_size 64
.extern .shared .align 16 .b8 fill_words[];
.visible .entry scangrade_fill_shared(.param .u32 pattern, .param .u32 words)
{
    .reg .pred %p<2>;
    .reg .b32 %r<8>;
    ld.param.u32 %r1, [pattern];
    ld.param.u32 %r2, [words];
    mov.u32 %r3, %tid.x;
    mov.u32 %r4, %ntid.x;
    mov.u32 %r5, fill_words;
LOOP:
    setp.ge.u32 %p1, %r3, %r2;
    @%p1 bra END;
    shl.b32 %r6, %r3, 2;
    add.s32 %r7, %r5, %r6;
    st.shared.u32 [%r7], %r1;
    add.s32 %r3, %r3, %r4;
    bra LOOP;
END:
    ret;
}
"""


#: The start of a grid-stride loop in :data:`CHECK_PTX`'s kernels: ``%rd5`` the thread's first index,
#: ``%rd7`` the stride (every thread of the grid).
GRID_STRIDE_PTX = """
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mov.u32 %r5, %nctaid.x;
    mul.wide.u32 %rd5, %r2, %r3;
    cvt.u64.u32 %rd6, %r4;
    add.u64 %rd5, %rd5, %rd6;
    mul.wide.u32 %rd7, %r5, %r3;
"""


#: The kernel :func:`grader.backends.pycuda.timing.time_interleaved_ms` queues before
#: a timed run where the GPU may have lowered its clocks (:class:`grader.backends.base.ClockWarmup`):
#: every thread reads the GPU's global timer until ``ns`` nanoseconds have passed since it started.
HOLD_CLOCKS_PTX = """
.version 7.0
.target sm_70
.address_size 64
.visible .entry scangrade_hold_clocks(.param .u64 ns)
{
    .reg .pred %p<2>;
    .reg .b64 %rd<5>;
    ld.param.u64 %rd1, [ns];
    mov.u64 %rd2, %globaltimer;
SPIN:
    mov.u64 %rd3, %globaltimer;
    sub.u64 %rd4, %rd3, %rd2;
    setp.lt.u64 %p1, %rd4, %rd1;
    @%p1 bra SPIN;
    ret;
}
"""


#: The checks of a run where it ran (``PyCudaBackend.scan_check`` and ``PyCudaBackend.digest``): the
#: same arithmetic as :meth:`grader.backends.base.Backend.scan_check` and
#: :meth:`grader.backends.base.Backend.digest` on the host, each a grid-stride loop with one atomic
#: per thread.
CHECK_PTX = """
.version 7.0
.target sm_70
.address_size 64
.visible .entry scangrade_scan_check(.param .u64 p_out, .param .u64 p_in, .param .u64 p_n, .param .u32 p_inclusive,
                                     .param .u32 p_float, .param .u64 p_first)
{{
    .reg .pred %p<8>;
    .reg .b32 %r<12>;
    .reg .f32 %f<4>;
    .reg .f64 %fd<6>;
    .reg .b64 %rd<16>;
    ld.param.u64 %rd1, [p_out];
    ld.param.u64 %rd2, [p_in];
    ld.param.u64 %rd3, [p_n];
    ld.param.u32 %r1, [p_inclusive];
    ld.param.u32 %r10, [p_float];
    ld.param.u64 %rd4, [p_first];
    cvta.to.global.u64 %rd1, %rd1;
    cvta.to.global.u64 %rd2, %rd2;
    cvta.to.global.u64 %rd4, %rd4;
{grid_stride}    setp.ne.u32 %p3, %r1, 0;
    setp.ne.u32 %p4, %r10, 0;
LOOP:
    setp.ge.u64 %p1, %rd5, %rd3;
    @%p1 bra END;
    shl.b64 %rd8, %rd5, 2;
    add.u64 %rd9, %rd1, %rd8;
    ld.global.u32 %r6, [%rd9];
    add.u64 %rd10, %rd2, %rd8;
    mov.u32 %r7, 0;
    mov.u32 %r8, 0;
    setp.eq.u64 %p2, %rd5, 0;
    @!%p2 ld.global.u32 %r7, [%rd9+-4];
    @%p3 ld.global.u32 %r8, [%rd10];
    or.pred %p6, %p3, %p2;
    @!%p6 ld.global.u32 %r8, [%rd10+-4];
    @%p4 bra FLOAT;
    add.u32 %r9, %r7, %r8;
    setp.eq.u32 %p5, %r6, %r9;
    bra CMP;
FLOAT:
    mov.b32 %f1, %r6;
    mov.b32 %f2, %r7;
    mov.b32 %f3, %r8;
    cvt.f64.f32 %fd1, %f1;
    cvt.f64.f32 %fd2, %f2;
    cvt.f64.f32 %fd3, %f3;
    add.rn.f64 %fd4, %fd2, %fd3;
    setp.eq.f64 %p5, %fd1, %fd4;
CMP:
    @%p5 bra NEXT;
    atom.global.min.u64 %rd11, [%rd4], %rd5;
NEXT:
    add.u64 %rd5, %rd5, %rd7;
    bra LOOP;
END:
    ret;
}}
.visible .entry scangrade_digest(.param .u64 p_words, .param .u64 p_n, .param .u64 p_salt, .param .u64 p_sum)
{{
    .reg .pred %p<2>;
    .reg .b32 %r<8>;
    .reg .b64 %rd<20>;
    ld.param.u64 %rd1, [p_words];
    ld.param.u64 %rd2, [p_n];
    ld.param.u64 %rd3, [p_salt];
    ld.param.u64 %rd4, [p_sum];
    cvta.to.global.u64 %rd1, %rd1;
    cvta.to.global.u64 %rd4, %rd4;
{grid_stride}    mov.u64 %rd8, 0;
LOOP:
    setp.ge.u64 %p1, %rd5, %rd2;
    @%p1 bra DONE;
    shl.b64 %rd9, %rd5, 2;
    add.u64 %rd10, %rd1, %rd9;
    ld.global.u32 %r6, [%rd10];
    cvt.u64.u32 %rd11, %r6;
    shl.b64 %rd11, %rd11, 32;
    xor.b64 %rd11, %rd11, %rd5;
    xor.b64 %rd11, %rd11, %rd3;
    shr.u64 %rd12, %rd11, 30;
    xor.b64 %rd11, %rd11, %rd12;
    mul.lo.u64 %rd11, %rd11, -4658895280553007687;
    shr.u64 %rd12, %rd11, 27;
    xor.b64 %rd11, %rd11, %rd12;
    mul.lo.u64 %rd11, %rd11, -7723592293110705685;
    shr.u64 %rd12, %rd11, 31;
    xor.b64 %rd11, %rd11, %rd12;
    add.u64 %rd8, %rd8, %rd11;
    add.u64 %rd5, %rd5, %rd7;
    bra LOOP;
DONE:
    atom.global.add.u64 %rd13, [%rd4], %rd8;
    ret;
}}
""".format(grid_stride=GRID_STRIDE_PTX.lstrip("\n"))


def fill_kernel(cuda, device, scratch):
    """``(kernel, most, blocks)``: :data:`FILL_PTX`'s kernel, loaded once in ``scratch``'s context and
    allowed the most dynamic shared memory a block may have (``most`` bytes), and as many blocks as
    ``device`` holds at once with that much each (``cuda``: ``pycuda.driver``)."""
    if scratch.fill is None:
        module = cuda.module_from_buffer(FILL_PTX.encode())
        fill = module.get_function("scangrade_fill_shared")
        most = device.get_attribute(cuda.device_attribute.MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
        fill.set_attribute(cuda.function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES, most)
        blocks = device.get_attribute(cuda.device_attribute.MULTIPROCESSOR_COUNT) * max(
            1, device.get_attribute(cuda.device_attribute.MAX_SHARED_MEMORY_PER_MULTIPROCESSOR) // most)
        scratch.fill = (module, fill, most, blocks)
    return scratch.fill[1:]


def check_kernels(cuda, device, scratch):
    """``(scan_check, digest, blocks)``: :data:`CHECK_PTX`'s kernels, loaded once in ``scratch``'s
    context, and a grid of 8 blocks per multiprocessor of ``device``."""
    if scratch.checks is None:
        module = cuda.module_from_buffer(CHECK_PTX.encode())
        blocks = 8 * device.get_attribute(cuda.device_attribute.MULTIPROCESSOR_COUNT)
        scratch.checks = (module, module.get_function("scangrade_scan_check"),
                          module.get_function("scangrade_digest"), blocks)
    return scratch.checks[1:]


def hold_clocks(cuda, device, scratch, ms: float) -> None:
    """Queue :data:`HOLD_CLOCKS_PTX` for ``ms`` milliseconds on every multiprocessor of ``device`` (4
    blocks of 256 threads each), its kernel loaded once in ``scratch``'s context (any object with a
    ``hold`` attribute, None until loaded); returns at once. The clock warm-up of a timed run
    (:class:`grader.backends.base.ClockWarmup`) and of ``bench/gpu_constants.py``'s runs."""
    if scratch.hold is None:
        module = cuda.module_from_buffer(HOLD_CLOCKS_PTX.encode())
        blocks = 4 * device.get_attribute(cuda.device_attribute.MULTIPROCESSOR_COUNT)
        scratch.hold = (module, module.get_function("scangrade_hold_clocks"), blocks)
    _, kernel, blocks = scratch.hold
    kernel(np.uint64(int(ms * 1e6)), block=(256, 1, 1), grid=(blocks, 1, 1))
