"""The student release's notebook, ``scan.ipynb``: the assignment for Jupyter and Colab.

Built at release time with nbformat from the parts table (:data:`grader.assignment.parts.PARTS`,
the parts of the release's config, in order) and the release's templates, so it cannot drift from
either. Its cells, top to bottom:

1. how to open it (Jupyter in the release folder; Colab with the release's zip or a clone);
2. the set-up: find the release folder (the current one, one below it, or the release's zip
   there, unpacked), go there, and install the grader with pip where its imports fail (the gpu
   extra too where the runtime has an NVIDIA GPU and no PyCUDA); running it again installs nothing;
3. the check's parameters, a cell tagged ``parameters`` (papermill's convention): ``PARTS``,
   ``FULL``, ``BACKEND``; CI sets them (:func:`run_notebook`), students leave them;
4. per part, a heading and a ``%%writefile assignment/<file>`` cell holding its template, tagged
   with the part's key in the cell's metadata (:data:`PART_KEY`);
5. the check: :func:`grader.notebook.check`, which shows the student's report in the notebook.

:func:`run_notebook` executes a notebook headless (nbclient, the ``python3`` kernel of ipykernel),
with its parameters and part cells replaced: ``tests/entry/test_notebook.py`` and ``.ci/routes`` use it.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from grader.assignment.parts import PARTS
from grader.core.errors import UsageError

if TYPE_CHECKING:
    from nbformat import NotebookNode

    from grader.assignment.config import Config

__all__ = ["DEFAULT_PARAMETERS", "NOTEBOOK", "PARAMETERS_TAG", "PART_KEY", "build_notebook", "displayed_html",
           "notebook_text", "run_notebook"]

#: The notebook's name in the release's top folder.
NOTEBOOK = "scan.ipynb"
#: The tag of the cell that sets the check's parameters (papermill's name for it).
PARAMETERS_TAG = "parameters"
#: The cell metadata key whose value is the part's key, on each part's ``%%writefile`` cell.
PART_KEY = "scangrade_part"
#: The parameters cell's values as students get them.
DEFAULT_PARAMETERS: dict[str, Any] = {"PARTS": None, "FULL": False, "BACKEND": None}

_INTRO = """\
# Parallel prefix sum (scan) in CUDA

This notebook holds the assignment's kernels, one cell per part, and the check the course grades
them with. The handout, `assignment/README.md`, explains the algorithms and each kernel's contract.
Run the cells from the top (*Run all*): the first one sets up the grader, each part's cell writes
its file into `assignment/`, and the last one checks them and shows the report here.

**Your kernels are these cells.** Running a part's cell overwrites its file in `assignment/`
with the cell: edit the kernels here (or edit the files and leave the cells unrun). On Colab, the
notebook is what is kept (in Drive); the files of the session are not.

## Getting the assignment's folder here

- **Jupyter on your machine:** open this notebook from the assignment's folder (the one holding
  `assignment/`, `grader/` and `config.yaml`: the unpacked `{zip}` or your repository), e.g.
  `jupyter lab scan.ipynb` there. The first cell installs the grader into the notebook's Python
  with pip where its dependencies are missing; the emulator needs a C++17 compiler (`g++`). With a
  terminal, `make check` does the same check (`README.md`).
- **Colab:** open this notebook, then put the assignment's folder into `/content`: upload `{zip}`
  (the Files pane's upload button; the first cell unpacks it), or clone your repository in a new
  cell (`!git clone URL`). The first cell finds the folder there. The notebook asks Colab for a GPU
  runtime (*Runtime* ▸ *Change runtime type* changes it); with one, the first cell also installs
  PyCUDA (a few minutes, once per session) and the check runs on the GPU and times the timed parts.
  Without a GPU the check runs on the grader's CPU emulator, which checks correctness but times
  nothing.
"""

_SETUP = '''\
# Set-up: find the assignment's folder, go there, and install the grader where its imports fail.
import importlib, importlib.util, os, pathlib, shutil, subprocess, sys, zipfile

def is_kit(folder):
    return all((folder / name).exists() for name in ("pyproject.toml", "config.yaml", "assignment", "grader"))

def find_kit(start):
    """The assignment's folder: start, a folder in it, or the one a zip in it holds (unpacked here)."""
    for folder in (start, *sorted(p for p in start.iterdir() if p.is_dir() and not p.name.startswith("."))):
        if is_kit(folder):
            return folder
    for archive in sorted(start.glob("*.zip")):
        with zipfile.ZipFile(archive) as z:
            tops = {name.split("/")[0] for name in z.namelist()}
            if len(tops) == 1 and f"{min(tops)}/pyproject.toml" in z.namelist():
                print(f"unpacking {archive.name}")
                z.extractall(start)
                return start / min(tops)
    raise SystemExit(f"no assignment folder (with assignment/, grader/ and config.yaml) in {start} or a folder "
                     "in it, and no zip of one: upload the release's zip or clone your repository there "
                     "(see above), then run this cell again")

def imports(module):
    """Whether module imports here; the grader's imports need its dependencies (numpy, pydantic...)."""
    importlib.invalidate_caches()  # see what pip has just installed
    try:
        importlib.import_module(module)
        return True
    except ImportError as exc:
        print(f"{module}: {exc}")
        return False

def pip_install(target):
    print(f"pip install -e \\"{target}\\"")
    run = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "-e", target],
                         capture_output=True, text=True)
    if run.returncode:
        print(run.stdout + run.stderr)
    return run.returncode == 0

