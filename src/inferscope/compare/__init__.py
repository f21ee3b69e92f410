"""``inferscope diff``: comparing two runs (traces or report.json files), each change judged against noise.

Modules: ``core`` (the breakdown diff, the assembled diff, the command: ``diff_paths``, ``diff_sides``,
``cli_diff``, ``regressed_beyond``), ``sides`` (loading each side: ``Side``, ``load_side``), ``noise`` (the
noise rule, machine load, the latency call: ``noise_for``, ``environment``), ``named`` (kernels, CPU ops,
functions, ranges by name), ``llm`` (the ``llm`` section), ``work`` (the call by work done: tokens/s,
requests/s), ``whatif`` (each predicted saving of ``before`` against the measured change; report/diff.py
renders its ``lines``).  The names callers and tests use are re-exported here.
"""
from .core import (BUSY_MACHINE_PCT, ENV_COUNTERS, REPORT_JSON_MAX_BYTES, SCHEMA, TOP_CHANGED, Side, cli_diff,
                   diff_paths, diff_sides, environment, headline, llm_diff, load_side, named, noise_for,
                   regressed_beyond, repeats, t975)

__all__ = ["BUSY_MACHINE_PCT", "ENV_COUNTERS", "REPORT_JSON_MAX_BYTES", "SCHEMA", "TOP_CHANGED", "Side", "cli_diff",
           "diff_paths", "diff_sides", "environment", "headline", "llm_diff", "load_side", "named", "noise_for",
           "regressed_beyond", "repeats", "t975"]
