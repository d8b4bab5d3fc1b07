"""``scangrade release``: the student release, built from this checkout with nothing private in it.

What students get (a folder ``OUT``, and with ``zip_archive`` also ``OUT.zip`` holding ``OUT/``)::

    OUT/README.md        short: install, ``scangrade check``, where the handout is (generated)
    OUT/assignment/      the handout (assignment/README.md) and one .cu template per part
    OUT/grader/          the grader package, as in this checkout (no caches, no build outputs)
    OUT/reference/       __init__.py and scan.py only: the sequential reference scan the grader imports
    OUT/config.yaml      the public configuration (sizes, points, timing thresholds)
    OUT/pyproject.toml   so that ``pip install OUT`` (or ``pip install -e OUT``) installs ``scangrade``;
                         the checkout's, without pytest's ``testpaths`` (the release has no tests/)
    OUT/Makefile         ``make check``: a venv with the grader and pytest installed, then the self-check
                         (grader/release_files/Makefile, with the set-up it shares with the checkout's)
    OUT/.gitignore       the venv, the install's and Python's caches and build folder, results
    OUT/scan.ipynb       the notebook for Jupyter and Colab: set-up, a cell per part's template, the check
                         with its report shown inline (built from the parts and the templates:
                         :mod:`grader.packaging.student_notebook`)

and nothing else: no reference solutions, no tests, no benchmarks, no docs, no ``.git``. Without
the reference solutions the grader still grades everything; on a GPU a timed part has no reference
to be compared with, so its performance is scored against the config's ``timing.absolute_ms`` for
that GPU where given, and otherwise reported as not scored (see :func:`grader.grading.case.timing.score_performance`).

Before the release is moved into place it is scanned for leaks, and refused when it has one
(:func:`find_leaks`): a file holding several lines of a reference solution, a public config with
``hidden_sizes``, and, with a private config, its text, its seed, or its hidden sizes on a line of
``config.yaml`` that mentions them as hidden. The private config itself is never copied.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import tomllib
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path

from grader.assignment.config import Config, load_config, load_private
from grader.core.errors import UsageError
from grader.assignment.parts import PARTS
from grader.packaging.student_notebook import NOTEBOOK, notebook_text

#: The checkout this grader was loaded from (the source of a release).
PROJECT_ROOT = Path(__file__).resolve().parents[2]
#: Files of the release's top folder that are not in the checkout's, from grader/release_files/: name
#: in the release, name in that folder. (The Makefile includes grader/release_files/setup.mk.)
RELEASE_FILES = {"Makefile": "Makefile", ".gitignore": "gitignore"}
#: Names never copied from a source folder: caches, build outputs, editor and VCS litter.
IGNORED = ("__pycache__", "*.pyc", "*.pyo", "*.so", "*.o", "*.egg-info", "build", "dist", ".*", "*~")
#: A line of a reference solution counts when it has at least this many non-blank characters.
SOLUTION_LINE_MIN_CHARS = 20
#: A file holding at least this many of one solution's lines is a leak (a template shares one or
#: two, such as the kernel's signature, with its solution).
SOLUTION_LINES_LEAK = 3
#: A private seed is searched for (in every file) when it has at least this many digits; a shorter
#: number turns up by chance in code and prose, so it cannot be told from a leak.
SEED_MIN_DIGITS = 4


@dataclass(frozen=True)
class Release:
    """A release that was written.

    Attributes:
        folder: the release folder.
        archive: ``OUT.zip``, when one was asked for.
        files: every file of the release, as POSIX paths relative to ``folder``, sorted.
        private_checked: whether a private config was given and checked not to leak.
    """

    folder: Path
    archive: Path | None
    files: tuple[str, ...]
    private_checked: bool = False

    def describe(self) -> str:
        """What was written, for the terminal (several lines)."""
        lines = [f"student release: {self.folder} ({len(self.files)} files)"]
        if self.archive:
            lines.append(f"zip: {self.archive}")
        lines.append("checked for leaks: no reference solution, no hidden sizes"
                     + (", nothing of the private config" if self.private_checked else "")
                     + "; students run `make check` in it (or `pip install -e \".[test]\"`, then `scangrade check`), "
                     f"or open {NOTEBOOK} in Jupyter or Colab")
        return "\n".join(lines) + "\n"


def _ignored(name: str) -> bool:
    return any(fnmatch(name, pattern) for pattern in IGNORED)


def copy_tree(src: Path, dest: Path) -> None:
    """Copy a source folder without caches, build outputs, hidden files or symbolic links.

    Raises:
        UsageError: ``src`` is not a folder.
    """
    if not src.is_dir():
        raise UsageError(f"{src}: not found; the release is built from a scangrade checkout (run it from one)")
    dest.mkdir(parents=True, exist_ok=True)
    for entry in sorted(src.iterdir()):
        if _ignored(entry.name) or entry.is_symlink():
            continue
        if entry.is_dir():
            copy_tree(entry, dest / entry.name)
        elif entry.is_file():
            shutil.copy2(entry, dest / entry.name)


def release_files(folder: Path) -> list[str]:
    """Every regular file below ``folder``, as sorted POSIX paths relative to it."""
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())


def check_destination(out: Path, *, force: bool, what: str, source_root: Path = PROJECT_ROOT) -> None:
    """Refuse a destination inside the checkout, holding it, or already there (unless ``force``).

    Args:
        out: the folder or file to be written.
        force: allow replacing an existing ``out``.
        what: how messages name ``out`` (``"the release folder"``).

    Raises:
        UsageError: with what to do instead.
    """
    target = Path(os.path.abspath(out)).parent.resolve() / Path(os.path.abspath(out)).name  # a link itself
    root = source_root.resolve()
    if target == root or root in target.parents:
        raise UsageError(f"{out}: {what} would be inside the scangrade checkout {root}, where it could be committed "
                         "or picked up by the next release; write it outside, e.g. ../" + out.name)
    if target in root.parents or target in Path.cwd().resolve().parents or target == Path.cwd().resolve() \
            or target == Path.home().resolve() or target.parent == target:
        raise UsageError(f"{out}: {what} would replace a folder that holds the checkout, the current folder or a "
                         "home folder; give a new folder's name")
    if target.exists() or target.is_symlink():
        if target.is_dir() and not any(target.iterdir()):
            return
        if not force:
            raise UsageError(f"{out} already exists and is not empty; choose another name, or pass --force to "
                             "replace it")
        if target.is_symlink() or not (target.is_dir() or target.is_file()):
            raise UsageError(f"{out}: not a plain file or folder; remove it yourself first")


def replace_with(staging: Path, out: Path) -> None:
    """Put the folder ``staging`` in the place of ``out`` (a folder or file, removed first, or nothing)."""
    if out.is_dir() and not out.is_symlink():
        shutil.rmtree(out)
    elif out.exists():
        out.unlink()
    os.replace(staging, out)


def _lines(text: str) -> set[str]:
    return {line.strip() for line in text.splitlines()}


def solution_lines(solutions: Path) -> dict[str, set[str]]:
    """Each reference solution's lines that say something (stripped, at least
    :data:`SOLUTION_LINE_MIN_CHARS` non-blank characters), by file name."""
    out = {}
    for f in sorted(solutions.glob("*.cu")) if solutions.is_dir() else ():
        out[f.name] = {line for line in _lines(f.read_text(encoding="utf-8", errors="replace"))
                       if len(re.sub(r"\s", "", line)) >= SOLUTION_LINE_MIN_CHARS}
    return out


def _token(number: int) -> re.Pattern:
    return re.compile(rf"(?<![\w.]){number}(?![\w.])")


def find_leaks(folder: Path, *, solutions: Path | None, public: Config, private: Config | None = None) -> list[str]:
    """What of the private material is in a release folder; empty when nothing is.

    Args:
        folder: the release (or any folder) to scan; every file is read as UTF-8 text, leniently.
        solutions: the reference solutions' folder: a file holding at least
            :data:`SOLUTION_LINES_LEAK` lines of one of them leaks it; so does any file under a
            ``solutions`` folder.
        public: the public config copied in: it must have no ``hidden_sizes``.
        private: the public config with the private one laid over it (:func:`grader.assignment.config.load_private`):
            the private file's text must be in no file; its seed, when it differs from the public
            seed and has at least :data:`SEED_MIN_DIGITS` digits, in no file; its hidden sizes on no
            line of ``config.yaml`` that mentions "hidden" (a comment such as ``# hidden: 4097``;
            sizes are small numbers that turn up elsewhere by chance).

    Returns:
        One line per leak: the file (relative to ``folder``), and what leaked.
    """
    problems = []
    for key, pc in public.parts.items():
        if pc.hidden_sizes:
            problems.append(f"{public.path}: parts.{key}.hidden_sizes would show students the hidden sizes; "
                            "move them to the private config (--private-config)")
    sol = solution_lines(solutions) if solutions else {}
    private_text = ""
    seed = hidden = None
    if private is not None and private.private_path:
        private_text = Path(private.private_path).read_text(encoding="utf-8", errors="replace").strip()
        if private.private_seed not in (None, public.seed) and \
                len(str(private.private_seed)) >= SEED_MIN_DIGITS:
            seed = private.private_seed
        hidden = {n for pc in private.parts.values() for n in pc.hidden_sizes}
    for rel in release_files(folder):
        text = (folder / rel).read_text(encoding="utf-8", errors="replace")
        if "solutions" in Path(rel).parts[:-1]:
            problems.append(f"{rel}: a file under a solutions folder")
        present = _lines(text)
        for name, lines in sol.items():
            shared = lines & present
            if len(shared) >= SOLUTION_LINES_LEAK:
                problems.append(f"{rel}: holds {len(shared)} lines of the reference solution {name}, e.g. "
                                f"{min(shared)!r}")
        if len(private_text) >= 8 and private_text in text:
            problems.append(f"{rel}: holds the private config {private.private_path}")
        if seed is not None and _token(seed).search(text):
            problems.append(f"{rel}: holds the private config's seed {seed}")
        if hidden and rel == "config.yaml":
            for number, line in enumerate(text.splitlines(), 1):
                if "hidden" in line.lower():
                    problems += [f"config.yaml, line {number}: mentions {n}, a hidden size of the private config"
                                 for n in sorted(hidden) if _token(n).search(line)]
    return problems


def _part_rows(cfg: Config) -> list[str]:
    from grader.grading.case.cases import case_list
    rows = []
    for key, spec in PARTS.items():
        pc = cfg.parts.get(key)
        if pc is None:
            continue
        cases = [c for c in case_list(cfg, key) if c.visibility == "visible"]
        perf = f"{pc.timing.points:g} (on a GPU)" if pc.timing and pc.timing.points else "-"
        banks = f"{pc.profile.points:g} (on any machine)" if pc.profile and pc.profile.points else "-"
        rows.append(f"| {spec.number} | `assignment/{spec.filename}` | {spec.title} | "
                    f"{len(cases)} × {pc.points_per_case:g} | {perf} | {banks} |")
    return rows


def student_readme(cfg: Config) -> str:
    """The release's README.md: what is in the folder, how to install scangrade and check one's work.

    Its sections in order: the folder and the parts' table, checking one's work, the notebook."""
    intro = _readme_intro(cfg)
    example = next(key for key in PARTS if key in cfg.parts)
    return intro + _readme_check(cfg, example) + _readme_notebook(example)


def _readme_intro(cfg: Config) -> str:
    """The README's heading, what the folder holds and the parts' table (a row per part of ``cfg``)."""
    rows = "\n".join(_part_rows(cfg))
    return f"""\
