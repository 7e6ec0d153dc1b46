"""Progress output that suits where the code runs: a live bar for people, plain lines for logs.

:func:`progress` picks, first match wins:

1. ``disable=True``: nothing.
2. ``$PPO_PROGRESS`` = ``bar`` | ``lines`` | ``off`` forces a kind (e.g. ``bar`` for an editor's
   notebook kernel that is not started by a Jupyter server).
3. Inside a Jupyter kernel: a tqdm widget when a Jupyter server started the kernel for an open
   notebook (JupyterLab / Notebook set ``$JPY_SESSION_NAME``); plain lines in any other kernel,
   e.g. under papermill or ``nbconvert --execute``, so the executed notebook stays readable.
4. The stream (stderr by default) is a terminal: a tqdm bar.
5. Otherwise (a log file, a pipe, CI): one plain line every ``interval_s`` seconds and one at the
   end, never a carriage return.  ``$PPO_PROGRESS_INTERVAL`` (seconds), when set, overrides
   ``interval_s`` (training passes ``logging.progress_interval_s``); the default is 30 s.

Every kind has tqdm's ``update(n)``, ``set_postfix(**values)``, ``close()`` and works as a
context manager; :func:`track` wraps an iterable.
"""
from __future__ import annotations

import os
import sys
import time
from typing import Any, Callable, Iterable, Iterator, TextIO

MODE_ENV = "PPO_PROGRESS"
INTERVAL_ENV = "PPO_PROGRESS_INTERVAL"
DEFAULT_INTERVAL_S = 30.0
MODES = ("bar", "lines", "off")


def _in_jupyter_kernel() -> bool:
    if "ipykernel" not in sys.modules:
        return False
    from IPython import get_ipython

    shell = get_ipython()
    return shell is not None and "IPKernelApp" in getattr(shell, "config", {})


