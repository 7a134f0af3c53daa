"""Text for the markdown files a run writes (report.md, errors.md, audit.md, docs/params.md)."""


def cell(value):
    """A value in a markdown table cell: backslashes and pipes escaped, on one line."""
    return str(value).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ").replace("\r", " ")
