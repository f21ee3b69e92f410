"""Nsight Compute ``ncu --csv`` import (``--page raw`` and ``--page details``, gz or plain).

``read(path)`` returns the capture: one dict per profiled launch (kernel name, grid/block, device,
canonical metrics in base units, ncu's rule results) plus what the capture lacks.  Metric names
differ across ncu versions and sections are optional, so every canonical metric is *probed*: a
list of exact names, then a pattern; what no launch has goes to ``missing`` with one warning
naming the section that would give it.  ``load(path)`` also builds a Trace (the launches back to
back on their streams, as ncu serialises them) so ``inferscope analyze profile.ncu.csv`` runs the
ordinary pipeline; ``meta["ncu"]`` carries the capture to ``analyze/kernel_limits.py``.

Metric names, probes and units: ``ncu_metrics.py``.  The details page's human names (``DETAILS``) and the
raw names it prints for ``--metrics`` ("Command line profiler metrics") are both read.

Input boundary: the file is inflated/read under a cap, the csv module's field limit stands, rows
are bounded (``MAX_LAUNCHES``); anything malformed is ``InputError`` (one line, exit 2).  A file cut
mid-row (no newline at the end and an incomplete last line) loses that row with a warning naming the last
complete row; on the details page the cut launch is left out when it has fewer rows than every launch
before it; nothing complete left is exit 2.  A failed export (only ncu's ``==ERROR==`` / ``==WARNING==``
lines) is exit 2 quoting them; ncu's log lines between CSV rows are skipped (errors kept as warnings).
"""
from __future__ import annotations

import csv
import gzip
import itertools
import zlib
from pathlib import Path

import numpy as np

from ..errors import InputError
from ._files import NCU_HEADER as _HEADER, read_input
from .ncu_metrics import (DETAILS, KHZ_NAMES, RAW, WHERE, number, resolve, stall_spec, stall_values,  # noqa: F401
                          unit_scale, value)
from ..trace.builder import TraceBuilder
from ..trace.kinds import SpanKind, TrackKind

MAX_BYTES = 256 << 20         # decompressed text; a 40-launch --set full raw page is ~0.5 MB
MAX_LAUNCHES = 100_000
MAX_RULES_PER_LAUNCH = 32
MAX_RULE_CHARS = 600

LOG_LINE = ("==PROF==", "==ERROR==", "==WARNING==", "==INFO==")
MAX_LOG_CHARS = 400           # ncu's own error text quoted in a one-line error


def _text(path: Path, max_bytes: int) -> str:
    raw = read_input(path, max_bytes + 1, "an ncu --csv file")
    if raw[:2] == b"\x1f\x8b":
        try:
            d = zlib.decompressobj(16 + zlib.MAX_WBITS)
            raw = d.decompress(raw, max_bytes + 1)
            if not d.eof and len(raw) <= max_bytes:
                with gzip.open(path, "rb") as f:          # compressed beyond the first read: stream it
                    raw = f.read(max_bytes + 1)
        except (OSError, EOFError, zlib.error) as e:
            raise InputError(f"{path}: damaged gzip ({e})") from None
    if len(raw) > max_bytes:
        raise InputError(f"{path}: more than {max_bytes >> 20} MB of ncu CSV (raise --max-decompressed-mb)")
    return raw.decode("utf-8", errors="replace")


def _complete(line: str, fields: int, need: int) -> bool:
    """Is the file's last line (no newline after it) a whole row?  ncu quotes every field, so a whole line
    ends with a quote and holds an even number of them; unquoted text is judged by its field count."""
    if '"' in line:
        return line.rstrip().endswith('"') and line.count('"') % 2 == 0 and fields >= need
    return fields >= need


class _Rows:
    """The data rows, parsed one at a time (a 100k-launch raw page holds tens of millions of fields: never all
    at once).  Iterated once; a last row cut mid-way is not yielded and sets ``cut``; ``last`` is the last
    row yielded (the last complete one)."""

    def __init__(self, path: Path, reader, tail: str | None, need: int):
        self.path, self.reader, self.tail, self.need = path, reader, tail, need
        self.cut, self.last = False, None

    def __iter__(self):
        prev = None
        try:
            for row in self.reader:
                if prev is not None:
                    self.last = prev
                    yield prev
                prev = row
        except csv.Error as e:
            raise InputError(f"{self.path}: malformed ncu CSV ({e})") from None
        if prev is not None:
            if self.tail is not None and not _complete(self.tail, len(prev), self.need):
                self.cut = True
                return
            self.last = prev
            yield prev


