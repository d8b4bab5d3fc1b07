"""``scangrade bench``: the reference solutions against a copy, CUB and library scans, on a GPU.

A benchmark, not a graded test. For each size n and dtype it times, with one method (CUDA events,
warm-up, the L2 emptied before every run by the config's flush write queued just before the start
event, the median of N runs):

- a device-to-device copy of the same bytes (the roofline), through the backend's ``time_copy_ms``;
- the reference solution of every part that handles n (Parts 4 and 5; one-block parts are
  skipped), compiled with the part header and launched with the grader's own plans
  (:func:`grader.grading.case.timing.timed_plan`), so the numbers are the ones grading sees;
- CUB's ``cub::DeviceScan::ExclusiveSum`` (:mod:`grader.backends.cub`), built by nvcc from
  ``grader/backends/cub_scan.cu`` into a shared library (cached under ``~/.cache/scangrade/``), loaded
  with ctypes and run on PyCUDA buffers of
  the same context, on the default stream, in the backend's own timing loop;
- ``torch.cumsum`` and ``cupy.cumsum`` when importable (their own streams, the same method);
- PyCUDA's ``InclusiveScanKernel`` (scan-then-propagate).

Every implementation's output is checked once against the sequential reference scan (after its
timed runs; outputs are poisoned before every run). Effective bandwidth counts the bytes a scan
must move, ``2 * n * sizeof(scan_t)`` (read once, write once), in GB/s (10^9 bytes/s). The rows and their
table, JSON and plot are :mod:`grader.tools.bench_table`'s.
"""

from __future__ import annotations

import ctypes
import datetime as _dt
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Sequence

import numpy as np

from grader.core.errors import CompileError, KernelError, LaunchError, UsageError
from grader.assignment.parts import PARTS
from grader.backends.cub import CubScan, build_cub, cache_dir
from grader.tools.bench_table import (COPY, CUB, CUPY, PYCUDA_SCAN, TORCH, BenchResult, BenchRow, fill_rates,
                                     format_table, size_label, to_json, write_plot)

#: Default sizes: powers of 4 from 2^16 to 2^28.
DEFAULT_SIZES = tuple(2**k for k in range(16, 29, 2))
#: The largest n accepted (kernels take ``int n``; 2^30 int32 is 4 GiB per buffer).
MAX_N = 2**30
DEFAULT_DTYPES = ("int32", "float32")
#: Parts whose reference solution the bench times: those of any n (:attr:`grader.assignment.parts.PartSpec.any_length`);
#: one-block parts cannot handle these sizes.
BENCH_PARTS = tuple(key for key, spec in PARTS.items() if spec.any_length)


# ----------------------------------------------------------------------------- arguments

_POW = re.compile(r"^2\s*(?:\^|\*\*)\s*(\d+)$")


def parse_sizes(values: Iterable[str] | None) -> tuple[int, ...]:
    """Sizes from the command line: integers or powers of two (``2^20``, ``2**20``), separated by
    commas or spaces; none: :data:`DEFAULT_SIZES`. Sorted, duplicates removed.

    Raises:
        UsageError: a size that is not a positive integer up to 2^30.
    """
    if not values:
        return DEFAULT_SIZES
    sizes = set()
    for value in values:
        for item in filter(None, (t.strip() for t in str(value).replace(",", " ").split())):
            m = _POW.match(item)
            try:
                n = 2 ** int(m.group(1)) if m else int(item)
            except ValueError:
                raise UsageError(f"--sizes: {item!r} is not a size (an integer, or a power of two as 2^k)") from None
            if not 1 <= n <= MAX_N:
                raise UsageError(f"--sizes: {item} is out of range (1 to 2^30 elements)")
            sizes.add(n)
    if not sizes:
        raise UsageError("--sizes: no size given")
    return tuple(sorted(sizes))


def parse_dtypes(value: str | None) -> tuple[str, ...]:
    """``int32,float32`` (the default) or one of them.

    Raises:
        UsageError: an unknown dtype.
    """
    if not value:
        return DEFAULT_DTYPES
    out = []
    for item in filter(None, (t.strip() for t in value.split(","))):
        if item not in DEFAULT_DTYPES:
            raise UsageError(f"--dtypes: unknown dtype {item!r}; choose from int32, float32")
        if item not in out:
            out.append(item)
    if not out:
        raise UsageError("--dtypes: no dtype given")
    return tuple(out)


