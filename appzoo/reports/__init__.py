"""What a person reads after a run: report.md/html, the mistakes files, the audit."""
