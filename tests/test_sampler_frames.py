"""The sampler reads the threads' frames with the garbage collector off (collect/sampler._current_frames): a
collection inside sys._current_frames() that frees a threading.local deadlocks CPython 3.11."""
import gc
import sys
import threading

from inferscope.collect import sampler as SM


def test_frames_read_with_gc_off_and_the_programs_setting_kept(monkeypatch):
    real = sys._current_frames
    during = []

    def spy():
        during.append(gc.isenabled())
        return real()

    was = gc.isenabled()
    try:
        monkeypatch.setattr(SM.sys, "_current_frames", spy)
        gc.enable()
        frames = SM._current_frames()
        assert threading.get_ident() in frames and gc.isenabled()     # back on after it
        gc.disable()                                                   # the program's own choice stays
        assert threading.get_ident() in SM._current_frames() and not gc.isenabled()
        assert during == [False, False]                                # off while the frames are read
    finally:
        (gc.enable if was else gc.disable)()


def test_sampler_ticks_with_the_collector_off_and_sleeps_with_it_on():
    """No program's collection starts in the sampler thread (sampler_loop: one there pauses the program and its
    main thread read 'waiting'): the collector is off while a tick works (its frames read, its thread state
    written) and on again for every sleep and after the loop; a program that turned it off keeps it off."""
    from test_sampler_ticks import IDENT, Clock, tokenize_text

    def drive(program_gc_on: bool):
        (gc.enable if program_gc_on else gc.disable)()
        seen = {"sleep": [], "frames": []}
        c = Clock([(next(tokenize_text()), True)] * 6, None)
        sleep0, frames0 = c.sleep, c.frames

        def sleep(s):
            seen["sleep"].append(gc.isenabled())
            sleep0(s)

        def frames():
            seen["frames"].append(gc.isenabled())
            return frames0()
        s = SM.Sampler([], 200, {}, set(), clock=c.clock, sleep=sleep, frames=frames, cputime=c.cputime,
                       getclk=lambda ident: "fake-clk" if ident == IDENT else 0)
        c.stop = s._stop.set
        s.use_perf = False
        s._perf_maps = s._PerfIP = s._perf_main = None
        s._run()
        return seen, gc.isenabled()

    was = gc.isenabled()
    try:
        seen, after = drive(True)
        assert len(seen["sleep"]) >= 5 and all(seen["sleep"]), seen
        assert len(seen["frames"]) >= 5 and not any(seen["frames"]), seen
        assert after
        seen, after = drive(False)
        assert not any(seen["sleep"]) and not any(seen["frames"]) and not after, seen
    finally:
        (gc.enable if was else gc.disable)()
