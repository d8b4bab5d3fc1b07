"""The child process that grades one part: ``python -m grader.grading.worker JOB.json`` (:mod:`.main`).

Student code never runs in the grader's own process: the runner starts this worker for each
part, with deadlines. The job (a :class:`grader.grading.protocol.Job`) carries the config the runner
validated, the part, the source file, the backend and the event file; the worker reports what it
does as the events of :mod:`grader.grading.protocol` (their order is described there), each flushed to
the event file as it happens, so a crash or a kill loses nothing already reported.

Every visible case runs first (every dtype); then, on a GPU, the timing of a timed part whose
visible cases all passed; then a profiled part's memory-access profile (bank conflicts and sectors
per request, counted by a CPU emulator of its own, the part compiled afresh); then the hidden
cases, and nothing a student sees runs after a hidden case: the performance and the profile are
reported after them only to take their points away when a hidden case failed. A
worker started after a case that hung (the job's ``start``) grades the cases after it, and
``earlier_failed`` says a case before them did not pass (so the part is not timed).

The package by job: :mod:`.main` (the job's flow, and the command line), :mod:`.ahead` (on a GPU, the
compiles and inputs started ahead), :mod:`.gpu_path` (how a GPU worker with the checks on grades each
case, compute-sanitizer's audit or fallback), :mod:`.beside` (the emulator's checks run beside the GPU),
:mod:`.timing_phase` (the timing, the roofline, the performance after the hidden cases).
"""
