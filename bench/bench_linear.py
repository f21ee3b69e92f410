"""Linear-time readers on hostile input (issue 44): each reader on crafted worst-case inputs of
growing size, time per MB (must stay flat: a reader that rescans what it read grows with the size).

    python bench/bench_linear.py                         # 1, 4, 16, 64 MB, every reader
    python bench/bench_linear.py --sizes 1,4 --readers kineto-prefix,ncu-rows

Inputs (tests/linear_inputs.py): ``kineto-prefix`` ~size bytes of near-miss "traceEvents" keys before
the real one; ``kineto-no-cut`` one event whose name is ``}]`` repeated (no cut between events for
~size bytes); ``kineto-ws-gap`` ~size bytes of whitespace between two events; ``ncu-rows`` an
``ncu --csv`` raw page of ~size bytes of rows with a wrong field count.  Each Kineto input is read by
``kineto.load`` (the streamed decode; the table says when it fell back to the whole-file decode);
its scanners' bytes examined per input byte (``scan/B``, the count the tests bound) come from a
separate, untimed run.  CPU time of the process (time.process_time), best of --repeat runs, input written to a
temporary folder first (its writing not timed).
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import linear_inputs as L  # noqa: E402
from inferscope.ingest import kineto as K  # noqa: E402
from inferscope.ingest import ncu  # noqa: E402


def _kineto_info(p: Path) -> tuple[str, float | None]:
    """(streamed or fell back to the whole-file decode, scanner bytes examined per input byte)."""
    cols = K._Cols()
    try:
        K._stream_decode(p, None, K.STREAM_BATCH_BYTES, cols, None)
        how = "stream"
    except K._Fallback:
        how = "whole-file"
    return how, cols.scan_bytes / p.stat().st_size


def _ncu_info(p: Path) -> tuple[str, float | None]:
    return f"{len(ncu.read(p)['launches'])} launches", None


# name: (input generator, the reader as the CLI runs it (timed), what to say about the run, suffix)
READERS = {name: (gen, K.load, _kineto_info, ".json") for name, gen in L.KINETO.items()}
READERS["ncu-rows"] = (L.ncu_rows, ncu.read, _ncu_info, ".csv")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="1,4,16,64", help="MB, comma-separated")
    ap.add_argument("--readers", default=",".join(READERS), help="comma-separated: " + ", ".join(READERS))
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    sizes = [float(s) for s in args.sizes.split(",")]
    names = [r for r in args.readers.split(",") if r]
    for r in names:
        if r not in READERS:
            ap.error(f"unknown reader {r!r} (known: {', '.join(READERS)})")
    print(f"{'reader':<15} {'MB':>6} {'s (best)':>9} {'ms/MB':>8} {'scan/B':>7}  path")
    worst = 0.0
    with tempfile.TemporaryDirectory(prefix="bench_linear") as d:
        for r in names:
            gen, read, info, ext = READERS[r]
            per_mb = []
            for mb in sizes:
                p = Path(d) / f"{r}{ext}"
                p.write_bytes(gen(int(mb * (1 << 20))))
                real_mb = p.stat().st_size / (1 << 20)
                how, scan = info(p)
                best = float("inf")
                for _ in range(args.repeat):
                    t0 = time.process_time()
                    read(p)
                    best = min(best, time.process_time() - t0)
                per_mb.append(best * 1e3 / real_mb)
                print(f"{r:<15} {real_mb:>6.1f} {best:>9.3f} {per_mb[-1]:>8.2f} "
                      f"{'' if scan is None else f'{scan:.2f}':>7}  {how}", flush=True)
                p.unlink()
            # from 4 MB on: a 1 MB Kineto input fits in the first read (one batch, no cut to search for)
            b = next((i for i, mb in enumerate(sizes) if mb >= 4 and i < len(sizes) - 1), 0)
            ratio = per_mb[-1] / per_mb[b] if per_mb[b] > 0 else float("nan")
            worst = max(worst, ratio)
            print(f"{r:<15} ms/MB at {sizes[-1]:g} MB / at {sizes[b]:g} MB: {ratio:.2f}x (flat: about 1)")
    print(f"largest ratio: {worst:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
