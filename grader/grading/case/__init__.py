"""Running one case of one part on a backend: inputs, launch plans, checks and GPU timing.

The grader owns the host side: it draws the input, allocates every device buffer with guard
zones filled with a poison value, launches the part's kernels following the part's launch plan
(see :mod:`grader.assignment.plans`), reads everything back, and checks, in order: writes outside any buffer
(guard zones), changes to the input, then the output against the sequential reference scan.

Timing (GPU backends): the same plan is replayed ``timing.runs`` times after warm-up, with the
outputs poisoned and the L2 emptied before every run, and the output re-verified after the last
run, so a kernel that skips work once the answer is in the buffer fails.

One module a job, each importing only those before it:

- :mod:`.cases`: which cases a part has (:func:`~.cases.case_list`) and how each is checked
  (:class:`~.cases.CheckMode`, decided there), what they need of device memory, and the results of
  cases that did not run;
- :mod:`.inputs`: each case's seeded input and reference output, shared by a batch's workers or
  drawn ahead, and whether a float32 input's sums are exact;
- :mod:`.checks`: one run's buffers read back and judged (guard zones, input, output, error
  bounds), and the hints of a wrong output;
- :mod:`.run`: one correctness case run as its check mode says (:class:`~.run.CaseRun`: the thread
  orders, the shared-memory fills, the sampled blocks), its findings told in cause order;
- :mod:`.timing`: one timed size on a GPU, and the performance points from the timed sizes.
"""
