"""Run a callback right after a module is first imported (torch for the profiler, transformers'
generation utilities for generate() recording): a meta-path finder that wraps the module's loader once."""
from __future__ import annotations

import importlib.abc
import importlib.util
import sys


class _LoaderProxy(importlib.abc.Loader):
    def __init__(self, loader, callback):
        self._loader = loader
        self._callback = callback

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        try:
            self._callback()
        except Exception:
            pass

    def __getattr__(self, name):
        return getattr(self._loader, name)


class ModuleImportHook(importlib.abc.MetaPathFinder):
    """Calls ``callback()`` right after the module ``name`` is first executed; removes itself then."""

    def __init__(self, name: str, callback):
        self.name = name
        self.callback = callback
        self._busy = False

    def find_spec(self, fullname, path, target=None):
        if fullname != self.name or self._busy:
            return None
        self._busy = True
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            self._busy = False
        if spec is None or spec.loader is None:
            return None
        self.remove()
        spec.loader = _LoaderProxy(spec.loader, self.callback)
        return spec

    def install(self):
        sys.meta_path.insert(0, self)

    def remove(self):
        try:
            sys.meta_path.remove(self)
        except ValueError:
            pass
