"""Small helpers every wing may use: atomic files and JSON, progress lines, Markdown escaping, plot fonts."""
