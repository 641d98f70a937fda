"""System tests: a whole fleet of ``tidings`` processes under a schedule of faults
(tests/system/faults.py), run short in CI and long by ``make faults``."""
