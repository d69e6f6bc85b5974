"""Faults in a real crawl give a clear error and lose nothing: a full disk
(a small tmpfs), a read-only JOBDIR, a second crawl on the same JOBDIR, a
store made with other settings (issue 14)."""

from __future__ import annotations

import shutil
import subprocess
import time
import uuid

import pytest

from tests.conftest import ROOT
from tests.fixtures.dup_site import DupSite
from tests.test_kill_resume import check, crawl_cmd


@pytest.fixture()
def tmpfs(tmp_path):
    """A directory on a tmpfs of its own (1 MB), or skip where mounting is not allowed."""
    mnt = tmp_path / f"fs-{uuid.uuid4().hex[:6]}"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({r.stderr.strip()}): a full or read-only disk needs one")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def run(cmd: list[str], timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout)


def test_a_full_disk_stops_the_crawl_clearly_and_a_resume_loses_nothing(tmpfs, tmp_path):
    site = DupSite()
    job = tmpfs / "job"
    feed = tmp_path / "feed.jsonl"
    with site.serve() as server:
        # leave ~600 KB: enough to start, not enough to finish
        (tmpfs / "filler").write_bytes(b"\0" * (1024 * 1024 - 600 * 1024))
        r = run(crawl_cmd(server.url, job, feed))
        log = r.stderr
        assert "'finish_reason': 'finished'" not in log, "the crawl should have run out of disk"
        assert "disk is full" in log.lower() or "no space left" in log.lower(), log[-3000:]
        assert "Traceback" not in log.split("Dumping Scrapy stats")[0] or "stopping the crawl" in log
        # move the job to a disk with room, as a user would, and resume
        moved = tmp_path / "job"
        shutil.copytree(job, moved)
        r2 = run(crawl_cmd(server.url, moved, feed))
        assert "'finish_reason': 'finished'" in r2.stderr, r2.stderr[-3000:]
        check(site, moved, feed, server.hits, 1, "after a full disk")


def test_a_read_only_jobdir_is_a_clear_error(tmpfs, tmp_path):
    (tmpfs / "job").mkdir()
    subprocess.run(["mount", "-o", "remount,ro", str(tmpfs)], check=True)
    r = run(crawl_cmd("http://127.0.0.1:9", tmpfs / "job", tmp_path / "feed.jsonl"), timeout=120)
    assert r.returncode != 0
    assert "read-only" in r.stderr.lower() and str(tmpfs / "job") in r.stderr, r.stderr[-2000:]


def test_a_second_crawl_on_the_same_jobdir_is_refused(tmp_path):
    site = DupSite(delay=(0.2, 0.3))
    job = tmp_path / "job"
    with site.serve() as server:
        first = subprocess.Popen(crawl_cmd(server.url, job, tmp_path / "a.jsonl"), cwd=ROOT,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 60
            while not server.hits and time.monotonic() < deadline:
                time.sleep(0.05)
            r = run(crawl_cmd(server.url, job, tmp_path / "b.jsonl"), timeout=120)
            assert r.returncode != 0 or "'finish_reason': 'finished'" not in r.stderr
            assert "another" in r.stderr and str(job) in r.stderr, r.stderr[-2000:]
        finally:
            first.kill()
            first.wait()


def test_a_store_made_with_another_k_is_refused(tmp_path):
    site = DupSite(n=8)
    with site.serve() as server:
        r = run(crawl_cmd(server.url, tmp_path / "job", tmp_path / "a.jsonl"))
        assert "'finish_reason': 'finished'" in r.stderr
        r2 = run(crawl_cmd(server.url, tmp_path / "job", tmp_path / "b.jsonl") + ["-s", "NEARDUP_MAX_DISTANCE=4"])
        assert r2.returncode != 0
        assert "max_distance=3, asked for 4" in r2.stderr, r2.stderr[-2000:]
