"""A sweep's ``report.html``: its table with the verdicts, its plot and the per-class F1 per setting, built
from the parts of a run's page (:mod:`appzoo.reports.html`), so the two look alike."""
import os

from appzoo.reports.html import PAGE, SPLITS, esc, image, page
from appzoo.sweep.summary import P_VALUE, format_p, format_stats
from appzoo.utils.files import write_text


def write(folder, summary):
    """``<folder>/report.html`` for a sweep: its table with the verdicts, the per-class F1 per setting
    and the sweep's plot."""
    keys, primary = summary["key_metrics"], summary["primary_metric"]
    confirmation = summary.get("confirmation_metric")
    title = f"Sweep of {summary['param_path']}"
    body = [f"<h1>{esc(title)}</h1>"]
    if summary.get("command"):
        body.append(f"<p><code>{esc(summary['command'])}</code></p>")
    body.append(f"<p>Seeds {esc(', '.join(map(str, summary['seeds'])))}; runs finished {summary['runs_finished']} of "
                f"{summary['runs_planned']}. Cells are mean ± sample std over seeds. The verdict is taken on "
                f"<b>{esc(primary)}</b> (dev), against the first setting"
                + (f"; <b>{esc(confirmation)}</b> is the confirmation on test, not for choosing" if confirmation
                   else "") + f". Welch p: {esc(P_VALUE)}.</p>")
    header = ["setting", "seeds", *keys, "wall per run (s)", f"verdict on {primary}", "Welch p"]
    if confirmation:
        header += [f"{confirmation} (confirmation)", "Welch p"]
    body.append('<table id="settings"><thead><tr>' + "".join(f"<th>{esc(h)}</th>" for h in header)
                + "</tr></thead><tbody>")
    numeric = {1, *range(2, 3 + len(keys))}  # seeds, the metrics, the wall time
    for row in summary["settings"]:
        cells = [esc(row["setting"]), row["n"], *(format_stats(row["metrics"][k]) for k in keys),
                 "–" if row["wall_time_s"]["mean"] is None else f"{row['wall_time_s']['mean']:.1f}",
                 esc(row["verdict"]), esc(format_p(row.get("verdict_p")))]
        if confirmation:
            cells += [esc(row.get("test_verdict", "–")), esc(format_p(row.get("test_verdict_p")))]
        body.append("<tr>" + "".join(f'<td class="num">{c}</td>' if i in numeric else f"<td>{c}</td>"
                                     for i, c in enumerate(cells)) + "</tr>")
    body.append("</tbody></table>")
    body.append(image(os.path.join(folder, "sweep.png"), "each setting's mean, std and runs"))
    for split in SPLITS:
        body += _per_class_f1(summary["settings"], split)
    write_text(os.path.join(folder, PAGE), page(title, body))


def _per_class_f1(settings, split):
    tables = [row.get("per_class_f1", {}).get(split, {}) for row in settings]
    names = list(dict.fromkeys(name for table in tables for name in table))
    if not names:
        return []
    lines = [f"<h2>Per-class F1 on {esc(split)}</h2>",
             "<p>Mean over seeds; a red cell: F1 0 in every run of that setting.</p>",
             f'<table class="per-class-f1" data-split="{esc(split)}"><thead><tr><th>class</th>'
             + "".join(f"<th>{esc(row['setting'])}</th>" for row in settings) + "</tr></thead><tbody>"]
    for name in names:
        cells = []
        for table in tables:
            cell = table.get(name)
            if cell is None:
                cells.append("<td>–</td>")
            elif cell["zero_in_every_run"]:
                cells.append(f'<td class="num" style="background:#fecaca">{cell["mean"]:.4f} ⚠</td>')
            else:
                cells.append(f'<td class="num" style="background:rgba(37,99,235,{0.5 * cell["mean"]:.2f})">'
                             f'{cell["mean"]:.4f}</td>')
        lines.append(f"<tr><td>{esc(name)}</td>{''.join(cells)}</tr>")
    return lines + ["</tbody></table>"]

