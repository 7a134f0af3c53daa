"""The plot of a sweep's results: each setting's mean, sample std and runs."""
import os

from appzoo.sweep.summary import run_values
from appzoo.utils.fonts import pyplot


def plot(summary, path):
    plt = pyplot()

    key = summary["primary_metric"]
    rows = summary["settings"]
    # settings down the y axis (first on top), so long setting names stay readable
    fig, ax = plt.subplots(figsize=(8, 1.2 + 0.5 * len(rows)))
    for y, row in enumerate(rows):
        values = run_values(row, key)
        stats = row["metrics"][key]
        if stats["mean"] is not None:
            ax.errorbar([stats["mean"]], [y], xerr=[stats["std"] or 0.0], fmt="o", capsize=5, color="tab:blue")
            ax.plot(values, [y] * len(values), "x", color="tab:gray", alpha=0.7)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([f"{row['setting']} ({row['verdict']})" for row in rows], fontsize=8)
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.grid(axis="x", alpha=0.3)
    ax.set_xlabel(f"{key}: mean ± sample std over seeds; x = one run")
    ax.set_title(os.path.basename(summary["param_path"]), fontsize=10)
    tmp = f"{path}.tmp-{os.getpid()}.png"
    fig.savefig(tmp, dpi=100, bbox_inches="tight")
    plt.close(fig)
    os.replace(tmp, path)
