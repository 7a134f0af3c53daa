"""``report.html``: a run's report as one self-contained page, and the parts another page is built from.

Everything is inline: the style, a few lines of script (the filters of the
mistakes table) and the plots as base64 PNGs. The file can be mailed,
attached to an issue or opened offline; it loads nothing from anywhere.
It is built from what ``report.md`` and ``errors.md`` are built from: the
metrics, the ``plots/`` folder and the readers' mistakes
(:mod:`appzoo.reports.mistakes`), so the three never disagree. A sweep's page
(:mod:`appzoo.sweep.page`) is built from the same parts: :func:`page`,
:func:`image`, :func:`esc`.
"""
import base64
import html
import os

from appzoo.store.archive import RunFolder
from appzoo.store.run_files import BY_KEY
from appzoo.utils.files import read_json, read_jsonl, write_text
from appzoo.utils.fonts import cjk_webfont
from appzoo.reports import label_issues
from appzoo.metrics import scalars
from appzoo.store.run_result import SPLITS, RunResult

#: mistakes listed per split (a class's most confident first); the rest are counted
MAX_ROWS = 500
#: classes up to which the confusion matrix is drawn as a table (a wider one is in metrics.json)
MAX_MATRIX = 60
PAGE = BY_KEY["report_html"].name  # a sweep's page has the name of a run's

STYLE = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI","appzoo CJK","Noto Sans CJK SC","Microsoft YaHei",sans-serif;
 margin:0 auto;max-width:1200px;padding:0 24px 48px;color:#1f2328}select,option,input,button{font:inherit}
