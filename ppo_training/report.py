"""A self-contained HTML evaluation report (images embedded as base64 PNG).

Sections: summary table and verdict, cost histograms of the test controller against the
baseline, per-segment scatter, sample rollouts (target / test / baseline lateral acceleration and
steer), and the worst segments.  The file is written atomically, so a failed run leaves no
partial report behind.
"""
from __future__ import annotations

import base64
import datetime as _dt
import html
import io
from pathlib import Path

import pandas as pd

from .evaluation import COST_COLUMNS
from .plots import cost_histogram_figure, rollout_figure


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def _histograms(test: pd.DataFrame, base: pd.DataFrame | None, names: tuple[str, str]) -> str:
    tables = {names[0]: test, **({names[1]: base} if base is not None else {})}
    return _png(cost_histogram_figure(tables))


def _scatter(test: pd.DataFrame, base: pd.DataFrame, names: tuple[str, str]) -> str:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(4.6, 4.3))
    x, y = base["total_cost"].to_numpy(), test["total_cost"].to_numpy()
    ax.scatter(x, y, s=12, alpha=0.7)
    lim = float(max(x.max(), y.max())) * 1.05
    ax.plot([0, lim], [0, lim], "k--", lw=1)
    ax.set_xlabel(f"{names[1]} total_cost")
    ax.set_ylabel(f"{names[0]} total_cost")
    ax.set_title("per segment (below the line: test better)")
    return _png(fig)


def _rollout_plot(segment: str, hist_test: dict, hist_base: dict | None, names: tuple[str, str]) -> str:
    runs = {names[0]: hist_test, **({names[1]: hist_base} if hist_base is not None else {})}
    return _png(rollout_figure(hist_test["target"], runs, title=segment))


def _table(rows: list[list[str]], header: list[str]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def build_report(test: pd.DataFrame, base: pd.DataFrame | None, names: tuple[str, str],
                 samples: dict[str, tuple[dict, dict | None]], notes: list[str]) -> str:
    """The report's HTML.

    Args:
        test, base: per-segment cost tables (same segment order); ``base`` may be None.
        names: display names of the test and baseline controllers.
        samples: ``segment -> (test histories, baseline histories)`` for the rollout plots.
        notes: lines shown under the title (data folder, overlap warnings, ...).
    """
    mt = {c: float(test[c].mean()) for c in COST_COLUMNS}
    rows = [[names[0]] + [f"{mt[c]:.4f}" for c in COST_COLUMNS]]
    verdict = ""
    if base is not None:
        mb = {c: float(base[c].mean()) for c in COST_COLUMNS}
        rows.append([names[1]] + [f"{mb[c]:.4f}" for c in COST_COLUMNS])
        rows.append([f"{names[0]} / {names[1]}"] + [f"{mt[c] / mb[c]:.3f}" if mb[c] else "-" for c in COST_COLUMNS])
        beat = mt["total_cost"] < mb["total_cost"]
        wins = int((test["total_cost"].to_numpy() < base["total_cost"].to_numpy()).sum())
        verdict = (f"<p class='{'good' if beat else 'bad'}'>{html.escape(names[0])} "
                   f"{'beat' if beat else 'did not beat'} {html.escape(names[1])}: mean total_cost "
                   f"{mt['total_cost']:.2f} vs {mb['total_cost']:.2f} ({100 * (1 - mt['total_cost'] / mb['total_cost']):+.1f}% "
                   f"better); better on {wins} of {len(test)} segments.</p>")
    parts = [f"<h1>Controller evaluation: {html.escape(names[0])}</h1>",
             "".join(f"<p class='note'>{html.escape(n)}</p>" for n in notes),
             f"<p class='note'>{len(test)} segments; generated {_dt.datetime.now():%Y-%m-%d %H:%M}</p>",
             "<h2>Summary (mean over segments)</h2>", _table(rows, ["controller", *COST_COLUMNS]), verdict,
             "<h2>Cost distributions</h2>", f"<img alt='cost histograms' src='{_histograms(test, base, names)}'>"]
    if base is not None:
        parts += [f"<img alt='per-segment scatter' src='{_scatter(test, base, names)}'>"]
    if samples:
        parts.append("<h2>Sample rollouts</h2>")
        for seg, (ht, hb) in samples.items():
            parts.append(f"<img alt='rollout {html.escape(seg)}' src='{_rollout_plot(seg, ht, hb, names)}'>")
    worst = test.sort_values("total_cost", ascending=False).head(10)
    wrows = []
    for _, r in worst.iterrows():
        b = base.loc[base["segment"] == r["segment"], "total_cost"] if base is not None else None
        wrows.append([r["segment"], f"{r['lataccel_cost']:.3f}", f"{r['jerk_cost']:.3f}", f"{r['total_cost']:.3f}",
                      f"{float(b.iloc[0]):.3f}" if b is not None and len(b) else "-"])
    parts += ["<h2>Worst segments</h2>",
              _table(wrows, ["segment", "lataccel_cost", "jerk_cost", "total_cost", f"{names[1]} total_cost"])]
    style = ("body{font-family:sans-serif;margin:24px;max-width:1250px} table{border-collapse:collapse;margin:8px 0}"
             "td,th{border:1px solid #bbb;padding:4px 10px;text-align:right} td:first-child{text-align:left}"
             "img{max-width:100%;display:block;margin:10px 0} .good{color:#176317;font-weight:bold}"
             ".bad{color:#a01010;font-weight:bold} .note{color:#555;margin:2px 0}")
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(names[0])} evaluation</title>"
            f"<style>{style}</style></head><body>{''.join(parts)}</body></html>")


def write_report(path: str | Path, html_text: str) -> Path:
    """Write the report atomically (temp file in the same folder, then rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(html_text, encoding="utf-8")
    tmp.replace(path)
    return path
