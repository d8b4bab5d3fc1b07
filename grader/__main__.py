"""``python -m grader`` is ``scangrade``."""

import sys

from grader.cli import main

sys.exit(main())
