"""The machine as the grader meets it, below the backends: child processes tied to the grader's life, the resource limits, and the lock that gives a timed run its GPU alone."""
