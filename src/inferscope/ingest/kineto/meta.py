"""Kineto top-level metadata -> ``Trace.meta``: devices, tool versions, profiler config and
``distributedInfo`` (type-checked and bounded)."""
from __future__ import annotations

_VERSION_KEYS = ("schemaVersion", "cuda_runtime_version", "cuda_driver_version", "cupti_version",
                 "hip_runtime_version", "roctracer_version", "torch_version", "pytorch_version")
_CONFIG_KEYS = ("with_stack", "record_shapes", "profile_memory", "with_flops", "with_modules")


def _scalar(v):
    if isinstance(v, bool) or isinstance(v, (int, float)):
        return v
    if isinstance(v, str) and len(v) <= 64:
        return v
    return None


_PG_MAX = 64            # process groups kept from distributedInfo.pg_config
_PG_RANKS_MAX = 1024    # ranks kept per process group


def _distributed(di) -> dict | None:
    """distributedInfo (torch.distributed: rank, world_size, backend, nccl_version, pg_count, pg_config),
    type-checked and bounded; None when absent or without a rank."""
    if not isinstance(di, dict) or not isinstance(di.get("rank"), int) or isinstance(di.get("rank"), bool):
        return None
    out: dict = {"rank": di["rank"]}
    for k in ("world_size", "pg_count"):
        if isinstance(di.get(k), int) and not isinstance(di.get(k), bool):
            out[k] = di[k]
    for k in ("backend", "nccl_version"):
        if isinstance(di.get(k), str):
            out[k] = di[k][:64]
    pgs = []
    for pg in di.get("pg_config") if isinstance(di.get("pg_config"), list) else []:
        if not isinstance(pg, dict) or len(pgs) >= _PG_MAX:
            continue
        ranks = pg.get("ranks") if isinstance(pg.get("ranks"), list) else []
        pgs.append({"pg_name": str(pg.get("pg_name", ""))[:64], "pg_desc": str(pg.get("pg_desc", ""))[:64],
                    "backend_config": str(pg.get("backend_config", ""))[:64],
                    "pg_size": pg["pg_size"] if isinstance(pg.get("pg_size"), int) and not isinstance(pg.get("pg_size"), bool) else None,
                    "ranks": [r for r in ranks[:_PG_RANKS_MAX] if isinstance(r, int) and not isinstance(r, bool)]})
    if pgs:
        out["pg_config"] = pgs
    return out


def _meta(top, fname: str, warnings: list) -> dict:
    meta: dict = {"source_format": "kineto", "source_file": fname}
    devices = []
    versions: dict = {}
    config: dict = {}
    if top is not None:
        dp = getattr(top, "deviceProperties", None)
        if isinstance(dp, list):
            for d in dp:
                if not isinstance(d, dict):
                    continue
                cc = None
                if isinstance(d.get("computeMajor"), int) and isinstance(d.get("computeMinor"), int):
                    cc = f"{d['computeMajor']}.{d['computeMinor']}"
                devices.append({
                    "id": d["id"] if isinstance(d.get("id"), int) else len(devices),
                    "name": d["name"][:128] if isinstance(d.get("name"), str) else None,
                    "total_memory_bytes": d.get("totalGlobalMem") if isinstance(d.get("totalGlobalMem"), int) else None,
                    "sm_count": d.get("numSms") if isinstance(d.get("numSms"), int) else None,
                    "compute_capability": cc,
                })
        for k in _VERSION_KEYS:
            v = _scalar(getattr(top, k, None))
            if v is not None:
                versions[k] = v
        for k in _CONFIG_KEYS:
            v = getattr(top, k, None)
            if isinstance(v, (bool, int)) and not isinstance(v, float):
                config[k] = bool(v)
    meta["devices"] = devices
    meta["tool_versions"] = versions
    dist = _distributed(getattr(top, "distributedInfo", None)) if top is not None else None
    if dist:
        meta["distributed"] = dist
    if config:
        meta["profiler_config"] = config
    meta["warnings"] = list(warnings)
    return meta
