"""Peak resident memory of a process: ``VmHWM`` in ``/proc/<pid>/status`` (Linux)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

TARGET_MB = 200.0  # issue 14: resident memory per process under 200 MB


def peak_rss_mb(pid: int | str = "self") -> float | None:
    """The process's peak resident set size in MB (2**20 bytes); None where /proc has none."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024  # reported in kB
    return None


@dataclass(frozen=True)
class Reading:
    """One process's peak RSS, read after the load it names."""

    process: str
    when: str
    megabytes: float | None
    judged: bool = True  # False: shown for comparison (not a tidings process), no target

    @property
    def passed(self) -> bool | None:
        if self.megabytes is None or not self.judged:
            return None
        return self.megabytes < TARGET_MB

    @property
    def verdict(self) -> str:
        if not self.judged:
            return "comparison only"
        return {None: "not read", True: "pass", False: "FAIL"}[self.passed]

    @property
    def target(self) -> str:
        return f"< {TARGET_MB:.0f} MB" if self.judged else "-"

    @property
    def text(self) -> str:
        return "?" if self.megabytes is None else f"{self.megabytes:.0f} MB"