# Parallel prefix sum (scan) in CUDA: the assignment and its grader

You write CUDA kernels for a parallel scan in `assignment/`; the handout,
[`assignment/README.md`](assignment/README.md), explains the algorithms and gives each kernel's
exact contract. This folder also holds the grader the course uses (`grader/`, with the sequential
reference scan in `reference/`) and its public configuration (`config.yaml`: the sizes every part
is checked at and the points), so you can grade your own work the way it will be graded.

| part | your file | what | correctness cases × points | speed points | bank-conflict points |
| --- | --- | --- | --- | --- | --- |
{rows}

Bank-conflict points are for a part's shared-memory traffic (wavefronts) close to its reference
solution's, counted by the grader's CPU emulator on any machine (the handout's Part 3 section).

"""


def _readme_check(cfg: Config, example: str) -> str:
    """The README's "Check your work": make and by hand; ``example`` is the part key the commands name."""
    pad = " " * max(1, 45 - len(f'make check ARGS="--part {example}"'))
    pad_k = " " * max(1, 45 - len(f'make pytest ARGS="-k {example}"'))
    return f"""\
## Check your work

You need Python 3.11 or newer with its `venv` module, and a C++17 compiler (`g++` or `clang++`)
for the grader's CPU emulator; on Debian or Ubuntu: `sudo apt install python3-venv g++ make`. Then,
from this folder (the one holding `assignment/` and `config.yaml`):

```sh
make check                                   # a quick check of everything in assignment/
make check ARGS="--full"                     # every size, as the official grade
make check ARGS="--part {example}"{pad}# one part (repeatable)
make pytest ARGS="-k {example}"{pad_k}# every size of a part, as pytest items (-k selects)
```

The first run creates `.venv` and installs the grader into it, with pytest; later runs install
nothing and start at once. `make check` ends with one line saying whether every case it graded
passed, and with exit status 0 whenever the check ran, cases failing or not (a script that needs a
failing status runs `scangrade check`, below, which exits 1 when a case fails). Where a prerequisite is missing, `make` stops with one line naming the
package to install. On a machine with an NVIDIA GPU and the CUDA toolkit, run `make gpu` once
first: it adds PyCUDA, and `make check` then runs on the GPU.

Without `make`, the same by hand (run `. .venv/bin/activate` again in each new shell):

```sh
python3 -m venv .venv
. .venv/bin/activate
pip install -e ".[test]"                     # with a GPU: pip install -e ".[gpu,test]"
scangrade check                              # a quick check of everything in assignment/
scangrade check --full                       # every size, as the official grade
scangrade check --backend emulator           # on the CPU even where a GPU is usable
pytest --scangrade assignment                # every case of every size as pytest items
```

It compiles each part, runs it at the configured sizes with `int` and `float` inputs, and
reports each case as passed or failed, with the first wrong element and a likely cause; the exit
status is 0 when every case passes. By default `check` is quick: it grades the sizes up to
`check.quick_max_n` in `config.yaml` ({cfg.check.quick_max_n}) and says what it left out;
`check --full`, the pytest route and the official grade run every size. On a GPU (through PyCUDA) it also times the timed parts; on
the CPU emulator it checks correctness only, and with data-race, out-of-bounds and barrier checks
(`--no-checks` turns them off). The handout's section "Checking your work" says more. The
templates compile as handed out and fail every case until you write the kernels.

"""


def _readme_notebook(example: str) -> str:
    """The README's notebook section (Colab or Jupyter); ``example`` is the part its parameters cell names."""
    return f"""\
## In a notebook: Colab or Jupyter

`{NOTEBOOK}` is the same assignment as a notebook, for a machine without a terminal or a GPU: a
cell per part holding its template (running the cell writes the part's file in `assignment/`), and
a cell that runs the quick check above and shows the report in the notebook, on the GPU where the
runtime has one (a Colab GPU runtime), else on the CPU emulator. Its first cell finds this folder,
goes there and installs the grader with pip (`pip install -e .`, with PyCUDA where there is a GPU)
where its dependencies are missing (Colab has them):

- **Jupyter:** open `{NOTEBOOK}` from this folder and run all cells.
- **Colab:** open `{NOTEBOOK}` (*File* ▸ *Upload notebook*, or from your repository on GitHub),
  then put this folder into `/content`: upload its zip, which the first cell unpacks, or clone your
  repository in a cell (`!git clone URL`). Keep your kernels in the notebook's cells: Colab keeps
  the notebook, not the session's files.

The notebook's parameters cell checks fewer parts (`PARTS = ["{example}"]`) or every size
(`FULL = True`).
"""


def build_release(out: Path, *, config: Path, private_config: Path | None = None, zip_archive: bool = False,
                  force: bool = False, source_root: Path = PROJECT_ROOT) -> Release:
    """Build the student release into ``out`` (and ``out.zip``), then check it for leaks.

    Args:
        out: the release folder to create; not inside ``source_root``, not existing or empty
            unless ``force``.
        config: the public configuration; copied as ``config.yaml``.
        private_config: a TA's private configuration (hidden sizes, their seed): read only to check
            that none of it is in the release; never copied.
        zip_archive: also write ``out`` with ``.zip`` appended, whose one top folder is ``out``'s name.
        force: replace an existing ``out`` (and zip).
        source_root: the checkout to build from (its ``assignment/``, ``grader/``,
            ``reference/scan.py``, ``pyproject.toml``; ``reference/solutions/`` for the leak check).

    Returns:
        The :class:`Release` written.

    Raises:
        UsageError: ``out`` is unusable (see :func:`check_destination`), the checkout lacks a part
            of the release, or the release would leak (every leak listed; nothing is written then).
        ConfigError: ``config`` or ``private_config`` is invalid.
    """
    public = load_config(config)
    private = load_private(public, private_config) if private_config else None
    archive = out.with_name(out.name + ".zip") if zip_archive else None
    check_destination(out, force=force, what="the release folder", source_root=source_root)
    if archive:
        check_destination(archive, force=force, what="the release zip", source_root=source_root)
    for needed in ("assignment", "grader", "reference/scan.py", "reference/__init__.py", "pyproject.toml",
                   *(f"grader/release_files/{name}" for name in RELEASE_FILES.values())):
        if not (source_root / needed).exists():
            raise UsageError(f"{source_root / needed}: not found; the release is built from a scangrade checkout")
    out.resolve().parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.resolve().parent))
    try:
        copy_tree(source_root / "assignment", staging / "assignment")
        copy_tree(source_root / "grader", staging / "grader")
        (staging / "reference").mkdir()
        for name in ("__init__.py", "scan.py"):
            shutil.copy2(source_root / "reference" / name, staging / "reference" / name)
        (staging / "pyproject.toml").write_text(release_pyproject(source_root / "pyproject.toml"), encoding="utf-8")
        for name, source in RELEASE_FILES.items():
            shutil.copy2(source_root / "grader" / "release_files" / source, staging / name)
        shutil.copyfile(config, staging / "config.yaml")
        (staging / "README.md").write_text(student_readme(public), encoding="utf-8")
        (staging / NOTEBOOK).write_text(notebook_text(public, staging / "assignment", zip_name=f"{out.name}.zip"),
                                        encoding="utf-8")
        leaks = find_leaks(staging, solutions=source_root / "reference" / "solutions", public=public,
                           private=private)
        if leaks:
            raise UsageError("the release was not written: it would give students private material:\n  "
                             + "\n  ".join(leaks))
        files = release_files(staging)
        staging.chmod(0o755)
        replace_with(staging, out.resolve())
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    if archive:
        write_zip(archive, ((f"{out.name}/{rel}", out / rel) for rel in files))
    return Release(folder=out, archive=archive, files=tuple(files), private_checked=private is not None)


