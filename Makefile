# scangrade from a fresh clone: `make grade` grades the reference solutions, `make test` runs the
# test suite. Each creates .venv when missing and installs scangrade with its test extra into it
# when pyproject.toml changed (grader/release_files/setup.mk, shared with the student release's
# Makefile), so a second run starts at once. ARGS="..." is passed on: make test ARGS="-k blelloch".

include grader/release_files/setup.mk

.DEFAULT_GOAL := help
.PHONY: help grade test check release gpu

help:
	@echo "make grade             grade reference/solutions (on the GPU where PyCUDA can use one, else the CPU emulator)"
	@echo "make test              run the test suite (pytest, in two processes: pytest-xdist)"
	@echo "make check             a student's self-check: grade ./assignment"
	@echo "make release OUT=DIR   build the student release in DIR (outside this checkout)"
	@echo "make gpu               add PyCUDA (the gpu extra; needs the CUDA toolkit)"
	@echo "Each sets up .venv first when needed; ARGS=\"...\" is passed on, e.g. make test ARGS=\"-k blelloch\"."

grade: cxx $(INSTALLED)
	$(VENV)/bin/scangrade grade reference/solutions $(ARGS)

test: cxx $(INSTALLED)
	$(VENV)/bin/python -m pytest -n 2 $(ARGS)

check: cxx $(INSTALLED)
	@$(SELF_CHECK)

ifneq ($(filter release,$(MAKECMDGOALS)),)
ifeq ($(OUT),)
$(error make release needs the folder to write: make release OUT=../scan-release)
endif
endif
release: $(INSTALLED)
	$(VENV)/bin/scangrade release "$(OUT)" $(ARGS)

gpu: $(INSTALLED_GPU)
