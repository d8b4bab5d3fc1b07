"""The compilers the grader runs on a submission, below the backends and used by both: the host C++
compiler and nvcc as a :class:`~grader.toolchain.compilers.Toolchain` runs them (``compilers``), the
operating-system sandbox and its limits (``sandbox``), one compiler process and its output
(``compiler_process``), and the compile cache (``cache``)."""
