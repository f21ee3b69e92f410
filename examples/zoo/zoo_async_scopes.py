"""Planted: overlapping request scopes in concurrent asyncio tasks on one thread (issue 24 item 2).

Each round starts task A (a 50 ms request, 4 tokens) and, 10 ms later, task B (a 90 ms request, 4 tokens);
both wrap their work in ``scope("request", tokens=4, batch=1)`` and call ``mark_token()`` per token, so
the two ranges overlap on the event loop's thread.  Truth (self-timed with perf_counter_ns in each task):
every request's start, end and token times, printed as one JSON line at the end.
"""
import asyncio
import json
import os
import time

from inferscope import mark_token, scope

ROUNDS = int(os.environ.get("ZOO_ITERS", "4"))
TOKENS = 4
truth: list = []


async def request(label: str, delay_s: float, total_s: float) -> None:
    await asyncio.sleep(delay_s)
    t0 = time.perf_counter_ns()
    toks = []
    with scope("request", tokens=TOKENS, batch=1):
        for k in range(TOKENS):
            await asyncio.sleep(total_s / TOKENS)
            toks.append(time.perf_counter_ns())
            mark_token()
    t1 = time.perf_counter_ns()
    truth.append({"task": label, "start_ns": t0, "end_ns": t1, "token_ns": toks})


async def main() -> None:
    for _ in range(ROUNDS):
        await asyncio.gather(request("A", 0.0, 0.050), request("B", 0.010, 0.090))


with scope("inference"):
    asyncio.run(main())
print(json.dumps({"requests": sorted(truth, key=lambda r: r["start_ns"])}))
