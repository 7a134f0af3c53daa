"""``MODEL_CARD.md``: a run's record (:mod:`appzoo.reports.record`) as a model card a reviewer reads.

The layout follows Hugging Face's model cards: YAML front matter (``license``, ``library_name``, ``tags``,
``datasets``, ``metrics`` and a ``model-index`` of the results), then the sections. Every name and text from
the data or the command line goes into the Markdown through :func:`~appzoo.utils.markdown.literal` and into
the front matter as a JSON string (JSON is YAML) with ``<``, ``>`` and ``&`` as ``\\u`` escapes
(:func:`_quoted`), so neither can be broken by what it quotes, nor carry markup to a renderer that allows HTML.
"""
import json

from appzoo.utils.files import write_text
from appzoo.utils.markdown import literal

#: scalars shown in the card's metrics table (all of them are in run_record.json and metrics.json)
SHOWN = ("accuracy", "macro_f1", "micro_f1", "weighted_f1", "f1", "precision", "recall", "auc", "ece", "loss")


def write(folder, record):
    write_text(folder.model_card, to_markdown(record))


def to_markdown(record):
    lines = _front_matter(record) + [f"# Model card: {literal(record['run'])}", ""]
    for section in (_model, _learning_rates, _intended_use, _data, _command, _metrics, _interval, _mistakes,
                    _limitations, _environment):
        lines += section(record)
    return "\n".join(lines) + "\n"


