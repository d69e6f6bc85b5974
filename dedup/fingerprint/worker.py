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
3. it answers each ``(body, encoding, min_tokens, links)`` with ``("result",
   JobResult)``, or ``("error", message)`` if fingerprinting raised;
   ``links`` (a ``links.LinkJob``, or None) asks for the page's outlinks too.

It ends when its stdin closes: the parent closed it, or died however it died
(killed with SIGKILL too). On Linux the kernel also kills it the moment the
thread that started it ends (``PR_SET_PDEATHSIG``, with ``--parent-pid``
checked after it is set): the stdin watch is a Python thread, which on a
loaded machine may wait seconds for the CPU or the GIL before it sees the
end. Ctrl-C and SIGTERM are the parent's to handle: sent to the whole process
group, they leave the worker to finish the pages of a graceful stop.

``--memory-mib N`` (``NEARDUP_WORKER_MEMORY``) caps the worker's address
space (``RLIMIT_AS``, where the platform has it) before anything is loaded.
A page that runs it out of memory gets ``("out_of_memory", message)`` if
Python could still say so (a ``MemoryError``), and the worker ends: the
parent replaces it. Memory a C library fails to get may end it at once
instead. Its warm-up peaks at about 800 MiB of address space (compiling),
so a cap below about 1,200 MiB leaves it no room to start.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
import threading
from multiprocessing.connection import Connection, Listener
from typing import Any


def _die_with_parent(parent: int) -> None:
    """Linux: have the kernel SIGKILL this process when the thread that started it
    ends (it ends after closing this worker, or with its process); then end at once
    if ``parent`` is gone already (this process was handed to another parent).
    Elsewhere, or where ``prctl`` is not to be had, the stdin watch alone ends it."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)  # (1: PR_SET_PDEATHSIG)
    except (OSError, AttributeError):
        return
    if parent and os.getppid() != parent:
        os._exit(0)


def _exit_with_parent() -> None:
    """End this process when stdin reaches its end: the parent is gone or done."""

    def watch() -> None:
        while sys.stdin.buffer.read(4096):
            pass
        os._exit(0)

    threading.Thread(target=watch, name="neardup-parent-watch", daemon=True).start()


def _read_key() -> bytes:
    """The authentication key, the first line on stdin (none: the parent is gone, end)."""
    line = sys.stdin.buffer.readline()
    if not line.endswith(b"\n"):
        os._exit(0)
    return bytes.fromhex(line.decode().strip())


def _connect(authkey: bytes) -> Connection:
    """Listen, tell the parent where (stdout), accept it (with ``authkey``)."""
    with Listener(authkey=authkey) as listener:
        address = listener.address
        print(address, flush=True)
        conn = listener.accept()
    if isinstance(address, str) and os.path.isabs(address):
        # (a Unix socket, in a directory multiprocessing made for it, /tmp/pymp-*, which it removes at a
        # normal interpreter exit only: this process never makes one, it ends with os._exit or is killed)
        shutil.rmtree(os.path.dirname(address), ignore_errors=True)
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
            body, encoding, min_tokens, links, window = conn.recv()
        except (EOFError, OSError):
            return
        try:
            answer: tuple[str, Any] = ("result", fingerprint_job(body, encoding, min_tokens, links, window=window))
        except MemoryError as exc:  # (past --memory-mib): say so, and end, to be replaced
            del body
            say("out_of_memory", repr(exc))
            os._exit(3)
        except Exception as exc:  # the parent lets the page pass unchecked ("unparsable")
            answer = ("error", repr(exc))
        say(*answer)


def limit_memory(mib: int) -> None:
    """Cap this process's address space at ``mib`` MiB (0: no cap; a no-op where there is no RLIMIT_AS)."""
    if mib <= 0:
        return
    try:
        import resource
    except ImportError:  # (Windows)
        return
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = mib * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit if hard == resource.RLIM_INFINITY else min(limit, hard), hard))


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m scrapy_neardup.dedup.fingerprint.worker")
    parser.add_argument("--memory-mib", type=int, default=0, help="address space cap in MiB (0: none)")
    parser.add_argument("--parent-pid", type=int, default=0, help="the process that started this one (0: unknown)")
    args = parser.parse_args()
    _die_with_parent(args.parent_pid)
    limit_memory(args.memory_mib)
    # Ctrl-C and `kill -TERM -- -PGID` (systemd's stop, a process group's) reach this process too: they are the
    # crawl's to handle, which stops gracefully and still needs the worker for the pages in flight; this
    # process ends when the crawl closes its stdin, or dies
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    authkey = _read_key()
    # (watched before the connection: a parent killed before it connects would leave this blocked in accept)
    _exit_with_parent()
    serve(_connect(authkey))
    # (not the interpreter's exit: multiprocessing's own would remove the socket's directory again, gone already)
    os._exit(0)


if __name__ == "__main__":
    main()