def _rows(path: Path, text: str) -> tuple[list[str], _Rows, dict]:
    """(header, data rows, {"log": ncu's error/warning lines}); the rows say whether the file ends mid-row
    (that row dropped)."""
    lines = text.splitlines(keepends=True)
    log = [ln.strip() for ln in lines if ln.startswith(LOG_LINE)]
    start = next((i for i, ln in enumerate(lines) if ln.strip() and not ln.startswith("==")), None)
    if start is None or not _HEADER.match(lines[start]):
        errs = [x for x in log if x.startswith("==ERROR==")] or [x for x in log if x.startswith("==WARNING==")]
        if start is None and errs:
            msg = " | ".join(errs)
            raise InputError(f"{path}: ncu wrote no CSV, only its log: "
                             + (msg if len(msg) <= MAX_LOG_CHARS else msg[:MAX_LOG_CHARS - 1] + "…"))
        raise InputError(f"{path}: not an ncu --csv file (no \"ID\",\"Process ID\",... header)")
    # ncu's log lines between CSV rows are skipped; every line end splitlines() knows becomes "\n"
    reader = csv.reader((ln.splitlines() or [""])[0] + "\n" for ln in lines[start:] if not ln.startswith("=="))
    try:
        header = [h.strip() for h in next(reader)]
    except csv.Error as e:
        raise InputError(f"{path}: malformed ncu CSV ({e})") from None
    for need in ("ID", "Kernel Name"):
        if need not in header:
            raise InputError(f"{path}: ncu CSV header lacks the {need!r} column")
    details = {"Metric Name", "Metric Value"} <= set(header)
    need = header.index("Metric Value") + 1 if details else len(header)
    body_last = next((ln for ln in reversed(lines) if not ln.startswith("==")), "")
    tail = body_last if not lines[-1].startswith("==") and not text.endswith(("\n", "\r")) else None
    return header, _Rows(path, reader, tail, need), {"log": [x for x in log if not x.startswith("==PROF==")]}


def _launch(header_idx: dict, row: list[str]) -> dict:
    g = lambda k: row[header_idx[k]].strip() if k in header_idx and header_idx[k] < len(row) else ""
    name = g("Kernel Name")
    dev, stream, pid = number(g("Device")), number(g("Stream")), number(g("Process ID"))
    return {"id": int(number(g("ID")) or 0), "name": name, "pid": int(pid) if pid is not None and 0 <= pid < 2 ** 31 else -1, "mangled": name.startswith("_Z"),
            "grid": g("Grid Size") or None, "block": g("Block Size") or None,
            "device": int(dev) if dev is not None and 0 <= dev < 2 ** 15 else 0, "stream": int(stream) if stream is not None and abs(stream) < 2 ** 31 else 0,
            "cc": g("CC") or None, "device_name": None, "metrics": {}, "rules": [], "stalls": {}, "stall_basis": None}


def _named(m: dict, named: dict, specs: dict) -> None:
    """Canonical metrics from raw metric names (base units), those not already set, into ``m``."""
    for key, spec in specs.items():
        if key not in m:
            v = value(spec, named.get)
            if v is not None:
                m[key] = v


def _base(name: str, v: float, unit: str) -> float:
    """A raw metric's value in base units: device clock attributes are kHz when printed without a unit."""
    cls, f = unit_scale(unit)
    return v * (1e3 if name in KHZ_NAMES and cls != "freq" else f)


def _last(la: dict) -> str:
    return f"launch ID {la['id']} ({la['name'][:80]})"


