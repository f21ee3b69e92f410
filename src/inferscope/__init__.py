"""InferScope: where does end-to-end inference time go, and what should I change?

Light import: heavy modules (torch, numpy analyses, collectors) load lazily.
"""
from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