def _quoted(value):
    """``value`` as JSON (a YAML flow scalar or sequence), non-ASCII text kept, markup's characters escaped."""
    text = json.dumps(value, ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _front_matter(record):
    licence = record["encoder"]["licence"]
    metrics = []
    for split, result in record["metrics"].items():
        for name, value in result["scalars"].items():
            if name in SHOWN:
                metrics.append((split, name, value))
    lines = ["---", f"license: {'mit' if licence.startswith('MIT') else 'unknown'}", "library_name: appzoo",
             f"tags: {_quoted(['appzoo', record['task'], record['model']])}",
             f"datasets: {_quoted([d['path'] for d in record['data'].values()])}",
             f"metrics: {_quoted(sorted({name for _, name, _ in metrics}))}",
             "model-index:", f"- name: {_quoted(record['run'])}", "  results:",
             f"  - task: {{type: {_quoted(record['task'])}}}", "    metrics:"]
    lines += [f"    - {{type: {_quoted(name)}, name: {_quoted(f'{split} {name}')}, value: {value!r}}}"
              for split, name, value in metrics]
    return lines + ["---", ""]


def _model(record):
    encoder, best = record["encoder"], record.get("best") or {}
    lines = ["## Model", "", f"- model: {literal(record['model'])}",
             f"- encoder: {literal(encoder['kind'])}, {literal(encoder['source'])}",
             f"- encoder licence: {literal(encoder['licence'])}"]
    distill = record.get("distill")
    if distill:
        lines.append(f"- distilled from: {literal(distill['teacher'])} (temperature {distill['temperature']:g}, "
                     f"soft-loss weight {distill['alpha']:g}; the teacher's logits: {literal(distill['engine'])})")
        mine = record["metrics"]
        beside = [f"{split} {name} {_number(value)} (this model: {_number(mine[split]['scalars'].get(name))})"
                  for split, scores in (distill.get("teacher_scores") or {}).items() if split in mine
                  for name, value in scores.items() if name in SHOWN and name in mine[split]["scalars"]]
        if beside:
            lines.append("- the teacher's scores: " + "; ".join(beside))
    if best.get("step") is not None:
        lines.append(f"- best checkpoint: step {best['step']}" + (
            f", dev {literal(best['metric'])} = {best['value']:.4f}" if best.get("value") is not None else ""))
    return lines + [""]


def _learning_rates(record):
    rows = record.get("parameter_groups")
    return ["## Learning rates", ""] + groups_markdown(rows) + [""] if rows else []


def groups_markdown(rows):
    """The table of a run's parameter groups (``metrics.json``'s ``train.parameter_groups``): what each holds,
    its weights and its peak learning rate; every group follows the one warmup-and-decay schedule."""
    lines = ["| group | holds | parameters | peak learning rate |", "|---|---|---|---|"]
    lines += [f"| {literal(row['name'])} | {', '.join(literal(h) for h in row['holds'])} | {row['parameters']:,} | "
              f"{row['peak_learning_rate']:.3g} |" for row in rows]
    return lines + ["", "Each group follows the one warmup-and-decay schedule, scaled to its peak; a frozen "
                        "group is not trained."]


def _intended_use(record):
    labels = ", ".join(literal(name) for name in record["labels"])
    return ["## Intended use", "", f"Task {literal(record['task'])}: {len(record['labels'])} labels ({labels}). "
            "Trained and measured on the files below only; other text may score otherwise.", ""]


def _data(record):
    lines = ["## Data", "", "| split | file | examples | sha256 |", "|---|---|---|---|"]
    lines += [f"| {split} | {literal(d['path'])} | {d['examples']} | `{d['sha256']}` |"
              for split, d in record["data"].items()]
    others = record.get("files") or {}
    if others:
        lines += ["", "Other files the settings name: " + ", ".join(
            f"{literal(key)} {literal(f['path'])} (sha256 `{f['sha256']}`)" for key, f in others.items()) + "."]
    counted = {split: d["classes"] for split, d in record["data"].items() if d.get("classes")}
    if counted:
        names = list(dict.fromkeys(name for classes in counted.values() for name in classes))
        lines += ["", "| class | " + " | ".join(counted) + " |", "|---|" + "---|" * len(counted)]
        lines += [f"| {literal(name)} | " + " | ".join(str(c.get(name, 0)) for c in counted.values()) + " |"
                  for name in names]
    return lines + [""]


def _command(record):
    command = record.get("trained_by") or record.get("command") or {}
    lines = ["## Command", ""]
    if command.get("argv"):
        lines.append(f"{literal(' '.join(['python', 'run_trainer.py', *command['argv']]))}")
        lines.append("")
        overrides = command.get("overrides") or []
        lines.append("Overrides (`--set`): " + (", ".join(literal(o) for o in overrides) if overrides else "none"))
    else:
        lines.append("Not run from the command line (the Python API, a sweep or a search).")
    lines.append("")
    lines.append(f"In {literal(command.get('cwd', ''))}; the resolved settings are in config.json.")
    if command.get("reproduces"):  # a --do reproduce re-run (appzoo.run.reproduce)
        lines += ["", f"A reproduction of the run in {literal(command['reproduces'])}: its metrics against the "
                      f"recorded ones are in reproduce.json."]
    return lines + [""]


def _metrics(record):
    splits = record["metrics"]
    if not splits:
        return ["## Metrics", "", "Not evaluated.", ""]
    names = [n for n in SHOWN if any(n in r["scalars"] for r in splits.values())]
    lines = ["## Metrics", "", "| metric | " + " | ".join(splits) + " |", "|---|" + "---|" * len(splits)]
    lines += [f"| {name} | " + " | ".join(_number(r["scalars"].get(name)) for r in splits.values()) + " |"
              for name in names]
    per_class = {s: r["per_class_f1"] for s, r in splits.items() if r.get("per_class_f1")}
    if per_class:
        classes = list(dict.fromkeys(c for table in per_class.values() for c in table))
        lines += ["", "Per-class F1:", "", "| class | " + " | ".join(per_class) + " |",
                  "|---|" + "---|" * len(per_class)]
        lines += [f"| {literal(c)} | " + " | ".join(_number(t.get(c)) for t in per_class.values()) + " |"
                  for c in classes]
    eces = [f"{s} {r['scalars']['ece']:.4f}" for s, r in splits.items() if "ece" in r["scalars"]]
    if eces:
        lines += ["", f"Calibration: expected calibration error (ECE) {', '.join(eces)}."]
    return lines + [""]


def _interval(record):
    head = record.get("headline")
    if not head:
        return []
    lines = ["## Confidence interval", ""]
    value = _number(head["value"])
    if head["ci"] is None:
        return lines + [f"{head['split']} {literal(head['metric'])} = {value}; {literal(head['note'])}.", ""]
    low, high = head["ci"]
    examples = record["data"].get(head["split"], {}).get("examples", "the")
    return lines + [f"{head['split']} {literal(head['metric'])} = {value}, {head['level']:.0%} interval "
                    f"[{low:.4f}, {high:.4f}]: percentile bootstrap over the {examples} {head['split']} examples' "
                    f"saved predictions, {head['resamples']} resamples, seed {head['seed']}"
                    + (f" ({head['undefined_resamples']} resamples of one class, where it is undefined, left out)"
                       if head.get("undefined_resamples") else "") + ".", ""]


def _mistakes(record):
    lines = ["## What it gets wrong most", ""]
    shown = False
    for split, confusions in record["confusions"].items():
        if confusions:
            shown = True
            lines += [f"{split}:", "", "| gold | predicted | count |", "|---|---|---|"]
            lines += [f"| {literal(c['gold'])} | {literal(c['predicted'])} | {c['count']} |" for c in confusions]
            lines.append("")
    if not shown:
        lines += ["No confusions listed (no mistakes, or a task whose reader lists none).", ""]
    return lines + ["Each mistake: errors.md, report.html and `predictions/<split>.jsonl`.", ""]


def _limitations(record):
    limits = record["limitations"]
    lines = ["## Limitations", ""]
    few = limits["few_training_examples"]
    if few:
        listed = ", ".join(f"{literal(name)} ({n})" for name, n in few.items())
        lines.append(f"- classes with fewer than {limits['few_threshold']} training examples: {listed}")
    rarest, total = limits.get("rarest_in_training") or {}, limits.get("training_examples")
    if rarest and total:
        listed = ", ".join(f"{literal(name)} ({n}, {n / total:.1%})" for name, n in rarest.items())
        lines.append(f"- the rarest classes in training: {listed}; expect their F1 to vary most")
    what = "split into windows" if record.get("long_inputs") == "windows" else "cut there"
    for split, n in limits["longer_than_max_seq_len"].items():
        total = record["data"][split]["examples"]
        lines.append(f"- {split}: {n} of {total} inputs are longer than max_seq_len={record['max_seq_len']} "
                     f"tokens ({what})")
    if len(lines) == 2:
        lines.append(f"- none found: no class with fewer than {limits['few_threshold']} training examples, no input "
                     f"longer than max_seq_len")
    return lines + [""]


def _release(version):
    """A package's version as its release is named: paddlenlp 2.8.1 says ``2.8.1.post`` of itself."""
    return version.removesuffix(".post") if isinstance(version, str) else version


def _environment(record):
    versions, machine, git = record["versions"], record["machine"], record["git"]
    commit = git.get("commit") or "not a git checkout"
    if git.get("dirty"):
        commit += " (with uncommitted changes)"
    wall = record.get("wall_time_s")
    return ["## Versions and machine", "",
            "- versions: " + ", ".join(f"{k} {literal(_release(v))}" for k, v in versions.items()),
            f"- machine: {literal(machine.get('cpu') or 'unknown CPU')}, {machine.get('cores')} cores, "
            f"{literal(machine.get('platform'))}",
            f"- appzoo commit: {literal(commit)}",
            f"- wall time: {wall:.1f} s" if wall is not None else "- wall time: not recorded",
            f"- written {record['written']}; the same facts: run_record.json (record_version "
            f"{record['record_version']})", "",
            "Re-run it on the same data into a new folder (reproduce/N/ beside this card) and compare the metrics: "
            + literal(f"python run_trainer.py --param_path {record['folder']}/config.json --do reproduce"), ""]


def _number(value):
    if value is None:
        return "–"
    return f"{value:.4f}" if isinstance(value, float) else str(value)
