"""Grading one submission: the runner, the part workers and their protocol, the cases, deadlines, timing locks, compute-sanitizer and the analysis."""
