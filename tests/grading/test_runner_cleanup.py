"""A grader that is interrupted or killed leaves no worker and no student code running behind it."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import BROKEN, ROOT, write_config


def default_sigint() -> None:
    """In a grader started by a test: SIGINT as a terminal gives it, even where this test runs with
    SIGINT ignored (a job started in the background by a non-interactive shell inherits that, and
    Python then installs no KeyboardInterrupt handler)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _processes_mentioning(folder: Path) -> list[int]:
    """Live (not zombie) processes whose command line mentions ``folder`` (as given or resolved: the
    executor names its module by the resolved path, which differs where /tmp is a link)."""
    texts = {str(folder), str(folder.resolve())}
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if any(text in cmd for text in texts) and state not in ("Z", "X"):
            found.append(int(entry.name))
    return found


def _wait_for(predicate, timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.1)
    return predicate()


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc (Linux) to look for processes left behind")
@pytest.mark.parametrize("how", [signal.SIGINT, signal.SIGKILL], ids=["ctrl-c", "killed"])
def test_a_grader_stopped_while_a_kernel_hangs_leaves_no_worker_or_executor(tmp_path, how, pace):
    config = write_config(tmp_path, part_s=120, sizes={"part1_naive": [33]})
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "part1_naive.cu").write_bytes((BROKEN / "part1_hang.cu").read_bytes())
    scratch = tmp_path / "scratch"  # every temporary folder of this grading, so its processes can be found
    scratch.mkdir()
    env = {**os.environ, "TMPDIR": str(scratch),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    err = tmp_path / "stderr.txt"
    with err.open("wb") as err_f:
        grader = subprocess.Popen([sys.executable, "-m", "grader", "grade", str(sub), "--config", str(config),
                                   "--backend", "emulator", "--no-checks"], env=env, stdout=subprocess.DEVNULL,
                                  stderr=err_f, start_new_session=True, preexec_fn=default_sigint)
    try:
        # the kernel is running once the worker has reported its case started (a cold emulator cache
        # first builds the runtime: minutes on a slow machine)
        def started() -> bool:
            return any(b'"case-start"' in f.read_bytes() for f in scratch.glob("scangrade-part-*/events-*.jsonl"))
        assert _wait_for(lambda: started() or grader.poll() is not None, 300), "the kernel never started"
        assert grader.poll() is None, f"the grader ended before its kernel started (exit status {grader.returncode})"
        time.sleep(0.5)
        assert _processes_mentioning(scratch), "no worker to stop"
        os.killpg(grader.pid, how) if how == signal.SIGINT else grader.kill()
        status = grader.wait(timeout=pace.seconds(30))
        if how == signal.SIGINT:  # one line, no traceback
            assert status == 130 and "Traceback" not in err.read_text(), err.read_text()
            assert err.read_text().strip().splitlines()[-1].startswith("scangrade: interrupted: grade was stopped")
        assert _wait_for(lambda: not _processes_mentioning(scratch), pace.seconds(10)), \
            [Path(f"/proc/{p}/cmdline").read_bytes() for p in _processes_mentioning(scratch)]
    finally:
        for pid in _processes_mentioning(scratch):
            os.kill(pid, signal.SIGKILL)
        if grader.poll() is None:
            grader.kill()
