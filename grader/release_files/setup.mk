# The set-up that scangrade's Makefile and the student release's Makefile share (both include this
# file): the prerequisites checked, a virtual environment in $(VENV), and scangrade installed into
# it (editable) only when pyproject.toml is newer than the stamp of the last install, so a second
# run installs nothing and starts at once.
#
# A target that grades depends on `cxx` (a C++ compiler for the CPU emulator) and on $(INSTALLED)
# (the venv with scangrade and its test extra); `make gpu` builds $(INSTALLED_GPU) (the gpu extra
# too). Where a prerequisite is missing, make stops with one line naming the package to install.
# `make check` runs $(SELF_CHECK).
# Variables: PYTHON (the Python that creates the venv; default python3), VENV (default .venv),
# CXX (the emulator's C++ compiler; default c++, as the emulator's); on the command line only, ARGS
# (passed on to the command a target runs) and OUT (make release's folder).

SHELL := /bin/sh
# One step at a time even under make -j: the prerequisite checks before the venv, the venv before the install.
.NOTPARALLEL:
PYTHON ?= python3
VENV ?= .venv
# Given on the command line only (an outer make's exported ARGS, as under `make test`, is not ours).
ARGS :=
OUT :=
# make's built-in default CXX (g++) is not the emulator's: it runs $CXX when set, else c++.
ifeq ($(origin CXX),default)
EMULATOR_CXX := c++
else
EMULATOR_CXX := $(CXX)
export CXX
endif
# The commands run as in the activated venv (`. .venv/bin/activate`): its bin folder first on PATH.
export VIRTUAL_ENV := $(abspath $(VENV))
export PATH := $(VIRTUAL_ENV)/bin:$(PATH)
# Touched after each install; newer than pyproject.toml while that install is current.
INSTALLED := $(VENV)/.scangrade-installed
INSTALLED_GPU := $(VENV)/.scangrade-installed-gpu

# The recipe of `make check` in both Makefiles: `scangrade check $(ARGS)`, then one line saying how it
# ended. A check that graded is make's success whether every case passed or not (scangrade's exit
# status 0 or 1, which the line gives, after the report and its `total` line): make's own
# `make: *** [Makefile:N: check] Error 1` would read as the tool failing, and make cannot pass
# scangrade's status on anyway (it exits 2 for any failed recipe). Where scangrade could not grade
# (2: a usage or configuration error, said in one line above it; 3: the grader failed on a part;
# 130: Ctrl-C) make fails with it. A script or CI job that needs a failing status when a case fails
# runs `scangrade check` itself (docs/ci/README.md).
SELF_CHECK = $(VENV)/bin/scangrade check $(ARGS); status=$$?; case $$status in \
  0) echo "make check: done, every case it graded passed (scangrade check's exit status 0)";; \
  1) echo "make check: done, some cases did not pass (scangrade check's exit status 1; make check's is 0: scripts and CI run scangrade check)";; \
  *) exit $$status;; esac

# $(call need,SHELL TEST,MESSAGE): stop with the one line MESSAGE unless the test succeeds. Expanded
# only when the recipe holding it runs (and by make -n).
comma := ,
need = $(if $(shell $(1) >/dev/null 2>&1 && echo ok),,$(error $(2)))

.PHONY: cxx
cxx:
	$(call need,command -v $(firstword $(EMULATOR_CXX)),no C++ compiler ($(EMULATOR_CXX)) for scangrade's CPU emulator: sudo apt install g++ (or set CXX to a C++17 compiler))

$(VENV)/bin/python:
	$(call need,command -v $(PYTHON),$(PYTHON) not found: sudo apt install python3 python3-venv (Python 3.11 or newer))
	$(call need,$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3$(comma) 11))',scangrade needs Python 3.11 or newer; $(PYTHON) is $(shell $(PYTHON) -V 2>&1): run make PYTHON=python3.11 (sudo apt install python3.11-venv))
	$(call need,$(PYTHON) -c 'import ensurepip$(comma) venv',$(PYTHON) cannot create a virtual environment (no ensurepip): sudo apt install python3-venv)
	@echo "$(PYTHON) -m venv $(VENV)"
	@$(PYTHON) -m venv $(VENV) || { rm -rf $(VENV); \
	  echo "make: $(PYTHON) -m venv failed (above); on Debian or Ubuntu: sudo apt install python3-venv" >&2; exit 1; }

$(INSTALLED): pyproject.toml | $(VENV)/bin/python
	@echo "make: installing scangrade with its test extra into $(VENV) (once, and again when pyproject.toml changes)"
	$(VENV)/bin/python -m pip install -q -e ".[test]"
	@touch $@

$(INSTALLED_GPU): pyproject.toml | $(VENV)/bin/python
	$(call need,command -v nvcc,PyCUDA needs the CUDA toolkit's nvcc on PATH: install the CUDA toolkit (https://developer.nvidia.com/cuda-downloads))
	$(call need,test -f "$(shell $(firstword $(wildcard $(VENV)/bin/python) $(PYTHON)) -c 'import sysconfig; print(sysconfig.get_paths()["include"])')/Python.h",building PyCUDA needs Python's headers: sudo apt install python3-dev)
	@echo "make: installing scangrade with its gpu and test extras into $(VENV)"
	$(VENV)/bin/python -m pip install -q -e ".[gpu,test]"
	@touch $@ $(INSTALLED)