def _isatty(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


def progress_mode(stream: TextIO | None = None, environ: dict | None = None) -> str:
    """``"bar"``, ``"lines"`` or ``"off"`` for output to ``stream``, by the rule of the module docstring."""
    environ = os.environ if environ is None else environ
    forced = environ.get(MODE_ENV, "").strip().lower()
    if forced:
        if forced not in MODES:
            raise ValueError(f"${MODE_ENV}={environ[MODE_ENV]!r}: expected one of {', '.join(MODES)}")
        return forced
    if _in_jupyter_kernel():
        return "bar" if environ.get("JPY_SESSION_NAME") else "lines"
    return "bar" if _isatty(stream if stream is not None else sys.stderr) else "lines"


def progress_interval(interval_s: float | None = None, environ: dict | None = None) -> float:
    """Seconds between plain lines: ``$PPO_PROGRESS_INTERVAL``, else ``interval_s``, else 30."""
    environ = os.environ if environ is None else environ
    raw, where = environ.get(INTERVAL_ENV, "").strip(), f"${INTERVAL_ENV}"
    if not raw:
        raw, where = interval_s, "progress interval"
    if raw is None:
        return DEFAULT_INTERVAL_S
    try:
        value = float(raw)
    except (TypeError, ValueError):
        value = float("nan")
    if not value > 0:
        raise ValueError(f"{where}={raw!r}: expected a positive number of seconds")
    return value


class SilentProgress:
    """Progress that prints nothing (``disable=True`` or ``$PPO_PROGRESS=off``)."""

    n = 0

    def update(self, n: float = 1) -> None:
        self.n += n

    def set_postfix(self, ordered_dict: dict | None = None, refresh: bool = True, **values: Any) -> None:
        pass

    def set_description(self, desc: str | None = None, refresh: bool = True) -> None:
        pass

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class LineProgress(SilentProgress):
    """Writes ``desc: n/total unit (pct) | rate | elapsed, eta | postfix`` lines, one per interval.

    A line is written by the first :meth:`update` at least ``interval_s`` seconds after the
    previous one (or after the start), and by :meth:`close` unless nothing changed since the last
    line (or ``leave`` is False and no line was written).
    """

    def __init__(self, total: float | None = None, desc: str = "", *, unit: str = "it",
                 unit_scale: bool = False, unit_divisor: int = 1000, initial: float = 0,
                 leave: bool = True, interval_s: float = DEFAULT_INTERVAL_S, stream: TextIO | None = None,
                 clock: Callable[[], float] | None = None) -> None:
        self.total, self.desc, self.unit = total, desc, unit
        self.unit_scale, self.unit_divisor, self.leave = unit_scale, unit_divisor, leave
        self.n = self._start_n = initial
        self.interval_s, self.stream = interval_s, stream
        self.clock = clock or time.monotonic
        self._t0 = self._last = self.clock()
        self._postfix = ""
        self._lines = 0
        self._printed_n: float | None = None
        self._closed = False

    def update(self, n: float = 1) -> None:
        self.n += n
        now = self.clock()
        if now - self._last >= self.interval_s:
            self._write(now)

    def set_postfix(self, ordered_dict: dict | None = None, refresh: bool = True, **values: Any) -> None:
        items = {**(ordered_dict or {}), **values}
        self._postfix = ", ".join(f"{k}={v}" for k, v in items.items())

    def set_description(self, desc: str | None = None, refresh: bool = True) -> None:
        self.desc = desc or ""

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self.n != self._printed_n and (self.leave or self._lines):
            self._write(self.clock())

    def _fmt(self, x: float) -> str:
        from tqdm.std import tqdm

        if self.unit_scale:
            return tqdm.format_sizeof(x, divisor=self.unit_divisor)
        return f"{x:g}" if isinstance(x, float) else str(x)

    def line(self, now: float) -> str:
        """The text of one progress line at time ``now`` (no newline)."""
        from tqdm.std import tqdm

        elapsed = now - self._t0
        done = self.n - self._start_n
        rate = done / elapsed if elapsed > 0 else 0.0
        parts = [f"{self._fmt(self.n)}/{self._fmt(self.total)} {self.unit}" if self.total
                 else f"{self._fmt(self.n)} {self.unit}"]
        if self.total:
            parts[0] += f" ({100.0 * self.n / self.total:.0f}%)"
        parts.append(f"{self._fmt(rate)} {self.unit}/s")
        timing = f"elapsed {tqdm.format_interval(elapsed)}"
        if self.total and rate > 0 and self.n < self.total:
            timing += f", eta {tqdm.format_interval((self.total - self.n) / rate)}"
        parts.append(timing)
        if self._postfix:
            parts.append(self._postfix)
        return (f"{self.desc}: " if self.desc else "") + " | ".join(parts)

    def _write(self, now: float) -> None:
        stream = self.stream if self.stream is not None else sys.stderr
        stream.write(self.line(now) + "\n")
        stream.flush()
        self._last, self._printed_n = now, self.n
        self._lines += 1


def progress(total: float | None = None, desc: str = "", *, unit: str = "it", unit_scale: bool = False,
             unit_divisor: int = 1000, initial: float = 0, leave: bool = True, disable: bool = False,
             interval_s: float | None = None, stream: TextIO | None = None):
    """A progress reporter of the kind that suits ``stream`` (stderr by default); see the module docstring.

    Args:
        total: expected count (None: unknown).
        desc: label written before the count.
        unit, unit_scale, unit_divisor, initial, leave: as for tqdm.
        disable: print nothing.
        interval_s: seconds between plain lines (``$PPO_PROGRESS_INTERVAL`` overrides; default 30).
        stream: where to write (default: ``sys.stderr`` at call time).
    """
    if disable:
        return SilentProgress()
    mode = progress_mode(stream)
    if mode == "off":
        return SilentProgress()
    if mode == "lines":
        return LineProgress(total, desc, unit=unit, unit_scale=unit_scale, unit_divisor=unit_divisor,
                            initial=initial, leave=leave, interval_s=progress_interval(interval_s), stream=stream)
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit=unit, unit_scale=unit_scale, unit_divisor=unit_divisor,
                initial=initial, leave=leave, dynamic_ncols=True, file=stream)


def track(iterable: Iterable, total: float | None = None, desc: str = "", **kwargs: Any) -> Iterator:
    """Yield the items of ``iterable`` and count them on a :func:`progress` reporter."""
    if total is None and hasattr(iterable, "__len__"):
        total = len(iterable)
    with progress(total, desc, **kwargs) as bar:
        for item in iterable:
            yield item
            bar.update(1)
