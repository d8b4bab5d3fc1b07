"""A submission's source: the C token reader, the directive and include checks, and the intake of files."""
