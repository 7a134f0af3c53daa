"""``report.md``, ``report.html`` and plots in the output folder, from the metrics, the log and the mistakes."""
import os

from appzoo.params.inference import CAPABILITIES
from appzoo.store.archive import RunFolder
from appzoo.store.run_result import KEYS, RunResult, against_fp32, aside_entries
from appzoo.reports import card, fidelity, html as report_html
from appzoo.task import floor as floors
from appzoo.utils.files import write_text
from appzoo.utils.markdown import literal
from appzoo.metrics import scalars
from appzoo.utils.fonts import pyplot

EVALS_KEY = KEYS["evals"]


def write(output_dir, metrics, history, labels, plots=True, mistakes=None, html=True):
    """Write report.md, report.html (:mod:`appzoo.reports.html`; ``mistakes``:
    ``{split: described}`` of :func:`appzoo.reports.mistakes.write`; ``html`` False:
    report.md only, for an eval beside the run's own, whose mistakes it does
    not write) and, when ``plots``, plots/*.png. Label names go into report.md as
    :func:`~appzoo.utils.markdown.literal`."""
    result = RunResult.from_json(metrics)  # metrics: metrics.json's content
    images = _plots(output_dir, metrics, history, labels) if plots else []
    lines = [f"# Run report: {literal(os.path.basename(os.path.abspath(output_dir)))}", ""]
    best = result.best
    if best:
        lines += [f"Best checkpoint: step {best['step']}"
                  + (f", dev {best['metric']} = {best['value']:.4f}" if best.get("value") is not None else ""), ""]
        if best.get("note"):  # the runner's under-training note
            lines += [f"Note: {best['note']}", ""]
    groups = result.parameter_groups
    if groups:
        lines += ["## Learning rates", ""] + card.groups_markdown(groups) + [""]
    if result.floor:  # the runner's: what the untrained encoder scores (appzoo.task.floor)
        lines += _floor(result.floor) + [""]
    if result.evaluated_with and result.splits():  # the runner's engine and precision
        lines += [f"Evaluated on {_engine(result.evaluated_with, in_words=True)}.", ""]
    for split, split_metrics in result.splits().items():
        lines += [f"## {split}", "", "| metric | value |", "|---|---|"]
        lines += [f"| {k} | {v:.4f} |" for k, v in scalars(split_metrics).items()]
        table = split_metrics.get("per_class") or split_metrics.get("per_type")
        if table:
            lines += ["", "| class | precision | recall | f1 | support |", "|---|---|---|---|---|"]
            lines += [f"| {literal(name)} | {row['precision']:.4f} | {row['recall']:.4f} | {row['f1']:.4f} | "
                      f"{row['support']} |" for name, row in table.items()]
        if split_metrics.get("class_warnings"):  # appzoo.reports.mistakes: classes never predicted or with F1 0
            lines += [""] + [f"- {literal(line)}" for line in split_metrics["class_warnings"]]
        lines += _against_fp32(split_metrics, split, result.evaluated_with) + [""]
    for label, engine, splits in aside_entries(result):  # evals beside the run's own (appzoo.run.modes)
        for split, split_metrics in splits.items():
            lines += [f"## {split} on {_engine(engine)}", "", f"Evaluated later, beside the numbers above "
                      f"(`{EVALS_KEY}` / `{label}` in metrics.json).", "", "| metric | value |", "|---|---|"]
            lines += [f"| {k} | {v:.4f} |" for k, v in scalars(split_metrics).items()]
            lines += _against_fp32(split_metrics, split, engine) + [""]
    folder = RunFolder(output_dir)
    if os.path.exists(folder.model_card):  # appzoo.reports.card, written just before
        lines += [f"The model card: [{os.path.basename(folder.model_card)}]({os.path.basename(folder.model_card)}) "
                  f"(data, command, metrics with a bootstrap interval, limitations, versions; as JSON: "
                  f"{os.path.basename(folder.run_record)}).", ""]
    if os.path.exists(RunFolder(output_dir).errors):
        lines += ["The mistakes of each evaluated split, class by class: [errors.md](errors.md); every "
                  "prediction: `predictions/<split>.jsonl`.", ""]
    if images:
        lines += ["## Plots", ""] + [f"![{name}](plots/{name})" for name in images] + [""]
    lines.append(f"Wall time: {result.wall_time_s or 0:.1f} s")
    write_text(RunFolder(output_dir).report, "\n".join(lines) + "\n")
    if html:
        report_html.write(output_dir, metrics, labels, mistakes)


