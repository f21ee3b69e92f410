"""Tick classification of the live sampler, driven deterministically: the clock, sleep, frame source
and CPU clocks are injected (collect/sampler.py), so every tick's time and class is known."""
import sys

import pytest

from inferscope.collect import sampler as SM

MS = 1_000_000
IDENT = 1 << 40            # a thread ident no real thread has (no /proc schedstat for it)


def tokenize_text():       # user code named like a tokenizer: tokenization
    yield sys._getframe()


def preprocess_images():   # user code named like preprocessing: preprocessing
    yield sys._getframe()


def decode_loop():         # plain user code (module level: a nested function's qualname carries the test's name)
    yield sys._getframe()


class Clock:
    """Fake time: only sleep advances it; the watched thread's CPU clock advances by the slept time
    while it is on CPU."""

    def __init__(self, script, stop):
        self.now = 0
        self.cpu = 0
        self.script = script          # per tick: (frame, on_cpu)
        self.tick = 0
        self.stop = stop

    def clock(self):
        return self.now

    def sleep(self, s):
        dt = int(round(s * 1e9))
        self.now += dt
        frame, on_cpu = self.script[min(self.tick, len(self.script) - 1)]
        self.frame = frame
        if on_cpu:
            self.cpu += dt
        self.tick += 1
        if self.tick >= len(self.script):
            self.stop()               # the loop finishes this tick, then exits

    def frames(self):
        return {IDENT: self.frame}

    def cputime(self, clk):
        return self.cpu if clk == "fake-clk" else 0


def run_script(script, scopes=None):
    buf = []
    c = Clock(script, None)
    s = SM.Sampler(buf, 200, scopes or {}, set(), clock=c.clock, sleep=c.sleep, frames=c.frames, cputime=c.cputime,
                   getclk=lambda ident: "fake-clk" if ident == IDENT else 0)
    c.stop = s._stop.set
    s.use_perf = False
    s._perf_maps = s._PerfIP = s._perf_main = None     # what start() sets before the thread runs
    s._run()                                            # the sampler loop, in this thread
    s._close_all()
    return [(e[5], e[3], e[4]) for e in buf if e[2] == IDENT]


def test_ticks_classified_and_split_at_midpoints():
    tok = next(tokenize_text())
    pre = next(preprocess_images())
    I = 5 * MS                                          # 200 Hz
    script = [(tok, True)] * 11 + [(pre, True)] * 10 + [(pre, False)] * 10
    runs = run_script(script)
    # tick 1 (t = I) only opens the thread's state; ticks 2..11 tokenization, 12..21 preprocessing,
    # 22..31 off-CPU; a class change between two ticks is placed at their midpoint
    assert runs == [("tokenization", 1 * I, 11 * I + I // 2),
                    ("preprocessing", 11 * I + I // 2, 21 * I + I // 2),
                    ("waiting", 21 * I + I // 2, 31 * I)]


def test_scope_decode_is_not_tokenization():
    """scope("decode") around plain user code: an LLM phase, not tokenization (the old rule made such a
    loop "96.6 % tokenization"); the scope changes nothing, and a tokenizer frame still decides."""
    frame = next(decode_loop())
    plain = run_script([(frame, True)] * 4)
    scoped = run_script([(frame, True)] * 4, scopes={IDENT: ["decode"]})
    assert scoped == plain and [r[0] for r in scoped] in (["user_code"], ["cpu_compute"])
    tok = next(tokenize_text())
    assert [r[0] for r in run_script([(tok, True)] * 4, scopes={IDENT: ["decode"]})] == ["tokenization"]


@pytest.mark.parametrize("scope,cls", [(["tokenize"], "tokenization"), (["preprocess"], "preprocessing")])
def test_scope_names_classify_user_code(scope, cls):
    def work():
        yield sys._getframe()
    frame = next(work())
    # plain user code on CPU: the innermost scope that says tokenize/preprocess decides
    runs = run_script([(frame, True)] * 4, scopes={IDENT: scope})
    assert [r[0] for r in runs] == [cls]
