"""Which compiled kernels this process may call now, and warming them up.

numba compiles a kernel the first time it is called and caches the machine
code (docs/compiled-code.md), so the first call in a fresh install takes
tens of seconds. A process that must never wait for that, a crawl whose
reactor thread would stall, calls ``defer()``: from then on ``ready(group)``
is False until ``warm(group)`` has run (in a background thread or a worker
process), and the library takes its reference paths, which need no
compilation and give the same results (tested). A script, the command line
and the tests never call ``defer``: every group is ready there, and the
first call compiles.

Groups: ``fingerprint`` (the visible-text scan, the word kernel with jieba's
segmenter, MurmurHash3 over many strings, the simhash sums), ``store``
(the permuted tables' probes, merges and self-join) and ``batch`` (a corpus
run's self-join of a whole batch and its input-order decision; a crawl never
calls them, so its worker does not warm them).

Each group owns its warm-up, next to its kernels (``fingerprint.warmup``,
``store.warmup``, ``store.batch_warmup``), and registers it here (``register``) when imported. This
module imports none of the stages: they import it, to ask ``ready``. ``warm(group)``
imports the group's warm-up module by its name in ``WARMUP_MODULES`` (a
string, so no import edge points up from here) the first time it is needed.

``python -m scrapy_neardup.dedup warmup`` (or ``neardup warmup``) compiles
every group, each in a process of its own so that two cores share the work.

>>> sorted(GROUPS)
['batch', 'fingerprint', 'store']
"""

from __future__ import annotations

import atexit
import importlib
import logging
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from typing import NamedTuple

logger = logging.getLogger(__name__)

#: each group's warm-up module, relative to this package (imported by name: see the module's docstring)
WARMUP_MODULES = {"fingerprint": ".fingerprint.warmup", "store": ".store.warmup", "batch": ".store.batch_warmup"}
GROUPS = tuple(WARMUP_MODULES)


class Warmup(NamedTuple):
    """What a group registers: ``compiled`` runs each of its kernels on small
    inputs (compiling them, or loading them from the cache); ``reference``, if
    any, loads what its reference path loads on first use (dictionaries, tables)."""

    compiled: Callable[[], None]
    reference: Callable[[], None] | None = None


_ready = dict.fromkeys(GROUPS, True)
_warmed: set[str] = set()
_warmups: dict[str, Warmup] = {}
_lock = threading.Lock()
_exiting = threading.Event()  # the interpreter is exiting: background warm-ups begin nothing new
_background: list[threading.Thread] = []

#: How long the interpreter's exit waits for a background warm-up to finish the group it is in
EXIT_WAIT = 60.0


def ready(group: str) -> bool:
    """Whether this process may call the compiled kernels of ``group`` now. O(1)."""
    return _ready[group]


def exiting() -> bool:
    """Whether the interpreter is exiting: a ``wait`` given to ``warm_in_background``
    should return then (the exit waits for the warm-up thread). O(1)."""
    return _exiting.is_set()


def defer(*groups: str) -> None:
    """Make ``groups`` (default: all) not ready until ``warm`` has run for them."""
    for g in groups or GROUPS:
        if g not in _warmed:
            _ready[g] = False


def register(group: str, compiled: Callable[[], None], *, reference: Callable[[], None] | None = None) -> None:
    """Give ``group`` its warm-up (called by the group's warm-up module when it is imported)."""
    if group not in _ready:
        raise ValueError(f"unknown kernel group {group!r}: one of {', '.join(GROUPS)}")
    _warmups[group] = Warmup(compiled, reference)


def warmup_of(group: str) -> Warmup:
    """``group``'s registered warm-up, importing its module first if need be."""
    if group not in _warmups:
        importlib.import_module(WARMUP_MODULES[group], __package__)
    return _warmups[group]