def _raw(path: Path, header: list[str], rows: list[list[str]], warnings: list[str]) -> list[dict]:
    it = iter(rows)
    first = next(it, None)
    if first and not first[0].strip():       # the units row
        units, data = first, it
    else:
        units, data = [""] * len(header), (it if first is None else itertools.chain([first], it))
    cols = {n: i for i, n in enumerate(header)}
    specs = resolve(cols)
    stalls = stall_spec(cols)
    used = sorted({n for sp in specs.values() for n in ((sp,) if isinstance(sp, str) else sp[1] if sp[0] in ("max", "sum") else sp)}
                  | (set(stalls[1].values()) if stalls else set()))
    units = list(units) + [""] * max(0, len(header) - len(units))
    name_col = cols.get("device__attribute_display_name")
    out, bad = [], 0
    for row in data:
        if len(row) != len(header) or number(row[0]) is None:
            bad += 1
            continue
        la = _launch(cols, row)
        named = {}
        for n in used:
            v = number(row[cols[n]])
            if v is not None:
                named[n] = _base(n, v, units[cols[n]])
        _named(la["metrics"], named, specs)
        if stalls:
            la["stalls"], la["stall_basis"] = stall_values(stalls, named.get), stalls[0]
        if name_col is not None:
            la["device_name"] = row[name_col].strip()[:200] or None
        out.append(la)
        if len(out) >= MAX_LAUNCHES:
            warnings.append(f"ncu: only the first {MAX_LAUNCHES:,} launches read")
            break
    if bad:
        warnings.append(f"ncu: {bad} raw-page row(s) with a wrong field count or ID skipped (truncated file?)")
    return out


def _details(path: Path, header: list[str], rows: list[list[str]], warnings: list[str]) -> list[dict]:
    cols = {n: i for i, n in enumerate(header)}
    ix = {k: cols.get(k, 10 ** 9) for k in ("ID", "Section Name", "Metric Name", "Metric Unit", "Metric Value",
                                          "Rule Name", "Rule Type", "Rule Description", "Estimated Speedup Type",
                                          "Estimated Speedup")}
    g = lambda row, k: row[ix[k]].strip() if ix[k] < len(row) else ""
    by_id: dict[int, dict] = {}
    named: dict[int, dict] = {}            # raw metric names (--metrics: "Command line profiler metrics") per launch
    bad = 0
    for row in rows:
        lid = number(row[0]) if row else None
        if lid is None or len(row) < min(len(header), 15):
            bad += bool(row)
            continue
        la = by_id.get(int(lid))
        if la is None:
            if len(by_id) >= MAX_LAUNCHES:
                warnings.append(f"ncu: only the first {MAX_LAUNCHES:,} launches read")
                break
            la = by_id[int(lid)] = _launch(cols, row)
            la["_rows"] = 0
        la["_rows"] += 1
        rule = g(row, "Rule Name")
        if rule:
            if len(la["rules"]) < MAX_RULES_PER_LAUNCH:
                la["rules"].append({"section": g(row, "Section Name")[:80], "rule": rule[:80], "type": g(row, "Rule Type")[:16],
                                    "text": g(row, "Rule Description")[:MAX_RULE_CHARS],
                                    "speedup_pct": number(g(row, "Estimated Speedup")),
                                    "speedup_type": g(row, "Estimated Speedup Type")[:16] or None})
            continue
        name = g(row, "Metric Name")
        cls, f = unit_scale(g(row, "Metric Unit"))
        v = number(g(row, "Metric Value"))
        if v is None:
            continue
        if "__" in name:
            named.setdefault(int(lid), {}).setdefault(name, _base(name, v, g(row, "Metric Unit")))
            continue
        key = DETAILS.get((name, cls))
        if key and key not in la["metrics"]:
            la["metrics"][key] = v * f
    if named:
        specs: dict = {}
        for lid, nm in named.items():
            ks = frozenset(nm)
            if ks not in specs:
                specs[ks] = (resolve(ks), stall_spec(ks))
            _named(by_id[lid]["metrics"], nm, specs[ks][0])
            if specs[ks][1]:
                by_id[lid]["stalls"], by_id[lid]["stall_basis"] = stall_values(specs[ks][1], nm.get), specs[ks][1][0]
    if bad:
        warnings.append(f"ncu: {bad} details-page row(s) without a launch ID or with too few fields skipped")
    return list(by_id.values())


