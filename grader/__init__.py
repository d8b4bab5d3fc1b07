"""scangrade: the assignment kit and autograder for parallel prefix sum (scan) in CUDA."""

__version__ = "0.1.0"