def require_gpu(probe: Callable[[], tuple[bool, str]] | None = None) -> str:
    """The GPU's name, or a :class:`UsageError` saying why ``scangrade bench`` cannot run here.

    Args:
        probe: returns ``(ok, device name or why not)``; default
            :func:`grader.backends.probe_pycuda` (a child process tries to create a CUDA context).
    """
    if probe is None:
        from grader.backends import probe_pycuda
        probe = probe_pycuda
    ok, why = probe()
    if not ok:
        raise UsageError(f"scangrade bench needs a CUDA GPU through PyCUDA, and none is usable here: {why}. "
                         "The benchmark times kernels; the CPU emulator cannot.")
    return why


# ----------------------------------------------------------------------------- the bench

@dataclass
class _Case:
    n: int
    dtype: str
    x: np.ndarray
    inclusive: np.ndarray  # the reference (int32 wrapped, or float64)
    exclusive: np.ndarray


def _verify(got: np.ndarray, case: _Case, *, inclusive: bool) -> str:
    """An empty string when the output matches the reference scan (float32: exactly for exact inputs,
    else within :func:`grader.grading.case.checks.error_bound` for any order of additions), else what is wrong."""
    from grader.grading.case.checks import diagnose
    mm = diagnose(got, case.inclusive if inclusive else case.exclusive, source=case.x, inclusive=inclusive,
                  tile=max(case.n, 1))
    if mm is None:
        return ""
    return f"out[{mm.index}] = {mm.got}, expected {mm.expected}; {mm.wrong} wrong" + (f" — {mm.hint}" if mm.hint else "")


def _row(case: _Case, impl: str, times: list[float], problem: str, note: str = "") -> BenchRow:
    a = np.asarray(times, dtype=float)
    med = float(np.median(a)) if a.size else None
    spread = float((np.percentile(a, 90) - np.percentile(a, 10)) / med) if med else 0.0
    return BenchRow(case.n, case.dtype, impl, med, spread, int(a.size), verified=not problem and med is not None,
                    note=problem or note)


