"""benchmarks/record.py: the one machine capture of the benchmarks, and the one atomic writer of a
benchmark's section of a Markdown file (docs/serving.md below a marker, a "## " section of RESULTS.md)."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.record import FLAGS, fp32_peak_gflops, keep_section, machine, machine_line, put_section  # noqa: E402

MARKER = "<!-- written by benchmarks/x.py: everything below this line -->"
BOOK = ("# Results\n\nIntro.\n\n## A\n\nkept A\n\n"
        "## Ours\n\nold body\n\n### a subsection, ours too\n\nold\n\n"
        "## B\n\nkept B, with trailing spaces   \n")


def test_put_section_replaces_only_its_own_section_up_to_the_next_heading(tmp_path):
    path = tmp_path / "RESULTS.md"
    path.write_bytes(BOOK.encode())
    put_section(path, "## Ours", "\nnew body\n\n", until="## ")
    before, ours_and_after = BOOK.split("## Ours")
    after = "## B" + ours_and_after.split("## B", 1)[1]
    assert path.read_bytes().decode() == before + "## Ours\n\nnew body\n\n" + after, "the rest byte for byte"


def test_keep_section_puts_it_into_the_book_and_keeps_it_where_the_book_is_written_from(tmp_path):
    """A script's section lands in RESULTS.md now and in results/NAME.md, which results_book.py reads back."""
    path = tmp_path / "RESULTS.md"
    path.write_bytes(BOOK.encode())
    keep_section(str(path), "ours", "## Ours\n\nnew body\n")
    assert path.read_text(encoding="utf-8") == BOOK.replace("old body\n\n### a subsection, ours too\n\nold\n\n",
                                                            "new body\n\n")
    assert (tmp_path / "results" / "ours.md").read_text(encoding="utf-8") == "## Ours\n\nnew body\n"
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks"))
    import results_book

    assert results_book.kept_sections(str(tmp_path / "results")) == ["", "## Ours\n\nnew body", ""]


def test_put_section_below_a_marker_replaces_everything_after_it(tmp_path):
    path = tmp_path / "serving.md"
    head = "# Serving\r\n\r\nHand-written, CRLF kept.\n\n"
    path.write_bytes((head + MARKER + "\n\n### The last run\n\nold\n").encode())
    put_section(path, MARKER, "### The last run\n\nnew\n")
    assert path.read_bytes() == (head + MARKER + "\n\n### The last run\n\nnew\n").encode()


@pytest.mark.parametrize("text, joined", [("# Doc\n\nText.\n", "\n"), ("# Doc\n\nText.", "\n\n"),
                                          ("# Doc\n\nText.\n\n", "")])
def test_put_section_adds_a_missing_section_at_the_end(tmp_path, text, joined):
    path = tmp_path / "doc.md"
    path.write_text(text, encoding="utf-8")
    put_section(path, MARKER, "body")
    assert path.read_text(encoding="utf-8") == text + joined + MARKER + "\n\nbody\n"
    put_section(path, MARKER, "body 2")  # and finds it the next time
    assert path.read_text(encoding="utf-8") == text + joined + MARKER + "\n\nbody 2\n"


def test_put_section_creates_a_missing_file(tmp_path):
    path = tmp_path / "new.md"
    put_section(path, "## Ours", "body", until="## ")
    assert path.read_text(encoding="utf-8") == "## Ours\n\nbody\n"


def test_a_failed_write_leaves_the_file_as_it_was(tmp_path, monkeypatch):
    path = tmp_path / "RESULTS.md"
    path.write_bytes(BOOK.encode())

    def refuse(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(OSError, match="No space left"):
        put_section(path, "## Ours", "new body", until="## ")
    assert path.read_bytes() == BOOK.encode()
    assert os.listdir(tmp_path) == ["RESULTS.md"], "no temporary file left behind"


def test_machine_reports_cores_flags_and_the_versions_asked_for():
    info = machine(("paddlepaddle", "no-such-package-xyz"), optional=("no-such-optional-xyz",))
    assert isinstance(info["cpu"], str) and info["cpu"]
    assert info["cores"] == os.cpu_count() and 1 <= info["cores_usable"] <= info["cores"]
    assert isinstance(info["flags"], list) and set(info["flags"]) <= set(FLAGS)
    assert info["flags"] == sorted(info["flags"])
    assert info["ghz"] is None or info["ghz"] > 0
    assert info["versions"]["paddlepaddle"] and info["versions"]["no-such-package-xyz"] is None
    assert "no-such-optional-xyz" not in info["versions"], "an optional package only when installed"


def test_the_fp32_peak_is_cores_x_clock_x_fma_flops_by_the_widest_vector_flag():
    info = {"cores_usable": 2, "ghz": 2.6, "flags": ["avx2", "avx512f"]}
    assert fp32_peak_gflops(info) == pytest.approx(2 * 2.6 * 2 * 16 * 2)  # 332.8: 16 fp32 lanes, 2 FMA units
    assert fp32_peak_gflops({**info, "flags": ["avx2"]}) == pytest.approx(2 * 2.6 * 2 * 8 * 2)
    assert fp32_peak_gflops({**info, "flags": []}, fma_units=1) == pytest.approx(2 * 2.6 * 2 * 4)
    assert fp32_peak_gflops({**info, "ghz": None}) is None


def test_machine_line_formats_a_capture_and_a_sweep_summary_environment():
    info = {"cpu": "AMD EPYC", "cores": 4, "cores_usable": 2, "ghz": 2.45, "flags": ["avx2", "avx512f"],
            "python": "3.11.7", "versions": {"paddlepaddle": "3.3.1", "onnxruntime": None}}
    assert machine_line(info) == "AMD EPYC, 4 cores (2 usable), 2.45 GHz, flags avx2 avx512f; python 3.11.7, paddlepaddle 3.3.1"
    summary = {"cpu": "AMD EPYC", "cores": 2, "gpu": None, "versions": {"python": "3.11.7", "paddlenlp": "2.8.1"}}
    assert machine_line(summary) == "AMD EPYC, 2 cores, no GPU; python 3.11.7, paddlenlp 2.8.1"
    assert machine_line(None) == "not recorded"