kit = find_kit(pathlib.Path.cwd().resolve())
os.chdir(kit)
if str(kit) not in sys.path[:1]:
    sys.path.insert(0, str(kit))  # this folder's grader, as the check's workers use
print(f"assignment folder: {kit}")
gpu = shutil.which("nvidia-smi") is not None and \\
    subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True).stdout.startswith("GPU")
if gpu and importlib.util.find_spec("pycuda") is None and not pip_install(".[gpu]"):
    print("PyCUDA did not install (above): the check will run on the CPU emulator")
if not imports("grader.notebook") and not (pip_install(".") and imports("grader.notebook")):
    raise SystemExit("pip could not install the grader (above); on your machine, run make check in a terminal")
print("the grader is ready: the check runs " + ("on this runtime's GPU" if gpu and importlib.util.find_spec("pycuda")
                                                else "on the CPU emulator (no GPU with PyCUDA here)"))
'''

_PARAMETERS_INTRO = """\
## What the check runs

Leave these as they are to check every part quickly; set `PARTS = ["part1_naive"]` to check one
part, `FULL = True` for every size as the official grade (slower), `BACKEND = "emulator"` to check
on the CPU even where there is a GPU.
"""

_PARAMETERS = """\
PARTS = {PARTS!r}  # the part keys to check, e.g. ["part1_naive"]; None: every part
FULL = {FULL!r}  # True: every size, as the official grade; False: the quick check
BACKEND = {BACKEND!r}  # None: the GPU where PyCUDA can use one, else the CPU emulator; or "emulator"
"""

_PART_INTRO = """\
## Part {number}: {title}

`assignment/{filename}`: the handout's section "Part {number}" gives its contract. Running the cell
writes the file the check grades.
"""

_CHECK_INTRO = """\
## Check your work

The same check as `scangrade check` (or `make check`) in a terminal: it compiles each part, runs
it at the sizes of `config.yaml` with `int` and `float` inputs, and shows each case as passed or
failed, with the first wrong element and a likely cause. By default it is quick: the sizes up to
`check.quick_max_n` ({quick_max_n}); `FULL = True` runs every size, as the official grade does.
"""

_CHECK = """\
from grader.notebook import check

result = check(parts=PARTS, full=FULL, backend=BACKEND)
"""


def _parameters_source(values: Mapping[str, Any]) -> str:
    return _PARAMETERS.format(**{key: values[key] for key in DEFAULT_PARAMETERS})


def build_notebook(cfg: "Config", templates: Path, *, zip_name: str = "scan-release.zip") -> "NotebookNode":
    """The release's notebook (see the module's docstring) as an nbformat v4 notebook.

    Args:
        cfg: the release's public config: its parts (in :data:`PARTS`'s order) get a cell each.
        templates: the folder of the part files (the release's ``assignment/``): each part's cell
            holds its file's text.
        zip_name: the release zip's name, as the notebook's instructions give it.

    Returns:
        A validated ``nbformat.NotebookNode`` (nbformat 4) with a ``python3`` kernelspec.

    Raises:
        UsageError: a part's template is missing from ``templates``.
    """
    import nbformat
    from nbformat import v4

    cells = [v4.new_markdown_cell(_INTRO.format(zip=zip_name)),
             v4.new_code_cell(_SETUP),
             v4.new_markdown_cell(_PARAMETERS_INTRO),
             v4.new_code_cell(_parameters_source(DEFAULT_PARAMETERS), metadata={"tags": [PARAMETERS_TAG]})]
    for key, spec in PARTS.items():
        if key not in cfg.parts:
            continue
        template = templates / spec.filename
        if not template.is_file():
            raise UsageError(f"{template}: not found; the notebook holds each part's template")
        cells.append(v4.new_markdown_cell(_PART_INTRO.format(number=spec.number, title=spec.title,
                                                             filename=spec.filename)))
        cells.append(v4.new_code_cell(f"%%writefile assignment/{spec.filename}\n"
                                      + template.read_text(encoding="utf-8"), metadata={PART_KEY: key}))
    cells.append(v4.new_markdown_cell(_CHECK_INTRO.format(quick_max_n=f"{cfg.check.quick_max_n:,}")))
    cells.append(v4.new_code_cell(_CHECK))
    nb = v4.new_notebook(cells=cells, metadata={
        "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
        "language_info": {"name": "python"},
        "accelerator": "GPU",  # Colab: offer a GPU runtime when the notebook is opened
    })
    for number, cell in enumerate(nb.cells):
        cell.id = f"cell-{number}"  # the same ids at every build, so a release's notebook diffs cleanly
    nbformat.validate(nb)
    return nb


def notebook_text(cfg: "Config", templates: Path, *, zip_name: str = "scan-release.zip") -> str:
    """:func:`build_notebook`'s notebook as the ``.ipynb`` file's text (JSON, ending in a newline)."""
    import nbformat
    return nbformat.writes(build_notebook(cfg, templates, zip_name=zip_name)) + "\n"


def run_notebook(path: Path, *, parameters: Mapping[str, Any] | None = None,
                 kernels: Mapping[str, str] | None = None, env: Mapping[str, str] | None = None,
                 timeout: float = 600) -> "NotebookNode":
    """Execute a notebook :func:`build_notebook` made, headless, in its own folder, as a student's
    *Run all* does: for CI and tests.

    Args:
        path: the ``.ipynb`` file (in the release folder, where its cells run).
        parameters: values for the parameters cell (``{"PARTS": ["part1_naive"], "BACKEND":
            "emulator"}``), the others left at :data:`DEFAULT_PARAMETERS`; reprs of them are
            written into the cell.
        kernels: part key -> the source its ``%%writefile`` cell writes instead of the template (what
            a student writes there).
        env: the kernel's environment (default: this process's).
        timeout: seconds a cell may run.

    Returns:
        The executed notebook (its cells' outputs filled in); the file is left as it was.

    Raises:
        UsageError: nbclient or ipykernel is not installed (the test extra has them); an unknown
            parameter or part; the notebook has no parameters cell.
        nbclient.exceptions.CellExecutionError: a cell raised (its traceback in the message).
    """
    try:
        import nbformat
        from nbclient import NotebookClient
    except ImportError as exc:
        raise UsageError(f"running a notebook needs nbclient and ipykernel ({exc}): pip install -e \".[test]\"") \
            from None
    nb = nbformat.read(path, as_version=4)
    values = dict(DEFAULT_PARAMETERS)
    for key, value in (parameters or {}).items():
        if key not in values:
            raise UsageError(f"{key}: not a parameter of {path.name} (its parameters: {', '.join(values)})")
        values[key] = value
    tagged = [cell for cell in nb.cells if PARAMETERS_TAG in cell.metadata.get("tags", ())]
    if not tagged:
        raise UsageError(f"{path}: no cell tagged {PARAMETERS_TAG!r}; build it again with scangrade release")
    tagged[0].source = _parameters_source(values)
    cells = {cell.metadata[PART_KEY]: cell for cell in nb.cells if PART_KEY in cell.metadata}
    for key, source in (kernels or {}).items():
        if key not in cells:
            raise UsageError(f"{key}: no such part cell in {path.name} (its parts: {', '.join(cells)})")
        first = cells[key].source.split("\n", 1)[0]  # the %%writefile line
        cells[key].source = f"{first}\n{source}"
    client = NotebookClient(nb, timeout=math.ceil(timeout), kernel_name="python3",
                            resources={"metadata": {"path": str(Path(path).resolve().parent)}})
    client.execute(env=dict(os.environ if env is None else env))
    return nb


def displayed_html(nb: "NotebookNode") -> list[str]:
    """Every ``text/html`` output of an executed notebook's code cells, in order."""
    return [out.get("data", {}).get("text/html", "") for cell in nb.cells if cell.cell_type == "code"
            for out in cell.get("outputs", ()) if "text/html" in out.get("data", {})]