class _Bench:
    """State of one bench run on a PyCUDA backend."""

    def __init__(self, backend, cfg, *, runs: int, log: Callable[[str], None]) -> None:
        self.backend, self.cfg, self.runs, self.log = backend, cfg, runs, log
        self.timing = dict(warmup=cfg.timing.warmup, runs=runs, flush_bytes=cfg.timing.flush_bytes)
        self.modules: dict = {}
        self.cub: CubScan | None = None
        self.cub_problem = ""
        self.scan_kernels: dict = {}
        self.skipped: list[str] = []

    # -- setup
    def setup(self, dtypes: Sequence[str]) -> None:
        from grader.assignment.parts import SOLUTIONS
        from grader.grading.compile import compile_part
        for key in BENCH_PARTS:
            spec = PARTS[key]
            src = SOLUTIONS / spec.filename
            if key not in self.cfg.parts:
                self.skipped.append(f"{spec.label} reference: not in the config")
                continue
            if not src.is_file():
                self.skipped.append(f"{spec.label} reference: {src} not found")
                continue
            pc = self.cfg.parts[key]
            for dtype in dtypes:
                with tempfile.TemporaryDirectory(prefix="scangrade-bench-") as work:
                    try:
                        self.modules[key, dtype] = compile_part(self.backend, spec, src.read_text(), pc=pc,
                                                                dtype=dtype, workdir=Path(work))
                    except CompileError as exc:
                        self.skipped.append(f"{spec.label} reference ({dtype}): does not compile: {exc}")
        try:
            cc = self.backend.describe()["compute_capability"]
            self.log(f"building CUB's DeviceScan for sm_{cc.replace('.', '')} (cached in {cache_dir()}) ...")
            self.cub = CubScan(build_cub(cc))
        except (CompileError, OSError) as exc:
            self.cub_problem = f"not built: {exc}"
            self.skipped.append(f"{CUB}: {self.cub_problem}")
        for name, module in ((TORCH, "torch"), (CUPY, "cupy")):
            try:
                __import__(module)
            except Exception as exc:  # ImportError, or a broken install raising anything
                self.skipped.append(f"{name}: not importable ({type(exc).__name__}: {exc})")

    # -- one size
    def case(self, n: int, dtype: str) -> list[BenchRow]:
        from grader.grading.case.inputs import make_input
        from grader.assignment.parts import DTYPES
        from reference.scan import inclusive_scan
        x = make_input(self.cfg, PARTS[BENCH_PARTS[-1]], n, self.cfg.seed, DTYPES[dtype])  # one input, every row
        inc = inclusive_scan(x)
        exc = np.empty_like(inc)
        exc[0] = 0
        exc[1:] = inc[:-1]
        case = _Case(n, dtype, x, inc, exc)
        rows = [self.copy(case)]
        for key in BENCH_PARTS:
            if (key, dtype) in self.modules:
                rows.append(self.part(case, key))
        if self.cub is not None:
            rows.append(self.cub_row(case))
        for name, fn in ((TORCH, self.torch_row), (CUPY, self.cupy_row)):
            if not any(s.startswith(name + ":") for s in self.skipped):
                rows.append(self.guarded(case, name, fn))
        rows.append(self.guarded(case, PYCUDA_SCAN, self.pycuda_scan_row))
        return rows

    def guarded(self, case: _Case, name: str, fn) -> BenchRow:
        try:
            return fn(case)
        except Exception as exc:  # a library's failure is a row, not the end of the bench
            return BenchRow(case.n, case.dtype, name, None, note=f"failed: {type(exc).__name__}: {exc}")

    def copy(self, case: _Case) -> BenchRow:
        b = self.backend
        src = b.alloc(case.n, case.x.dtype)
        dst = b.alloc(case.n, case.x.dtype)
        b.to_device(case.x, src)
        b.memset32(dst, 0)
        times = b.time_copy_ms(src, dst, **self.timing)
        got = b.to_host(dst)
        problem = "" if np.array_equal(got.view(np.uint32), case.x.view(np.uint32)) else "copied bytes differ"
        return _row(case, COPY, times, problem)

    def part(self, case: _Case, key: str) -> BenchRow:
        from grader.grading.case.checks import check_run
        from grader.grading.case.timing import timed_plan
        from grader.assignment.parts import DTYPES
        spec, pc = PARTS[key], self.cfg.parts[key]
        name = f"{spec.label} reference"
        if pc.items_per_thread:
            name += f" ({pc.block_size}x{pc.items_per_thread})"
        else:
            name += f" (B={pc.block_size})"
        try:
            run, plan, d_in, before = timed_plan(self.backend, self.modules[key, case.dtype], part=spec, pc=pc,
                                                 x=case.x, dtype=DTYPES[case.dtype])
            times = self.backend.time_ms(plan.launch, before=before, **self.timing)
            expected = case.inclusive if spec.inclusive else case.exclusive
            verdict = check_run(run, plan, d_in, case.x, expected, part=spec, pc=pc, cfg=self.cfg)
            status, message = verdict.status, verdict.message
        except (KernelError, LaunchError) as exc:
            return BenchRow(case.n, case.dtype, name, None, note=f"failed: {exc}")
        return _row(case, name, times, "" if status == "pass" else message)

    def cub_row(self, case: _Case) -> BenchRow:
        from grader.assignment.plans import POISON_BITS
        b, cub, dtype = self.backend, self.cub, np.dtype(case.x.dtype)
        try:
            times, d_out = cub.time_ms(b, case.x, dtype, poison_bits=POISON_BITS, **self.timing)
        except KernelError as exc:
            return BenchRow(case.n, case.dtype, CUB, None, note=f"failed: {exc}")
        got = b.to_host(d_out)
        return _row(case, CUB, times, _verify(got, case, inclusive=False),
                    note=f"CUB {cub.version // 100000}.{cub.version // 100 % 1000}.{cub.version % 100}")

    def pycuda_scan_row(self, case: _Case) -> BenchRow:
        import pycuda.gpuarray as gpuarray
        from pycuda.scan import InclusiveScanKernel
        from pycuda.tools import DeviceMemoryPool

        from grader.backends.pycuda import PyCudaArray
        from grader.assignment.plans import POISON_BITS
        b, dtype = self.backend, np.dtype(case.x.dtype)
        if dtype not in self.scan_kernels:
            self.scan_kernels[dtype] = InclusiveScanKernel(dtype, "a+b")
        knl = self.scan_kernels[dtype]
        pool = DeviceMemoryPool()  # its temporaries come from the pool after the warm-up: no cudaMalloc timed
        try:
            xin = gpuarray.to_gpu(case.x)
            out = gpuarray.empty_like(xin)
            out_view = PyCudaArray(out.gpudata, int(out.gpudata), case.n, dtype)
            times = b.time_ms(lambda: knl(xin, out, allocator=pool.allocate),
                              before=lambda: b.memset32(out_view, POISON_BITS), **self.timing)
            got = b.to_host(out_view)
        finally:
            pool.stop_holding()
        return _row(case, PYCUDA_SCAN, times, _verify(got, case, inclusive=True))

    # torch and CuPy run in the CUDA runtime's primary context: PyCUDA's context is popped meanwhile.
    def _outside_pycuda(self, fn):
        import pycuda.driver as cuda
        ctx = cuda.Context.get_current()
        cuda.Context.pop()
        try:
            return fn()
        finally:
            ctx.push()

    def torch_row(self, case: _Case) -> BenchRow:
        def work() -> tuple[list[float], np.ndarray]:
            import torch

            from grader.assignment.plans import POISON_BITS
            poison = int(np.uint32(POISON_BITS).view(np.int32))  # fill_ on an int32 view takes a signed value
            tdtype = {"int32": torch.int32, "float32": torch.float32}[case.dtype]
            stream = torch.cuda.Stream()
            times: list[float] = []
            with torch.cuda.stream(stream):
                xin = torch.from_numpy(case.x).to("cuda")
                out = torch.empty_like(xin)
                flush = torch.empty(self.cfg.timing.flush_bytes, dtype=torch.uint8, device="cuda")
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                stream.synchronize()
                for i in range(self.timing["warmup"] + self.runs):
                    out.view(torch.int32).fill_(poison)
                    flush.fill_(i & 0xFF)  # empty the L2, queued just before the start event
                    start.record(stream)
                    torch.cumsum(xin, 0, dtype=tdtype, out=out)
                    end.record(stream)
                    end.synchronize()
                    if i >= self.timing["warmup"]:
                        times.append(start.elapsed_time(end))
                got = out.cpu().numpy()
            del xin, out, flush
            torch.cuda.empty_cache()
            return times, got
        times, got = self._outside_pycuda(work)
        return _row(case, TORCH, times, _verify(got, case, inclusive=True))

    def cupy_row(self, case: _Case) -> BenchRow:
        def work() -> tuple[list[float], np.ndarray]:
            import cupy

            from grader.assignment.plans import POISON_BITS
            poison = int(np.uint32(POISON_BITS).view(np.int32))
            stream = cupy.cuda.Stream(non_blocking=True)
            times: list[float] = []
            with stream:
                xin = cupy.asarray(case.x)
                out = cupy.empty_like(xin)
                flush = cupy.empty(self.cfg.timing.flush_bytes, dtype=cupy.uint8)
                start, end = cupy.cuda.Event(), cupy.cuda.Event()
                stream.synchronize()
                for i in range(self.timing["warmup"] + self.runs):
                    out.view(cupy.int32).fill(poison)
                    flush.fill(i & 0xFF)  # empty the L2, queued just before the start event
                    start.record(stream)
                    cupy.cumsum(xin, dtype=xin.dtype, out=out)
                    end.record(stream)
                    end.synchronize()
                    if i >= self.timing["warmup"]:
                        times.append(cupy.cuda.get_elapsed_time(start, end))
                got = cupy.asnumpy(out)
            del xin, out, flush
            cupy.get_default_memory_pool().free_all_blocks()
            return times, got
        times, got = self._outside_pycuda(work)
        return _row(case, CUPY, times, _verify(got, case, inclusive=True))


