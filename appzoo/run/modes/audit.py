"""``--do audit``: what the data holds (audit.md, audit.json) and, with ``trainer.audit_labels``, the training
examples whose labels look wrong (label_issues.jsonl, from out-of-fold probabilities)."""
from appzoo.reports import label_issues
from appzoo.reports.audit import audit, to_markdown
from appzoo.utils import files
from appzoo.utils.progress import note


class Audit:
    name = "audit"
    reads = ("train", "dev", "test", "predict")  # every split there is
    writes = ("audit", "audit_json", "label_issues", "label_folds")
    main_only = False  # audit_labels trains its folds on every rank

    def run(self, ctx):
        """audit.md and audit.json; each warning also as one line."""
        plan, p, folder = ctx.plan, ctx.prepared, ctx.folder
        trained = p.bundle
        report = audit(trained.reader, p.splits, p.features, trained.tokenizer, trained.labels,
                       plan.data.max_seq_len, plan.trainer.batch_size)
        text = to_markdown(report, plan.source)
        if plan.trainer.audit_labels:
            from appzoo.run.label_folds import out_of_fold  # paddle, through the trainer: loaded by this audit alone

            given, probs, multi = out_of_fold(plan, p, folder.label_folds)
            rows, report["labels"] = label_issues.find(given, probs, multi, trained.labels, p.splits["train"],
                                                       plan.trainer.audit_folds)
            text += label_issues.to_markdown(report["labels"], rows)
            if ctx.is_main:
                files.write_jsonl(folder.label_issues, rows)
                note(f"audit: {report['labels']['note']}; written {folder.label_issues}")
        if ctx.is_main:
            files.write_json(folder.audit_json, report)
            files.write_text(folder.audit, text)
            for warning in report["warnings"]:
                note(f"audit: {warning}")
            for advice in report["what_to_try"]:
                note(f"audit: try {advice['key']}: {advice['try']} ({advice['why']})")
            note(f"audit: written {folder.audit}")
