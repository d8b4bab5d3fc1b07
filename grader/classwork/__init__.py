"""A class's work: finding and taking in submissions, grading them in a batch, and the batch's files.

- :mod:`grader.classwork.submissions` — discovery: a class folder's submissions (folders, zips,
  Gradescope's export) with safe ids, each taken in by :func:`grader.grading.intake.snapshot` (one
  submission's part files, copied safely, is :mod:`grader.grading.intake`'s, below the runner);
- :mod:`grader.classwork.store` — the batch output folder: atomic writes, students' results, the
  manifest ``batch.json``, shards;
- :mod:`grader.classwork.gradebook` — ``gradebook.csv`` and ``summary.txt``;
- :mod:`grader.classwork.batch` — the run (``scangrade batch``);
- :mod:`grader.classwork.merge` — joining shards (``scangrade merge``);
- :mod:`grader.classwork.slurm` — job scripts and their submission (``scangrade batch --slurm``).

Nothing here renders: report texts and the class report page come from :mod:`grader.render`,
which the CLI hands in. This package's ``__init__`` imports nothing.
"""