h1{font-size:24px;margin:24px 0 4px}h2{font-size:19px;margin:32px 0 8px;border-bottom:1px solid #d0d7de}
h3{font-size:15px;margin:20px 0 6px}
table{border-collapse:collapse;margin:6px 0 14px}th,td{padding:3px 8px;border:1px solid #d0d7de;text-align:left;
 vertical-align:top}th{background:#f6f8fa}td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.warn{color:#9a3412;background:#fff7ed;border-left:4px solid #ea580c;padding:4px 10px;margin:4px 0}
.note{background:#f0f9ff;border-left:4px solid #0284c7;padding:4px 10px;margin:4px 0}
.bar{display:block;height:7px;background:#2563eb;margin:1px 0}.legend .bar{display:inline-block;margin-right:4px}
.bar.r{background:#16a34a}.bar.f{background:#9333ea}td.bars{min-width:210px}
.splits{display:grid;grid-template-columns:repeat(auto-fit,minmax(540px,1fr));gap:0 32px}
tr.zero td{background:#fef2f2}
table.cm td{min-width:34px;text-align:right;font-variant-numeric:tabular-nums}table.cm th span{writing-mode:vertical-rl;text-orientation:mixed;
 white-space:nowrap;display:inline-block}td.detail{white-space:nowrap}
.top{display:flex;flex-wrap:wrap;gap:0 32px;align-items:flex-start}
img{max-width:100%;border:1px solid #d0d7de;margin:4px 8px 8px 0}
.filters{position:sticky;top:0;background:#fff;padding:8px 0;border-bottom:1px solid #d0d7de;z-index:1}
.filters label{margin-right:14px}#shown{color:#57606a}
td.text{max-width:700px;word-break:break-word}
.ent{border-radius:3px;padding:0 2px;margin:0 1px}.g{background:#dcfce7;border-bottom:2px solid #16a34a}
.p{background:#dbeafe;border-bottom:2px solid #2563eb}.bad{outline:2px solid #dc2626}
.t{font-size:10px;color:#57606a;vertical-align:super;margin-left:1px}.line{color:#57606a;font-size:12px}
.legend span{margin-right:12px}
pre.card{white-space:pre-wrap;background:#f6f8fa;border:1px solid #d0d7de;padding:8px 12px;font-size:12px}
"""

# Rows carry their split, gold and predicted class as data attributes; the three selects show the rows that match.
SCRIPT = """
(function () {
  var counter = document.getElementById('shown');
  if (!counter) { return; }
  var selects = document.querySelectorAll('.filters select');
  var rows = document.querySelectorAll('#mistakes tbody tr');
  function apply() {
    var want = {};
    selects.forEach(function (s) { want[s.name] = s.value; });
    var shown = 0;
    rows.forEach(function (r) {
      var ok = Object.keys(want).every(function (k) { return want[k] === '*' || r.dataset[k] === want[k]; });
      r.hidden = !ok;
      if (ok) { shown += 1; }
    });
    counter.textContent = shown + ' of ' + rows.length + ' rows shown';
  }
  selects.forEach(function (s) { s.addEventListener('change', apply); });
  apply();
}());
"""


def esc(value):
    return html.escape(str(value), quote=True)


def page(title, body):
    """A whole page: ``body`` is a list of HTML strings; the glyphs of its Chinese come with it
    (:func:`appzoo.utils.fonts.cjk_webfont`), so it reads the same on a machine with no CJK font."""
    return "\n".join([
        "<!DOCTYPE html>", '<html lang="zh-CN"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        '<link rel="icon" href="data:,">',  # no favicon request: the page loads nothing
        f"<title>{esc(title)}</title>{cjk_webfont(title + ''.join(body))}<style>{STYLE}</style></head><body>",
        *body, f"<script>{SCRIPT}</script>", "</body></html>", ""])


def image(path, alt):
    """An ``<img>`` with the PNG at ``path`` inline, or nothing when there is no such file."""
    if not os.path.exists(path):
        return ""
    with open(path, "rb") as f:
        data = base64.b64encode(f.read()).decode("ascii")
    return f'<img alt="{esc(alt)}" src="data:image/png;base64,{data}">'


def _number(value):
    return f"{value:.4f}" if isinstance(value, float) else esc(value)


# ------------------------------------------------------------- a run
def write(output_dir, metrics, labels, mistakes=None):
    """Write ``<output_dir>/report.html``. ``mistakes``: ``{split: described}``
    from :func:`appzoo.reports.mistakes.write` (None or empty: no mistakes table)."""
    name = os.path.basename(os.path.abspath(output_dir))
    plots = RunFolder(output_dir).plots
    body = [f"<h1>Run report: {esc(name)}</h1>"]
    result = RunResult.from_json(metrics)  # metrics: metrics.json's content
    best = result.best
    if best:
        value = f", dev {esc(best['metric'])} = {best['value']:.4f}" if best.get("value") is not None else ""
        body.append(f"<p>Best checkpoint: step {esc(best['step'])}{value}. Wall time "
                    f"{result.wall_time_s or 0:.1f} s.</p>")
        if best.get("note"):
            body.append(f'<p class="note">Note: {esc(best["note"])}</p>')
    body += [f'<p class="warn">{esc(line)}</p>' for split in SPLITS
             for line in (result.split(split) or {}).get("class_warnings", [])]
    body += ['<div class="top"><div>', *_metrics_table(result.splits()), "</div>",
             image(os.path.join(plots, "training_curve.png"), "training curve"), "</div>"]
    body += _card_section(RunFolder(output_dir))
    body.append('<div class="splits">')
    for split in SPLITS:
        if result.split(split) is not None:
            body += ["<section>", *_split_section(split, result.split(split), labels, plots), "</section>"]
    body.append("</div>")
    body += _mistakes_section(mistakes or {})
    body += _label_issues_section(RunFolder(output_dir))
    write_text(RunFolder(output_dir).report_html, page(f"Run report: {name}", body))


def _card_section(folder):
    """A link to the run's model card (appzoo.reports.card), and its text inline, folded: the page stays
    self-contained when it is mailed without the card."""
    if not os.path.exists(folder.model_card):
        return []
    with open(folder.model_card, encoding="utf-8") as f:
        text = f.read()
    card = os.path.basename(folder.model_card)
    recorded = read_json(folder.run_record, "record of the run") if os.path.exists(folder.run_record) else {}
    head = recorded.get("headline")
    interval = ""
    if head and head.get("ci"):  # appzoo.reports.record: the headline metric's bootstrap interval
        interval = (f'<p id="card-headline">{esc(head["split"])} {esc(head["metric"])} {head["value"]:.4f}, '
                    f'{head["level"]:.0%} interval [{head["ci"][0]:.4f}, {head["ci"][1]:.4f}] (percentile bootstrap '
                    f'over the {esc(head["split"])} examples, {head["resamples"]} resamples, seed {head["seed"]}).</p>')
    return ['<h2 id="model-card">Model card</h2>', interval,
            f'<p><a id="card-link" href="{esc(card)}">{esc(card)}</a>: the model, its data (sha256, class counts), '
            f'the command, the metrics with a bootstrap interval, what it gets wrong, its limitations, versions and '
            f'machine; the same facts as JSON in <code>{esc(os.path.basename(folder.run_record))}</code>.</p>',
            f'<details id="card"><summary>Show the card</summary><pre class="card">{esc(text)}</pre></details>']


def _metrics_table(metrics):
    """``metrics``: ``{split: its metrics}`` (RunResult.splits)."""
    splits = [s for s in SPLITS if s in metrics]
    if not splits:
        return []
    names = list(dict.fromkeys(k for s in splits for k in scalars(metrics[s])))
    lines = ["<h2>Metrics</h2>", "<table id=\"metrics\"><thead><tr><th>metric</th>"
             + "".join(f"<th>{s}</th>" for s in splits) + "</tr></thead><tbody>"]
    for key in names:
        cells = "".join(f'<td class="num">{_number(scalars(metrics[s]).get(key, "–"))}</td>' for s in splits)
        lines.append(f"<tr><td>{esc(key)}</td>{cells}</tr>")
    return lines + ["</tbody></table>"]


def _split_section(split, result, labels, plots):
    lines = [f"<h2>{esc(split)}</h2>"]
    table = result.get("per_class") or result.get("per_type")
    if table:
        zero = set(result.get("zero_f1_classes") or ())
        lines += ["<h3>Per class</h3>", '<p class="legend"><span><i class="bar" style="width:20px"></i>precision'
                  '</span><span><i class="bar r" style="width:20px"></i>recall</span><span><i class="bar f" '
                  'style="width:20px"></i>F1</span></p>',
                  '<table class="per-class"><thead><tr><th>class</th><th>support</th><th>precision</th>'
                  '<th>recall</th><th>F1</th><th></th></tr></thead><tbody>']
        for name, row in table.items():
            bars = "".join(f'<i class="bar {c}" style="width:{200 * row[k]:.0f}px" title="{k} {row[k]:.4f}"></i>'
                           for k, c in (("precision", ""), ("recall", "r"), ("f1", "f")))
            lines.append(f'<tr{" class=zero" if name in zero else ""}><td>{esc(name)}</td>'
                         f'<td class="num">{row["support"]}</td><td class="num">{row["precision"]:.4f}</td>'
                         f'<td class="num">{row["recall"]:.4f}</td><td class="num">{row["f1"]:.4f}</td>'
                         f'<td class="bars">{bars}</td></tr>')
        lines.append("</tbody></table>")
    matrix = result.get("confusion_matrix")
    if matrix and len(matrix) == len(labels) <= MAX_MATRIX:
        lines += _confusion(matrix, labels)
    elif matrix:
        lines.append(f"<p>The confusion matrix ({len(matrix)} classes) is in <code>metrics.json</code>.</p>")
    calibration = result.get("calibration")
    if calibration:
        before = result.get("ece_before_scaling")
        lines += ["<h3>Calibration</h3>",
                  f"<p>ECE {calibration['ece']:.4f}" + (f" (before temperature scaling {before:.4f})"
                                                         if before is not None else "")
                  + f"; mean confidence {calibration['mean_confidence']:.4f} at accuracy "
                  f"{calibration['accuracy']:.4f}"
                  + (f"; temperature {calibration['temperature']:.3f}" if calibration.get("temperature") else "")
                  + ".</p>", image(os.path.join(plots, f"reliability_{split}.png"), f"reliability diagram, {split}")]
    curves = image(os.path.join(plots, f"thresholds_{split}.png"), f"threshold curves, {split}")
    if curves:
        lines += ["<h3>Curves</h3>", curves]
    return lines


def _confusion(matrix, labels):
    top = max((v for row in matrix for v in row), default=0) or 1
    lines = ["<h3>Confusion matrix</h3>", "<p>Rows: gold class; columns: predicted class; counts.</p>",
             '<table class="cm"><thead><tr><th>gold \\ predicted</th>'
             + "".join(f"<th><span>{esc(name)}</span></th>" for name in labels) + "</tr></thead><tbody>"]
    for name, row in zip(labels, matrix):
        cells = []
        for j, value in enumerate(row):
            shade = value / top
            colour = f"rgba(22,163,74,{shade:.2f})" if labels[j] == name else f"rgba(220,38,38,{shade:.2f})"
            cells.append(f'<td style="background:{colour}">{value}</td>')
        lines.append(f"<tr><th>{esc(name)}</th>{''.join(cells)}</tr>")
    return lines + ["</tbody></table>"]


def _mistakes_section(mistakes):
    described = {split: m for split, m in mistakes.items() if m is not None}
    if not described:
        return []
    rows, total = [], 0
    for split, m in described.items():
        total += len(m["rows"])
        rows += [(split, r, m.get("sentences", {})) for r in _first(m["rows"])]
    lines = ["<h2>Mistakes</h2>"]
    if not rows:
        return lines + ["<p>No mistakes.</p>"]
    if total > len(rows):
        lines.append(f"<p>{len(rows)} of {total} mistakes listed: per split, the first {MAX_ROWS}, each class's most "
                     f"confident first. All predictions: <code>predictions/&lt;split&gt;.jsonl</code>.</p>")
    if any(sentences for _, _, sentences in rows):
        lines.append('<p class="legend"><span class="ent g">gold entity</span><span class="ent p">predicted entity'
                     '</span><span class="ent g bad">this row\'s entity</span></p>')
    lines.append('<div class="filters">')
    for key, title in (("split", "split"), ("gold", "gold class"), ("predicted", "predicted class"),
                       ("kind", "kind")):
        values = sorted({r[key] if key != "split" else split for split, r, _ in rows})
        options = "".join(f'<option value="{esc(v)}">{esc(v)}</option>' for v in values)
        lines.append(f'<label>{title} <select name="{key}"><option value="*">all</option>{options}</select></label>')
    lines += ['<span id="shown"></span></div>', '<table id="mistakes"><thead><tr><th>split</th><th>kind</th>'
              '<th>gold</th><th>predicted</th><th>confidence</th><th>text</th><th>note</th></tr></thead><tbody>']
    for split, r, sentences in rows:
        sentence = sentences.get(r.get("index"), sentences.get(str(r.get("index"))))
        text = _highlight(sentence, r) if sentence else esc(r["text"])
        confidence = "–" if r["confidence"] is None else f"{r['confidence']:.3f}"
        lines.append(f'<tr data-split="{esc(split)}" data-gold="{esc(r["gold"])}" '
                     f'data-predicted="{esc(r["predicted"])}" data-kind="{esc(r["kind"])}"><td>{esc(split)}</td>'
                     f'<td>{esc(r["kind"])}</td><td>{esc(r["gold"])}</td><td>{esc(r["predicted"])}</td>'
                     f'<td class="num">{confidence}</td><td class="text">{text}</td>'
                     f'<td class="detail">{esc(r.get("detail") or "")}</td></tr>')
    return lines + ["</tbody></table>"]


def _label_issues_section(folder):
    """The audit's suspected mislabeled training examples (``trainer.audit_labels``): the note, the classes and
    the first suspects, rarest given class first, as audit.md has them."""
    if not (os.path.exists(folder.audit_json) and os.path.exists(folder.label_issues)):
        return []
    summary = read_json(folder.audit_json, "audit").get("labels")
    if not summary:
        return []
    rows = label_issues.rare_first(read_jsonl(folder.label_issues), summary)[:label_issues.SHOWN]
    lines = ["<h2>Label issues</h2>", f'<p class="note">{esc(summary["note"])}.</p>',
             "<table><thead><tr><th>class</th><th>training examples</th><th>suspects</th><th>share</th></tr>"
             "</thead><tbody>"]
    lines += [f'<tr><td>{esc(c["class"])}</td><td class="num">{c["examples"]}</td><td class="num">{c["suspects"]}'
              f'</td><td class="num">{c["share"]:.1%}</td></tr>' for c in summary["classes"]]
    lines.append("</tbody></table>")
    if rows:
        lines += [f"<p>{len(rows)} of {summary['suspects']} suspects, rarest given class first; all of them: "
                  f"<code>label_issues.jsonl</code>.</p>", "<table><thead><tr><th>rank</th><th>line</th>"
                  "<th>given</th><th>suggested</th><th>score</th><th>text</th></tr></thead><tbody>"]
        lines += [f'<tr><td class="num">{r["rank"]}</td><td>{esc(r["source"] or r["index"])}</td>'
                  f'<td>{esc(label_issues.names(r["given"]))}</td><td>{esc(label_issues.names(r["suggested"]))}</td>'
                  f'<td class="num">{r["score"]:.3f}</td><td class="text">{esc(r["text"])}</td></tr>' for r in rows]
        lines.append("</tbody></table>")
    return lines


def _first(rows):
    """At most :data:`MAX_ROWS` rows, spread over the classes, each class's most confident first."""
    by_class = {}
    for row in rows:
        by_class.setdefault((row["kind"], row["class"]), []).append(row)
    groups = [sorted(g, key=lambda r: -(r["confidence"] or 0.0)) for g in by_class.values()]
    chosen, depth = [], 0
    while len(chosen) < MAX_ROWS and any(depth < len(g) for g in groups):
        chosen += [g[depth] for g in groups if depth < len(g)][:MAX_ROWS - len(chosen)]
        depth += 1
    return sorted(chosen, key=lambda r: (r["kind"], str(r["class"]), -(r["confidence"] or 0.0)))


def _highlight(sentence, row):
    """The sentence twice, gold entities marked on the first line and predicted ones on the second; the
    entity this row is about is outlined."""
    pieces = sentence["pieces"]
    mine = tuple(row.get("span") or ())

    def line(entities, css):
        out, i = [], 0
        for kind, start, end in sorted(entities, key=lambda e: e[1]):
            if start < i:  # overlapping spans cannot come from one tag sequence; keep the first
                continue
            out.append(esc("".join(pieces[i:start])))
            text = "".join(pieces[start:end])
            bad = " bad" if (start, end) == mine else ""
            out.append(f'<span class="ent {css}{bad}">{esc(text)}<span class="t">{esc(kind)}</span></span>')
            i = end
        out.append(esc("".join(pieces[i:])))
        return "".join(out)

    return (f'<div><span class="line">gold</span> {line(sentence["gold"], "g")}</div>'
            f'<div><span class="line">pred</span> {line(sentence["predicted"], "p")}</div>')
