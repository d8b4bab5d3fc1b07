"""``scangrade bench``: options, the usage error without a GPU, the table and JSON from fake
timings; on a GPU, a small real bench (every output verified, CUB present)."""

from __future__ import annotations

import json

import pytest

from grader import cli
from grader.backends import cub
from grader.tools import bench, bench_table
from grader.tools.bench_table import COPY, CUB, BenchResult, BenchRow
from grader.assignment.config import load_config
from grader.core.errors import UsageError
from tests.conftest import ROOT, gpu_available


def test_default_sizes_are_powers_of_four_from_2_16_to_2_28():
    assert bench.parse_sizes(None) == tuple(2**k for k in (16, 18, 20, 22, 24, 26, 28))


@pytest.mark.parametrize("values, expected", [
    (["2^20"], (2**20,)),
    (["2**16,2^20", "1000"], (1000, 2**16, 2**20)),
    (["65536", "2^16"], (2**16,)),
])
def test_parse_sizes(values, expected):
    assert bench.parse_sizes(values) == expected


@pytest.mark.parametrize("values", [["0"], ["2^31"], ["lots"], [","]])
def test_parse_sizes_rejects(values):
    with pytest.raises(UsageError, match="--sizes"):
        bench.parse_sizes(values)


def test_parse_dtypes():
    assert bench.parse_dtypes(None) == ("int32", "float32")
    assert bench.parse_dtypes("float32, int32,float32") == ("float32", "int32")
    with pytest.raises(UsageError, match="float64"):
        bench.parse_dtypes("float64")


def test_cli_parses_bench_options():
    args = cli.build_parser().parse_args(["bench", "--sizes", "2^16", "2^20", "--dtypes", "int32", "--runs", "5",
                                          "--json", "b.json", "--plot", "b.png"])
    assert (args.command, args.sizes, args.dtypes, args.runs, args.json, args.plot) == \
        ("bench", ["2^16", "2^20"], "int32", 5, "b.json", "b.png")
    assert cli.build_parser().parse_args(["bench"]).runs == 30


def test_without_a_gpu_bench_is_a_usage_error_naming_the_reason(monkeypatch, capsys):
    monkeypatch.setattr("grader.backends.probe_pycuda", lambda: (False, "no CUDA device"))
    assert cli.main(["bench", "--config", str(ROOT / "config.yaml"), "--sizes", "2^16"]) == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert "needs a CUDA GPU" in err and "no CUDA device" in err


@pytest.mark.skipif(gpu_available()[0], reason="this machine has a GPU")
def test_without_a_gpu_here_the_real_probe_refuses(capsys):
    assert cli.main(["bench", "--config", str(ROOT / "config.yaml")]) == cli.EXIT_USAGE
    assert "needs a CUDA GPU" in capsys.readouterr().err


def test_bad_options_are_usage_errors_before_any_gpu_probe(capsys):
    def probe():
        raise AssertionError("probed")
    with pytest.raises(UsageError, match="--runs"):
        bench.command(config=ROOT / "config.yaml", runs=0, probe=probe)
    with pytest.raises(UsageError, match="--dtypes"):
        bench.command(config=ROOT / "config.yaml", dtypes="int64", probe=probe)


def _fake() -> BenchResult:
    rows = [BenchRow(2**28, "int32", COPY, 0.714, runs=30, verified=True),
            BenchRow(2**28, "int32", "Part 5 reference (256x24)", 0.8, runs=30, verified=True),
            BenchRow(2**28, "int32", CUB, 0.877, runs=30, verified=True),
            BenchRow(2**28, "int32", "torch.cumsum", None, note="failed: RuntimeError: boom")]
    bench_table.fill_rates(rows)
    return BenchResult(rows=rows, skipped=["cupy.cumsum: not importable"], device={"device": "Fake GPU"},
                       command="scangrade bench", date="2026-11-22T00:00:00+00:00", method={"runs": 30})


def test_rates_from_fake_timings():
    rows = _fake().rows
    assert rows[0].gbps == pytest.approx(2 * 2**28 * 4 / 0.714e-3 / 1e9)  # about 3008 GB/s
    assert rows[0].copy_fraction == pytest.approx(1.0)
    assert rows[2].copy_fraction == pytest.approx(0.714 / 0.877)
    assert rows[3].gbps is None and rows[3].copy_fraction is None


def test_table_from_fake_timings():
    table = bench_table.format_table(_fake().rows)
    lines = table.splitlines()
    assert lines[0].split() == ["n", "dtype", "implementation", "median", "ms", "GB/s", "%", "copy", "verified"]
    cub = next(line for line in lines if CUB in line)
    assert "2^28" in cub and "0.8770" in cub and "81.4" in cub and cub.endswith("yes")
    assert "NO (failed: RuntimeError: boom)" in table
    md = bench_table.format_markdown(_fake().rows)
    assert "| 2^28 | int32 | CUB DeviceScan::ExclusiveSum | 0.8770 | 2449 | 81.4 | yes |" in md


def test_json_from_fake_timings():
    doc = json.loads(bench_table.to_json(_fake()))
    assert doc["device"]["device"] == "Fake GPU" and doc["command"] == "scangrade bench"
    assert doc["all_verified"] is False and doc["skipped"] == ["cupy.cumsum: not importable"]
    assert [r["impl"] for r in doc["rows"]][:3] == [COPY, "Part 5 reference (256x24)", CUB]
    assert doc["rows"][2]["median_ms"] == 0.877 and doc["rows"][2]["n"] == 2**28


def test_plot_is_written_or_skipped_with_a_reason(tmp_path):
    why = bench_table.write_plot(_fake(), tmp_path / "b.png")
    if why is None:
        assert (tmp_path / "b.png").stat().st_size > 0
    else:
        assert "matplotlib" in why


def test_cub_source_has_the_c_entry_point():
    text = cub.CUB_SOURCE.read_text()
    assert 'extern "C"' in text and "scangrade_cub_exclusive_sum" in text and "cub::DeviceScan::ExclusiveSum" in text


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available()[0], reason=f"no usable CUDA GPU: {gpu_available()[1]}")
def test_small_bench_on_the_gpu(tmp_path):
    cfg = load_config(ROOT / "config.yaml")
    result = bench.run_bench(cfg=cfg, sizes=[2**16, 2**20], dtypes=["int32", "float32"], runs=5,
                             log=lambda s: None)
    assert result.rows
    bad = [(r.n, r.dtype, r.impl, r.note) for r in result.rows if not r.verified]
    assert not bad, bad
    for n in (2**16, 2**20):
        for dtype in ("int32", "float32"):
            impls = {r.impl for r in result.rows if r.n == n and r.dtype == dtype}
            assert {COPY, CUB} <= impls and any(i.startswith("Part 4") for i in impls) \
                and any(i.startswith("Part 5") for i in impls), impls
    assert all(r.gbps and r.copy_fraction for r in result.rows)
    json.loads(bench_table.to_json(result))
