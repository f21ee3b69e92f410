"""Linear-time scanners for the streamed decode (issue 44): the ``"traceEvents": [`` key in a
growing prefix, and the cuts between events in a batch.  Each examines every byte of the buffer a
bounded number of times however the input is crafted (a long prefix of near-miss keys, a long run of
``}`` that are no cut, whitespace runs inside a would-be key or cut); ``scanned`` counts the bytes
examined so a test can check that without timing anything."""
from __future__ import annotations

import re
from collections import deque

_KEY = b'"traceEvents"'
_KEY_RE = re.compile(rb'"traceEvents"\s*:\s*\[')   # what KeyScan finds (its first match)
_WS_RE = re.compile(rb"\s*")
_COLON, _LBRACKET = 0x3A, 0x5B
_CUT_RE = re.compile(rb"\s*,\s*\{")                 # after a '}': the cut between two events
_CUTS_RE = re.compile(rb"\}\s*,\s*\{")
# '}' tried one by one from the end of a batch before one regex pass over the batch finds its cuts
# (a normal trace has a cut within a few '}' of the end; a crafted run of '}' costs one C pass, not
# one Python iteration per '}')
CUT_PROBES = 32


class KeyScan:
    """The first ``"traceEvents"\\s*:\\s*\\[`` in ``buf[:n]`` as ``buf`` grows (the same match as
    ``_KEY_RE.search(buf, 0, n)``), examining each byte O(1) times over all calls: the literal key
    is searched in the new bytes only (12 bytes of overlap for a key split across reads), and a key
    whose ':' or '[' has not arrived yet is resumed where its whitespace ended."""

    def __init__(self) -> None:
        self.pos = 0          # a key not yet found starts at or after this
        self.cand = -1        # start of a key waiting for its ':' / '[' (the buffer ended first)
        self.at = 0           # where the wait resumes
        self.colon = False    # its ':' was seen
        self.scanned = 0      # bytes examined (find + whitespace), for tests

    def feed(self, buf, n: int) -> tuple[int, int] | None:
        """(start, end) of the match once ``buf[:n]`` holds one, else None (call again with more)."""
        while True:
            if self.cand < 0:
                p = buf.find(_KEY, self.pos, n)
                if p < 0:
                    self.scanned += max(0, n - self.pos)
                    self.pos = max(self.pos, n - len(_KEY) + 1)
                    return None
                self.scanned += p + len(_KEY) - self.pos
                self.cand, self.at, self.colon = p, p + len(_KEY), False
            while True:
                q = _WS_RE.match(buf, self.at, n).end()
                self.scanned += q - self.at + 1
                if q >= n:
                    self.at = q
                    return None
                c = buf[q]
                if c == _COLON and not self.colon:
                    self.colon, self.at = True, q + 1
                    continue
                if c == _LBRACKET and self.colon:
                    return self.cand, q + 1
                break
            # not the key: the next one may start inside it ('"traceEvents"traceEvents"...')
            self.pos, self.cand = self.cand + 1, -1


class CutFinder:
    """The cuts of one batch, latest first: ``last_before(hi)`` is the largest k < hi with
    ``buf[k] == '}'`` and ``_CUT_RE`` matching after it, ending before ``n`` (a '{' at the very end
    may still be a longer '{...'), as (k, end) or (-1, -1).  The first CUT_PROBES '}' are tried one
    by one; past them one regex pass over the batch keeps the last ``keep`` cuts before that point
    (at most that many are ever asked for: the tries per batch)."""

    def __init__(self, buf, n: int, keep: int) -> None:
        self.buf, self.n, self.keep = buf, n, keep
        self.probes = 0
        self.tail: deque | None = None   # the regex pass's cuts, once made
        self.scanned = 0

    def last_before(self, hi: int) -> tuple[int, int]:
        buf, n = self.buf, self.n
        if self.tail is None:
            k = buf.rfind(b"}", 0, hi)
            while k >= 0 and self.probes < CUT_PROBES:
                self.probes += 1
                self.scanned += hi - k
                mm = _CUT_RE.match(buf, k + 1, n)
                if mm:
                    self.scanned += mm.end() - k
                    if mm.end() < n:
                        return k, mm.end()
                hi = k
                k = buf.rfind(b"}", 0, hi)
            if k < 0:
                self.scanned += hi
                return -1, -1
            self.tail = deque(maxlen=self.keep)
            for m in _CUTS_RE.finditer(buf, 0, n):
                if m.start() > k:
                    break
                if m.end() < n:
                    self.tail.append((m.start(), m.end()))
            self.scanned += n
        while self.tail and self.tail[-1][0] >= hi:
            self.tail.pop()
        return self.tail.pop() if self.tail else (-1, -1)
