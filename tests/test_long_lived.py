"""``crawler.filter.long_lived``: the crawl's start-up objects frozen out of full
garbage collections while it runs, and given back when it ends (the crawl test
checks a real crawl logs the freeze)."""

from __future__ import annotations

import subprocess
import sys


def run_in_a_new_process(code: str) -> None:
    """Run ``code`` in a fresh interpreter (the freeze is process-wide); it must print ``ok``."""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]


def test_the_freeze_is_given_back_when_the_last_crawl_ends():
    """``long_lived``: what crawls of one process froze goes back to the collector when the
    last of them ends, so a process that runs crawl after crawl keeps nothing of an ended one
    (a reference cycle frozen would otherwise never be collected)."""
    code = ("import gc\n"
            "from scrapy_neardup.crawler.filter import long_lived\n"
            "class Cycle:\n"
            "    def __init__(self): self.me = self\n"
            "long_lived.hold(); long_lived.hold()  # (two crawls)\n"
            "c = Cycle(); long_lived.refreeze(); del c  # (a cycle alive at the warm-up's freeze)\n"
            "assert gc.get_freeze_count() > 0\n"
            "long_lived.release(); assert gc.get_freeze_count() > 0  # (one crawl still runs)\n"
            "long_lived.release(); assert gc.get_freeze_count() == 0\n"
            "gc.collect(); assert not any(type(o).__name__ == 'Cycle' for o in gc.get_objects())\n"
            "long_lived.refreeze(); assert gc.get_freeze_count() == 0  # (no crawl holds it: nothing)\n"
            "print('ok')\n")
    run_in_a_new_process(code)


def test_a_later_crawl_does_not_freeze_an_ended_crawls_garbage():
    """The first crawl's ``hold`` collects only the youngest generation; once a crawl of
    the process has ended (``release``: its objects unfrozen into the oldest generation,
    not collected), the next ``hold`` collects everything before it freezes, so the ended
    crawl's cycles are freed, not frozen for the next crawl's whole run."""
    code = ("import gc, weakref\n"
            "from scrapy_neardup.crawler.filter import long_lived\n"
            "gc.disable()  # (only the module's own collections run)\n"
            "class Cycle:\n"
            "    def __init__(self): self.me = self\n"
            "long_lived.hold()\n"
            "c = Cycle(); ended = weakref.ref(c); long_lived.refreeze(); del c  # (the first crawl's, frozen)\n"
            "long_lived.release()\n"
            "assert ended() is not None  # (unfrozen, not collected yet)\n"
            "long_lived.hold()  # (a second crawl)\n"
            "assert ended() is None, 'the ended crawl s cycle was frozen again'\n"
            "print('ok')\n")
    run_in_a_new_process(code)


def test_a_freeze_the_process_made_itself_is_left_as_it_was():
    """A process that froze its own objects before the crawl (a server that freezes before it forks) had
    them unfrozen when the crawl ended: ``gc.unfreeze`` gives back everything, so it is not called then."""
    code = ("import gc\n"
            "from scrapy_neardup.crawler.filter import long_lived\n"
            "gc.freeze(); before = gc.get_freeze_count(); assert before > 0\n"
            "long_lived.hold(); long_lived.release()\n"
            "assert gc.get_freeze_count() >= before\n"
            "print('ok')\n")
    run_in_a_new_process(code)