def driver_version() -> str:
    """The NVIDIA kernel driver's version (``580.159.04``), from nvidia-smi or /proc; "" if unknown."""
    try:
        proc = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=30)
        if proc.returncode == 0 and proc.stdout.strip():
            return proc.stdout.strip().splitlines()[0]
    except (OSError, subprocess.TimeoutExpired):
        pass
    try:
        m = re.search(r"Kernel Module\s+([\d.]+)", Path("/proc/driver/nvidia/version").read_text())
        return m.group(1) if m else ""
    except OSError:
        return ""


def _library_versions(bench: "_Bench") -> dict[str, str]:
    out = {}
    if bench.cub is not None:
        v = bench.cub.version
        out["cub"] = f"{v // 100000}.{v // 100 % 1000}.{v % 100}"
    for name in ("torch", "cupy"):
        mod = sys.modules.get(name)
        if mod is not None:
            out[name] = str(getattr(mod, "__version__", "?"))
    return out


def run_bench(*, cfg, sizes: Sequence[int], dtypes: Sequence[str], runs: int, command: str = "",
              log: Callable[[str], None] = print, backend=None) -> BenchResult:
    """Time every implementation at every size and dtype on the GPU (see the module's docstring).

    Args:
        cfg: a loaded :class:`grader.assignment.config.Config` (block sizes, seed, warm-up, flush bytes).
        sizes: n of each row group.  dtypes: ``int32`` and/or ``float32``.  runs: timed runs each.
        command: the command line, recorded in the result.
        log: progress lines (one per size and dtype).
        backend: a PyCUDA backend to use (default: a new one, closed at the end).

    Raises:
        BackendUnavailable: PyCUDA cannot create a context.
    """
    own = backend is None
    if own:
        from grader.backends.pycuda import PyCudaBackend
        backend = PyCudaBackend()
    try:
        info = backend.describe()
        result = BenchResult(device=info, command=command,
                             date=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                             method={"warmup": cfg.timing.warmup, "runs": runs, "flush_bytes": cfg.timing.flush_bytes,
                                     "statistic": "median", "timer": "CUDA events",
                                     "bytes_per_element": "2 * sizeof(scan_t) (read + write)"})
        bench = _Bench(backend, cfg, runs=runs, log=log)
        bench.setup(dtypes)
        result.skipped = bench.skipped
        result.device = {**info, "driver": driver_version(), **_library_versions(bench)}
        for dtype in dtypes:
            for n in sizes:
                log(f"n = {size_label(n)} {dtype} ...")
                result.rows += bench.case(n, dtype)
        fill_rates(result.rows)
        return result
    finally:
        if own:
            backend.close()


