"""The fingerprinting worker process: ``python -m scrapy_neardup.dedup.fingerprint.worker``.

A fresh interpreter that runs this module and nothing of its parent's. It is
not started through ``multiprocessing``: whatever the start method, that
prepares a child by importing the parent's ``__main__`` again
(``multiprocessing.spawn.prepare``), which runs a second time the top-level
code of a script without an ``if __name__ == "__main__":`` guard, such as
Scrapy's "Run Scrapy from a script" example. ``jobs.WorkerProcess`` starts
it and holds the other end.

The exchange (``multiprocessing.connection``: pickled messages over a Unix
socket, a named pipe on Windows):

1. the worker listens, writes its address as one line on stdout, and reads
   the authentication key (hex) as one line on stdin; the parent connects;
2. the worker loads what the reference paths need and says ``("ready", None)``;
   a thread of its own then compiles (or loads from the cache) the compiled
   kernels, the store's first, and says ``("store_cached", None)`` once they
   are in the cache, so that the parent loads them from there rather than
   compiling them beside the crawl; jobs use the compiled kernels once warm;
3. it answers each ``(body, encoding, min_tokens)`` with ``("result",
   JobResult)``, or ``("error", message)`` if fingerprinting raised.

It ends when its stdin closes: the parent closed it, or died however it died
(killed with SIGKILL too). Ctrl-C is the parent's to handle.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from multiprocessing.connection import Connection, Listener
from typing import Any


def _exit_with_parent() -> None:
    """End this process when stdin reaches its end: the parent is gone or done."""

    def watch() -> None:
        while sys.stdin.buffer.read(4096):
            pass
        os._exit(0)

    threading.Thread(target=watch, name="neardup-parent-watch", daemon=True).start()


def _connect() -> Connection:
    """Listen, tell the parent where (stdout), take its key (stdin), accept it."""
    authkey = bytes.fromhex(sys.stdin.buffer.readline().decode().strip())
    with Listener(authkey=authkey) as listener:
        print(listener.address, flush=True)
        conn = listener.accept()
    # stdout was for the address only: whatever a library prints from now on goes
    # to stderr, not into a pipe nobody reads (which would block this process once full)
    os.dup2(2, 1)
    return conn


def serve(conn: Connection) -> None:
    """Answer jobs until the parent closes the connection."""
    from .. import jit
    from .jobs import fingerprint_job

    sending = threading.Lock()  # (the warm-up thread says its piece too)

    def say(kind: str, payload: Any) -> None:
        with sending:
            conn.send((kind, payload))

    jit.defer("fingerprint")
    jit.warm_reference()  # rjieba's dictionary and the decoders' tables, before the first page
    say("ready", None)

    def compile_all() -> None:
        try:
            jit.warm("store")
        finally:
            say("store_cached", None)
        jit.warm("fingerprint")

    threading.Thread(target=compile_all, name="neardup-warmup", daemon=True).start()
    while True:
        try:
            body, encoding, min_tokens = conn.recv()
        except (EOFError, OSError):
            return
        try:
            answer: tuple[str, Any] = ("result", fingerprint_job(body, encoding, min_tokens))
        except Exception as exc:  # the parent lets the page pass unchecked ("unparsable")
            answer = ("error", repr(exc))
        say(*answer)


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    conn = _connect()
    _exit_with_parent()
    serve(conn)


if __name__ == "__main__":
    main()
