"""``python -m grader.grading.worker JOB.json``: the child process the runner starts for a part."""

import sys

from grader.grading.worker.main import cli

sys.exit(cli(sys.argv[1:]))
