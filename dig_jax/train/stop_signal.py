"""Stop a training run cleanly on SIGTERM (a scheduler's preemption, `kill`) or SIGINT (Ctrl-C).

The first signal only sets a flag: the loop finishes the step in progress, saves a checkpoint
at it (data position included), stops grain's worker processes and returns, so a resume loses
nothing and no worker is left behind. A second signal acts as it would without this (SIGINT
raises KeyboardInterrupt, SIGTERM ends the process). Handlers are installed only in the main
thread of a single-process run: several processes must agree on the step they stop at, which
JAX's preemption service does for them (orbax's `reached_preemption`, `dig_jax.train.train`).
"""

from __future__ import annotations

import signal
import threading
from types import FrameType, TracebackType

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class StopOnSignal:
    """Context manager; `signal_name` ("SIGTERM" / "SIGINT") once a stop signal arrived."""

    def __init__(self, install: bool = True) -> None:
        self.signal_name: str | None = None
        self._install = install and threading.current_thread() is threading.main_thread()
        self._previous: dict[int, object] = {}

    @property
    def requested(self) -> bool:
        return self.signal_name is not None

    def __enter__(self) -> StopOnSignal:
        if self._install:
            self._previous = {s: signal.signal(s, self._handle) for s in STOP_SIGNALS}
        return self

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.signal_name = signal.Signals(signum).name
        self._restore()  # a second signal: the usual behaviour

    def _restore(self) -> None:
        for signum, handler in self._previous.items():
            if handler is not None:  # None: installed outside Python, cannot be put back
                signal.signal(signum, handler)  # type: ignore[arg-type]
        self._previous = {}

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._restore()
