"""The ETag a predicted copy would have, learned from copies that came whole.

A ranged GET that confirms a predicted copy carries ``If-Range`` so that a page
which is not a copy (a translated page, of another size) comes whole in the
same answer, at the cost of the one request a plain crawl makes. With the
fetched page's own ``ETag`` that works where a copy *is* the page (a symlink, a
server-side fallback). Where each copy is a file of its own (a tree written at
another time, versioned documentation), a copy's ``ETag`` differs from its
page's only in the part that names when it was written: nginx's is
``"<mtime>-<size>"``, Apache's ``"<size>-<mtime>"``. The first copy that comes
whole under a rule shows that change (``change_of``); the rule's later ranged
GETs carry its page's ETag with it made (``predicted``), so its copies are
confirmed by their ranges and a translated page, which has another size, still
costs one request.

The validator only picks the answer's form: a copy is confirmed by its bytes
(length and window), never by its ``ETag``, so a wrong prediction costs at most
what it did without one (a copy answered whole; or a page of the predicted
``ETag`` and other bytes, a range and then the whole).

>>> change_of('"65553f00-1a2b"', '"6555912f-1a2b"')
(2, '65553f00', '6555912f')
>>> predicted('"65553f00-0c11"', {(2, '65553f00'): '6555912f'})
'"6555912f-0c11"'
>>> predicted('"77770000-0c11"', {(2, '65553f00'): '6555912f'}) is None
True
>>> change_of('"1a2b-65553f00"', '"0c11-6555912f"') is None  # (two parts differ: not one change)
True
"""

from __future__ import annotations

import re

#: what splits an ETag into parts: runs of letters and digits between other characters
_PARTS = re.compile(r"([^0-9A-Za-z]+)")

#: the changes a rule keeps (each both ways); past them its ranged GETs go without ``If-Range``
MAX_CHANGES = 8

#: the changes a rule knows: (a part's index, its value in a page) -> its value in a copy
Changes = dict[tuple[int, str], str]
#: one change (``change_of``): the part's index, its value in the page, its value in the copy
Change = tuple[int, str, str]


def _parts(etag: str) -> list[str]:
    return _PARTS.split(etag)


def change_of(page: str, copy: str) -> Change | None:
    """How ``copy``'s strong ETag differs from that of the ``page`` it copies: ``(part, was, now)``
    for the one part (a run of letters and digits, by its index) that differs, or None when the two
    are not one such change (the same, of other shapes, or two parts differing: an inode with the
    mtime, which no other page's ETag could be predicted from). O(length)."""
    a, b = _parts(page), _parts(copy)
    if len(a) != len(b) or a == b:
        return None
    differ = [i for i, (x, y) in enumerate(zip(a, b)) if x != y]
    if len(differ) != 1 or differ[0] % 2:  # (a separator that differs: another shape)
        return None
    i = differ[0]
    return i, a[i], b[i]


def predicted(etag: str, changes: Changes) -> str | None:
    """``etag`` with the parts ``changes`` know made as they say, or None when none applies
    (a page written at a time no copy has shown). O(length + parts)."""
    parts = _parts(etag)
    hit = False
    for i in range(0, len(parts), 2):
        now = changes.get((i, parts[i]))
        if now is not None:
            parts[i] = now
            hit = True
    return "".join(parts) if hit else None