def _quiet_numba() -> None:
    """Keep numba's compiler from logging at DEBUG, unless its logger's level was set: a process that
    logs at DEBUG (a crawl, at Scrapy's default level) would otherwise log every step of every kernel's
    compilation, ~460,000 lines for a crawl that compiled them all."""
    numba_logger = logging.getLogger("numba")
    if numba_logger.level == logging.NOTSET:
        numba_logger.setLevel(logging.INFO)


def warm(group: str) -> float:
    """Compile (or load from the cache) the kernels of ``group`` in this
    process by running each on small inputs, then mark it ready. Returns the
    seconds it took. Thread-safe; a second call returns at once."""
    with _lock:
        if group in _warmed:
            return 0.0
        _quiet_numba()
        t = time.perf_counter()
        warmup_of(group).compiled()
        _warmed.add(group)
        _ready[group] = True
        return time.perf_counter() - t


def warm_reference() -> None:
    """Load what the reference paths load on first use (jieba's dictionary in
    rjieba, the decoders' tables), so the first pages do not pay for it."""
    for g in GROUPS:
        reference = warmup_of(g).reference
        if reference is not None:
            reference()


def warm_in_background(groups: Iterable[str] = GROUPS, *, reference_first: bool = False,
                       wait: Callable[[], object] | None = None,
                       done: Callable[[], object] | None = None) -> threading.Thread:
    """``warm`` each group in a daemon thread (after ``warm_reference`` when
    ``reference_first``, and after ``wait()`` returns, e.g. until another
    process has filled the cache: it should also return once ``exiting()``;
    if it returns ``False``, the groups are not warmed: they stay on their
    reference paths); a failure is logged, and the group stays on its
    reference path. ``done()`` is called in that thread when every group is
    warm (or failed), unless the process is exiting."""
    groups = tuple(groups)

    def run() -> None:
        if reference_first:
            try:
                warm_reference()
            except Exception:
                logger.exception("could not warm up the reference path")
        if wait is not None and wait() is False:
            return
        for g in groups:
            if _exiting.is_set():
                return
            try:
                seconds = warm(g)
                logger.debug("compiled kernels of %s ready in %.1f s", g, seconds)
            except Exception:
                if _exiting.is_set():  # (the interpreter exits under it: its temporary files go, nothing failed)
                    logger.debug("the %s kernels' warm-up ended by the exit", g, exc_info=True)
                    return
                logger.exception("could not compile the %s kernels; using the reference path", g)
        if done is not None and not _exiting.is_set():
            done()

    thread = threading.Thread(target=run, name="neardup-warmup", daemon=True)
    _background.append(thread)
    thread.start()
    return thread


@atexit.register
def _end_background_warmups() -> None:
    """At the interpreter's exit, before it finalizes: let each background warm-up end.
    A daemon thread still in numba's compiled code (LLVM, C++) when Python finalizes is
    ended in a way that can abort the process ("terminate called without an active
    exception", exit status -6), after a crawl that finished before its warm-up did.
    Groups not begun are skipped and a ``wait`` watching ``exiting()`` returns; the group
    being loaded or compiled is finished, for up to ``EXIT_WAIT`` seconds (from the cache it
    takes seconds; past that the exit goes on, as before)."""
    _exiting.set()
    deadline = time.monotonic() + EXIT_WAIT
    alive = [t for t in _background if t.is_alive()]
    if alive:  # (said: a process that stays on after its crawl's last line, silent, looks hung)
        logger.info("finishing the compiled kernels' warm-up before exiting (up to %.0f s; "
                    "`neardup warmup` compiles them ahead of any crawl)", EXIT_WAIT)
    for thread in alive:
        thread.join(max(0.0, deadline - time.monotonic()))


def warm_all() -> float:
    """Compile every group, each in a process of its own, at the same time;
    returns the wall seconds. Raises if one fails."""
    t = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, "-c", f"import {__name__} as jit; jit.warm({g!r})"]) for g in GROUPS]
    codes = [p.wait() for p in procs]
    if any(codes):
        raise RuntimeError(f"compiling the kernels failed (exit codes {codes})")
    return time.perf_counter() - t
