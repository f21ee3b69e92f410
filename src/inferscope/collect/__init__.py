"""Live collection (``inferscope run`` and the ``scope()`` library API).

Modules: config of a run lives in ``inferscope.config``; here:
  buffer.py     bounded ring buffer of events (INFERSCOPE_TRACE_SIZE_MB)
  classify.py   code object -> domain (tokenization / preprocessing / framework / user / neutral)
  sampler.py    CPU/Python sampling thread (sys._current_frames + per-thread CPU clocks)
  system.py     psutil / getrusage counters, NUMA placement
  nvml.py       GPU counters through NVML (optional)
  torchprof.py  torch.profiler for the whole run, exported as Chrome JSON, merged on one clock
  session.py    one collection session: starts/stops collectors, builds and saves the Trace
  session_trace.py  the session's Trace: build, crash-journal flush, finalize (save)
  session_meta.py   the trace's meta: meta.collection, tool versions, devices, sampling-rate warning
  api.py        scope(), mark(), mark_token(), serve_metrics(); the collected trace for save_report() (app.py)
  bootstrap.py  started by the injected sitecustomize in the child of ``inferscope run``
  (the parent side of ``inferscope run`` is ..run_command: it writes reports, so it lives outside collect/)
Nothing here is imported by ``import inferscope``.
"""