def _floor(entry):
    """report.md's line of the run's floor, and its warning when the run ended below it."""
    floor = floors.from_json(entry)
    numbers = {k: v for k, v in floor.details.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    measured = ", ".join(f"{k.replace('_', ' ')} {v:.4f}" if isinstance(v, float) else f"{k.replace('_', ' ')} {v}"
                         for k, v in numbers.items())
    extra = "".join(f"; {k} `{v}`" for k, v in floor.details.items() if k not in numbers and "`" not in str(v))
    line = (f"Floor ({floor.name}, before training): {floor.split} {floor.metric} = {floor.value:.4f}"
            + (f" ({measured}{extra})" if floor.details else "") + f". {floor.how[0].upper()}{floor.how[1:]}"
            + (f" (measured in {entry['seconds']:.1f} s, part of the wall time)." if "seconds" in entry else "."))
    final = entry.get("final")
    if final is None:
        return [line]
    verdict = floor.verdict(final)
    return [line, "", f"Warning: {verdict}." if verdict else
            f"The run's {floor.split} {floor.metric} {final:.4f} is above it by {final - floor.value:+.4f}."]


def _against_fp32(split_metrics, split, engine):
    """report.md's lines of a lower precision's comparison with fp32 (appzoo.reports.fidelity)."""
    comparison = against_fp32(split_metrics)
    if not comparison:
        return []
    lines = ["", f"Against fp32 (the dygraph model) on the same {split} set:", ""]
    lines += fidelity.to_markdown(comparison, literal)
    flagged = fidelity.warnings(comparison, split, _engine(engine) if engine else "a lower precision")
    return lines + ([""] + [f"- warning: {literal(line)}" for line in flagged] if flagged else [])


def _engine(engine, in_words=False):
    """``onnxruntime, int8 (dynamic quantization)`` from metrics.json's ``{"engine", "precision", ...}``;
    ``in_words``: what the engine runs said first (its CAPABILITIES row), ``the Paddle model (engine dygraph),
    fp32``, for a reader who does not know the engines' names."""
    how = f" ({engine['quantization']} quantization)" if engine.get("quantization") else ""
    runs = getattr(CAPABILITIES.get(engine["engine"]), "runs", None) if in_words else None
    named = f"{runs} (engine {engine['engine']})" if runs else engine["engine"]
    fitted = engine.get("fitted_on_dev")
    rules = f", with {', '.join(f'`{key}`' for key in fitted)} fitted on dev by this eval" if fitted else ""
    return f"{named}, {engine['precision']}{how}{rules}"


def _plots(output_dir, metrics, history, labels):
    """plots/*.png of a run (``metrics``: metrics.json's content); the names written."""
    result = RunResult.from_json(metrics)
    plt = pyplot()
    folder = RunFolder(output_dir).plots
    os.makedirs(folder, exist_ok=True)
    written = []
    train = [r for r in history if "loss" in r]
    dev = [r for r in history if any(k.startswith("dev_") for k in r)]
    if train:
        fig, ax = plt.subplots(figsize=(7, 4))
        ax.plot([r["step"] for r in train], [r["loss"] for r in train], label="train loss")
        if dev and "dev_loss" in dev[0]:
            ax.plot([r["step"] for r in dev], [r["dev_loss"] for r in dev], "o-", label="dev loss")
        ax.set_xlabel("step")
        ax.set_ylabel("loss")
        handles, names = ax.get_legend_handles_labels()
        if dev:
            metric = (result.best or {}).get("metric")
            key = f"dev_{metric}"
            if metric and key in dev[0] and not metric.endswith("loss"):
                right = ax.twinx()
                right.plot([r["step"] for r in dev], [r[key] for r in dev], "s--", color="tab:green",
                           label=f"dev {metric}")
                right.set_ylabel(f"dev {metric}")
                more = right.get_legend_handles_labels()
                handles, names = handles + more[0], names + more[1]
        # one legend below the axes: inside, it covered the last points (a one-epoch run's only dev point)
        ax.legend(handles, names, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=3, fontsize=8,
                  frameon=False)
        ax.set_title("Training curve")
        fig.tight_layout()
        _save(fig, os.path.join(folder, "training_curve.png"))
        plt.close(fig)
        written.append("training_curve.png")
    for split, split_metrics in result.splits().items():
        matrix = split_metrics.get("confusion_matrix")
        if matrix and len(matrix) <= 40:
            names = labels
            size = max(4, 0.5 * len(names) + 2)
            fig, ax = plt.subplots(figsize=(size, size))
            ax.imshow(matrix, cmap="Blues")
            ax.set_xticks(range(len(names)), names, rotation=90)
            ax.set_yticks(range(len(names)), names)
            top = max(max(row) for row in matrix) or 1
            for i, row in enumerate(matrix):
                for j, value in enumerate(row):
                    ax.text(j, i, str(value), ha="center", va="center", fontsize=8,
                            color="white" if value > top / 2 else "black")
            ax.set_xlabel("predicted")
            ax.set_ylabel("gold")
            ax.set_title(f"Confusion matrix ({split})")
            fig.tight_layout()
            name = f"confusion_{split}.png"
            _save(fig, os.path.join(folder, name))
            plt.close(fig)
            written.append(name)
    for split, split_metrics in result.splits().items():
        table = split_metrics.get("calibration")
        if table and table["bins"]:
            written.append(_reliability(plt, table, split, folder))
        curves = split_metrics.get("curves")
        if curves:
            written.append(_threshold_views(plt, curves, split, folder))
    return written


def _threshold_views(plt, curves, split, folder):
    """A matcher's PR and ROC curves and its precision, recall and F1 against the
    threshold; for a multi-label model the last of these per label. The threshold in
    use is marked."""
    if "pr" in curves:  # one binary score
        fig, axes = plt.subplots(1, 3, figsize=(15, 4.5))
        axes[0].plot(curves["pr"]["recall"], curves["pr"]["precision"])
        axes[0].set(xlabel="recall", ylabel="precision", title=f"Precision-recall ({split})", xlim=(0, 1),
                    ylim=(0, 1.02))
        axes[1].plot(curves["roc"]["fpr"], curves["roc"]["tpr"])
        axes[1].plot([0, 1], [0, 1], "--", color="gray")
        axes[1].set(xlabel="false positive rate", ylabel="true positive rate", title=f"ROC ({split})")
        _by_threshold(axes[2], curves, f"By threshold ({split})")
        axes[2].legend(loc="best")
    else:  # multi-label: one panel per label
        names = list(curves)[:40]
        cols = min(4, len(names))
        rows = -(-len(names) // cols)
        fig, axes = plt.subplots(rows, cols, figsize=(4 * cols, 3 * rows), squeeze=False)
        for ax, name in zip(axes.flat, names):
            _by_threshold(ax, curves[name], name)
        for ax in list(axes.flat)[len(names):]:
            ax.axis("off")
        axes.flat[0].legend(loc="best", fontsize=7)
        fig.suptitle(f"Precision, recall and F1 by threshold ({split}); dotted: the threshold in use")
    fig.tight_layout()
    name = f"thresholds_{split}.png"
    _save(fig, os.path.join(folder, name))
    plt.close(fig)
    return name


def _by_threshold(ax, curves, title):
    view = curves["by_threshold"]
    for key in ("precision", "recall", "f1"):
        ax.plot(view["threshold"], view[key], label=key)
    ax.axvline(curves["threshold"], linestyle=":", color="black", label=f"threshold {curves['threshold']:.3f}")
    ax.set(xlabel="threshold", ylim=(0, 1.02), title=title)


def _reliability(plt, table, split, folder):
    """The reliability diagram of one split: accuracy against mean confidence per bin
    (the diagonal is a calibrated model), with the share of predictions in each bin."""
    fig, ax = plt.subplots(figsize=(5, 5))
    bins = table["bins"]
    width = bins[0]["upper"] - bins[0]["lower"]
    ax.bar([b["lower"] for b in bins], [b["accuracy"] for b in bins], width=width, align="edge",
           edgecolor="black", color="tab:blue", alpha=0.7, label="accuracy")
    ax.plot([0, 1], [0, 1], "--", color="gray", label="calibrated")
    ax.plot([b["confidence"] for b in bins], [b["accuracy"] for b in bins], "o", color="tab:red",
            label="a bin: mean confidence, accuracy")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_xlabel("confidence (probability of the predicted class)")
    ax.set_ylabel("accuracy")
    title = f"Reliability ({split}): ECE {table['ece']:.3f}"
    if table.get("temperature", 1.0) != 1.0:
        title += f", temperature {table['temperature']:.2f}"
    ax.set_title(title)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=2, fontsize=8, frameon=False)  # below: bars can reach any corner
    fig.tight_layout()
    name = f"reliability_{split}.png"
    _save(fig, os.path.join(folder, name))
    plt.close(fig)
    return name


def _save(fig, path):
    """Save a figure under a temporary name, then rename it into place."""
    tmp = f"{path}.tmp-{os.getpid()}.png"
    fig.savefig(tmp, dpi=100)
    os.replace(tmp, path)
