"""A py-spy profile of this process for the length of a ``with`` block (``--py-spy``).

py-spy (``pip install py-spy``; not a dependency of tidings) samples the bench process from
outside; only the stacks that run inside ``Expander.expand`` are counted, so what the
summary shows is where the expansion's CPU goes in Python (waits for PostgreSQL are idle
and not sampled).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

MARKER = "Expander.expand (tidings/campaigns/expander.py"


@dataclass
class Profile:
    samples: int = 0  # stacks inside the expansion
    own: Counter[str] = field(default_factory=Counter)  # by innermost function
    within: Counter[str] = field(default_factory=Counter)  # by tidings function, inclusive

    def top(self, count: int = 5) -> list[tuple[str, float]]:
        return [(name, n / self.samples) for name, n in self.own.most_common(count)]

    def tidings(self, count: int = 8) -> list[tuple[str, float]]:
        return [(name, n / self.samples) for name, n in self.within.most_common(count)]


def available() -> str | None:
    found = Path(sys.executable).with_name("py-spy")
    return str(found) if found.exists() else shutil.which("py-spy")


def _name(frame: str) -> str:
    """``Class.function (package/module.py:line)`` -> ``package/module.py: Class.function``."""
    function, _, where = frame.partition(" (")
    return f"{where.split(':')[0]}: {function}" if where else function


def parse(path: Path) -> Profile:
    profile = Profile()
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        frames = stack.split(";")
        starts = [i for i, frame in enumerate(frames) if frame.startswith(MARKER)]
        if not starts:
            continue
        n = int(count)
        profile.samples += n
        inner = frames[starts[0] + 1 :]
        profile.own[_name(frames[-1])] += n
        names = {_name(f) for f in inner if " (tidings/" in f}
        for name in names:
            profile.within[name] += n
    return profile


@contextlib.contextmanager
def recording(out: Path, rate: int = 200) -> Iterator[None]:
    """py-spy records this process while the block runs; raw collapsed stacks to ``out``."""
    spy = available()
    if spy is None:
        raise RuntimeError("py-spy is not installed (pip install py-spy)")
    command = [spy, "record", "--pid", str(os.getpid()), "--rate", str(rate)]
    command += ["--format", "raw", "--output", str(out), "--nonblocking"]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    time.sleep(1.0)  # attached before the block starts
    try:
        yield
    finally:
        process.send_signal(signal.SIGINT)
        _, errors = process.communicate(timeout=60)
        if not out.exists():
            raise RuntimeError(f"py-spy wrote no profile: {errors.decode(errors='replace')}")
