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