def command(*, config: Path, sizes: Sequence[str] | None = None, dtypes: str | None = None, runs: int = 30,
            json_path: str | None = None, plot_path: str | None = None, argv: Sequence[str] | None = None,
            probe: Callable[[], tuple[bool, str]] | None = None) -> int:
    """``scangrade bench``: validate the options, run the bench, print the table, write JSON and PNG.

    Returns:
        0 when every output was verified, 1 when any implementation failed.

    Raises:
        UsageError: bad options, or no usable GPU (the reason is in the message).
        ConfigError: the config is invalid.
    """
    from grader.assignment.config import load_config
    size_list = parse_sizes(sizes)
    dtype_list = parse_dtypes(dtypes)
    if runs < 1:
        raise UsageError(f"--runs must be at least 1 (got {runs})")
    cfg = load_config(config)
    gpu = require_gpu(probe)
    print(f"scangrade bench on {gpu}: sizes {', '.join(map(size_label, size_list))}; {', '.join(dtype_list)}; "
          f"median of {runs} runs after {cfg.timing.warmup} warm-ups, {cfg.timing.flush_bytes // 2**20} MiB L2 flush "
          "before each", flush=True)
    cmdline = " ".join(["scangrade", *(argv if argv is not None else sys.argv[1:])])
    result = run_bench(cfg=cfg, sizes=size_list, dtypes=dtype_list, runs=runs, command=cmdline,
                       log=lambda s: print(s, file=sys.stderr, flush=True))
    d = result.device
    libs = ", ".join(f"{k} {d[k]}" for k in ("cub", "torch", "cupy") if k in d)
    print(f"GPU: {d.get('device')} (sm {d.get('compute_capability')}), driver {d.get('driver') or '?'} "
          f"(API {d.get('driver_api')}), CUDA {d.get('cuda')}, PyCUDA {d.get('pycuda')}"
          f"{', ' + libs if libs else ''}; {result.date}")
    print(format_table(result.rows))
    for s in result.skipped:
        print(f"skipped: {s}")
    status = 0 if result.all_verified else 1
    if json_path:
        _write(json_path, to_json(result))
    if plot_path:
        why = write_plot(result, Path(plot_path))
        print(f"plot skipped: {why}" if why else f"plot written to {plot_path}")
    return status


def _write(path: str, text: str) -> None:
    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror}") from None
