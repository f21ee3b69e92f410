"""The what-if predictions in words (analyze/whatif.py computes them; compare/whatif.py measures them):
report.md and report.html's "Fix this first" headline and per-finding saving, diff.md/diff.html's prediction lines."""
from __future__ import annotations

from ..result import Finding, Report


def fmt_ms(v: float) -> str:
    """A saving in ms with the digits its size deserves (0.05 ms stays 0.050, not 0.1)."""
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.1f}" if abs(v) >= 10 else f"{v:.2f}" if abs(v) >= 1 else f"{v:.3f}"


def fix_first(findings) -> str | None:
    """The headline's line: the finding (``result.Finding``) with the largest predicted saving."""
    f = next((f for f in findings if f.expected_saving_ms), None)
    if f is None:
        return None
    return (f"Fix this first: {f.title} ({f.id}) - saves ~{fmt_ms(f.expected_saving_ms)} ms "
            f"({f.expected_saving_pct:.1f} %) [{f.saving_model}, {fmt_ms(f.saving_low_ms)}-{fmt_ms(f.saving_high_ms)} ms]"
            + _llm_text(f))


def _llm_text(f: Finding) -> str:
    """The saving in the llm section's units, when the report has them."""
    parts = []
    if f.expected_saving_request_ms is not None:
        parts.append(f"~{fmt_ms(f.expected_saving_request_ms)} ms per request")
    if f.expected_tokens_per_s is not None:
        parts.append(f"~{f.expected_tokens_per_s:,.1f} generated tokens/s")
    return f"; {', '.join(parts)}" if parts else ""


def headline_lines(report: Report) -> list[str]:
    """The headline's "Fix this first" line and, with several predictions, their combined saving."""
    ff = fix_first(report.findings)
    out = [ff] if ff else []
    wi = report.what_if
    if wi is not None and len(wi.findings) > 1:
        out.append(f"Top {len(wi.findings)} fixes together: ~{fmt_ms(wi.combined_saving_ms)} ms "
                   f"({wi.combined_saving_pct:.1f} %) [{fmt_ms(wi.combined_low_ms)}-{fmt_ms(wi.combined_high_ms)} ms; "
                   f"overlaps removed, plain sum {fmt_ms(wi.sum_saving_ms)} ms]")
    return out


def saving_text(f: Finding) -> str | None:
    """A finding's prediction in words (report.md / report.html), or None when it has none."""
    if f.expected_saving_ms is None:
        return None
    return (f"~{f.expected_saving_ms:,.3f} ms ({f.expected_saving_pct:.1f} % of e2e), range "
            f"{f.saving_low_ms:,.3f}-{f.saving_high_ms:,.3f} ms{_llm_text(f)}, model {f.saving_model}: {f.saving_basis}")


def prediction_lines(p: dict) -> list[str]:
    """One line per prediction (diff.md / the CLI)."""
    return [f"{r['id']}: predicted ~{r['predicted_ms']:.3f} ms [{r['model']}, {r['low_ms']:.3f}-{r['high_ms']:.3f}], "
            f"measured {r['measured_ms']:+.3f} ms"
            + f": {r['status'].replace('_', ' ')}"
            + (f"; its categories {r['category_measured_ms']:+.3f} ms: {r['category_status'].replace('_', ' ')}"
               if r["category_measured_ms"] is not None else "") + ("; finding resolved" if r["resolved"] else "; finding still present")
            for r in p["rows"]]