def read(path, max_bytes: int | None = None) -> dict:
    """The capture: {layout, launches: [...], missing: [...], warnings: [...], file, cut}."""
    p = Path(path)
    header, rows, info = _rows(p, _text(p, max_bytes or MAX_BYTES))
    warnings: list[str] = [f"ncu log: {x[:MAX_RULE_CHARS]}" for x in info["log"][:8]]
    layout = "details" if {"Metric Name", "Metric Value"} <= set(header) else "raw"
    launches = (_details if layout == "details" else _raw)(p, header, rows, warnings)
    cut = rows.cut
    if cut and layout == "details" and len(launches) > 1:
        # the cut launch lost its later rows: dropped when it has fewer rows than every launch before it
        if launches[-1]["_rows"] < min(la["_rows"] for la in launches[:-1]):
            dropped = launches.pop()
            warnings.append(f"ncu: {_last(dropped)} is incomplete ({dropped['_rows']} row(s) before the cut) and was left out")
    for la in launches:
        la.pop("_rows", None)
    if cut:
        if not launches:
            raise InputError(f"{p}: the ncu CSV ends mid-row before any complete launch (truncated file; export it again)")
        c = {n: i for i, n in enumerate(header)}
        last = rows.last or [""]
        lid, kname = number(last[0]), last[c["Kernel Name"]].strip() if c["Kernel Name"] < len(last) else ""
        warnings.insert(0, "ncu: the file ends mid-row (truncated?): the cut row was dropped; the last complete row is "
                           + (f"launch ID {int(lid)} ({kname[:80]})" if lid is not None else "the header"))
    if not launches:
        raise InputError(f"{p}: no kernel launches in this ncu CSV")
    for la in launches:
        m = la["metrics"]
        for prec in ("fp32", "fp16", "fp64"):
            parts = [m.pop(f"{prec}_{k}", None) for k in ("adds", "muls", "fmas")]
            if all(v is not None for v in parts):
                m[f"{prec}_flops"] = parts[0] + parts[1] + 2 * parts[2]      # an FMA is two FLOPs
    have = set().union(*(la["metrics"] for la in launches))
    keys = ["duration_ns", "sm_pct", "dram_pct", "occupancy_pct", "dram_bytes", "l1_hit_pct", "l2_hit_pct",
            "fp32_flops", "tensor_pct"]
    missing = [k for k in keys if k not in have]
    if missing:
        hint = sorted({WHERE.get(k if k != "fp32_flops" else "fp32_fmas", "?") for k in missing})
        warnings.append(f"ncu: this capture lacks {', '.join(missing)} " + (
            "(the file is cut short: they may be in the part that is missing; export it again)" if cut else
            f"(add --section {' / '.join(hint)}, or --set full); the deep-dive uses what is there and labels estimates"))
    if "duration_ns" not in have:
        raise InputError(f"{p}: ncu CSV without kernel durations (gpu__time_duration / Duration); capture the SpeedOfLight section")
    return {"file": p.name, "layout": layout, "launches": launches, "missing": missing, "warnings": warnings, "cut": cut}


def load(path, max_decompressed: int | None = None):
    """A Trace of the launches, back to back per stream in capture order (ncu serialises them)."""
    cap = read(path, max_decompressed)
    b = TraceBuilder()
    la = cap["launches"]
    dur = np.array([max(0.0, x["metrics"].get("duration_ns") or 0.0) for x in la], dtype=np.float64)
    end = np.cumsum(np.round(dur).astype(np.int64))
    tracks = [b.track(TrackKind.GPU_STREAM, pid=x["pid"], tid=x["stream"], device=x["device"]) for x in la]
    b.add_spans(start_ns=end - np.round(dur).astype(np.int64), end_ns=end, track=np.array(tracks, np.int32),
                kind=int(SpanKind.KERNEL), name=np.array([b.strings.intern(x["name"][:4096]) for x in la], np.int32))
    devs = {}
    for x in la:
        devs.setdefault(x["device"], {"id": x["device"], "name": x["device_name"],
                                      "sm_count": int(x["metrics"]["sm_count"]) if "sm_count" in x["metrics"] else None,
                                      "compute_capability": x["cc"]})
    b.meta.update({"source_format": "ncu", "source_file": cap["file"], "devices": list(devs.values()),
                   "warnings": list(cap["warnings"]) + [
                       "ncu capture: the timeline is synthetic (launches back to back in capture order, with the "
                       "durations ncu measured while serialising kernels); gaps, overlap and host time are not in it"],
                   "ncu": dict(cap, joined=False)})
    return b.finalize()