def release_pyproject(path: Path) -> str:
    """The release's ``pyproject.toml``: the checkout's ``path`` without pytest's ``testpaths`` setting.

    The release has no ``tests/`` folder, and a ``testpaths`` naming a missing folder makes every
    plain ``pytest`` run warn. Everything else (the package, its extras, the plugin's entry point,
    the markers) stays as it is.

    Raises:
        UsageError: ``path`` is not valid TOML, or sets ``testpaths`` other than on one line.
    """
    text = path.read_text(encoding="utf-8")
    out = re.sub(r"(?m)^testpaths\s*=.*\n", "", text)
    try:
        pytest_options = tomllib.loads(out).get("tool", {}).get("pytest", {}).get("ini_options", {})
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path}: not valid TOML without its testpaths line ({exc}); fix it") from None
    if "testpaths" in pytest_options:
        raise UsageError(f"{path}: [tool.pytest.ini_options] testpaths must be on one line, "
                         "so that the release can leave it out")
    return out


def write_zip(archive: Path, entries: Iterable[tuple[str, Path]], *, executable: frozenset[str] = frozenset()) -> None:
    """Write a zip atomically from ``(name in the archive, file)`` pairs.

    Args:
        executable: archive names stored with mode 0755 (others 0644), for unzip and Gradescope.
    """
    tmp = archive.with_name(f".{archive.name}.{os.getpid()}.tmp")
    try:
        with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as z:
            for name, path in entries:
                info = zipfile.ZipInfo.from_file(path, arcname=name)
                info.compress_type = zipfile.ZIP_DEFLATED
                info.external_attr = ((0o100755 if name in executable else 0o100644) << 16)
                z.writestr(info, path.read_bytes())
        os.replace(tmp, archive)
    finally:
        tmp.unlink(missing_ok=True)
