"""BENCHMARKS.md, written whole from its parts: nothing in it is edited by hand.

    scripts/bench report              render BENCHMARKS.md from bench/results and bench/findings
    scripts/bench report --check      exit 1 when BENCHMARKS.md is not what they render to
    scripts/bench report --import [FILE]
                                      split FILE (default BENCHMARKS.md) into the parts, e.g.
                                      after a merge that brought a BENCHMARKS.md rewritten by a
                                      case on another branch; then --check passes

The parts, in PARTS order: the peers report (no markers), then one section per NAME between
"<!-- NAME:begin -->" and "<!-- NAME:end -->". A part's text is its results, written by the
case's last run (bench/results/<file>.md; a case writes it through section.write), and after
them its findings, written by hand (bench/findings/<file>.md). A part may have either or both.

Where findings start inside a rendered part (for --import, and to keep a case's own copy of
its findings out of its results): the first heading (## or ###) that says "written by hand"
or "hand-written", the convention every findings file keeps in its first line.
"""
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.dirname(HERE)
REPO = os.path.dirname(BENCH)
TARGET = os.path.join(REPO, "BENCHMARKS.md")
RESULTS = os.path.join(BENCH, "results")
FINDINGS = os.path.join(BENCH, "findings")

# (marker, file, by hand): the order of BENCHMARKS.md. marker None: the top part, without
# markers. By hand: the whole part is findings (no case writes it). A new benchmark section is
# one line here (and its case writing section NAME through section.write).
PARTS = (
    (None, "peers", False),  # scripts/bench peers (bench/lib/report.py), the findings of its full run
    ("bench-sink", "sink", False),  # scripts/bench sink
    ("bench-process", "process", False),  # scripts/bench process (bench/lib/process.py)
    ("bench-peers-steady", "peers-steady", True),  # from a peers run's figures
    ("join", "join", True),
    ("latency-rates", "latency-rates", True),  # from peers --latency-only runs
    ("bench-grid", "grid", False),  # scripts/bench grid (bench/lib/grid.py)
    ("bench-scale", "scale", False),  # scripts/bench scale (bench/lib/scale.py)
    ("brokers", "brokers", True),  # from peers --nodes 3 runs
    ("rust-peers", "rust-peers", False),  # scripts/bench peers --section rust-peers
    ("bench-exporter", "exporter", False),  # scripts/bench exporter --out BENCHMARKS.md
)
MARKERS = tuple(m for m, _, _ in PARTS if m)
FINDINGS_HEADING = re.compile(r"^#{2,3} .*(written by hand|hand-written)", re.M)
SECTION = re.compile(r"<!-- ([A-Za-z0-9_-]+):begin -->\n(.*?)\n<!-- \1:end -->", re.S)


class RenderError(Exception):
    """BENCHMARKS.md cannot be split or rendered; the message says what to do."""


def file_of(marker):
    for m, f, _ in PARTS:
        if m == marker:
            return f
    raise RenderError("no part %r in bench/lib/render.py PARTS: add a line there (marker, file) "
                      "in the order BENCHMARKS.md shows it" % marker)


def split(text):
    """(results, findings) of one part's text; either may be empty."""
    m = FINDINGS_HEADING.search(text)
    if not m:
        return text.strip("\n"), ""
    return text[:m.start()].strip("\n"), text[m.start():].strip("\n")


def read(directory, name):
    path = os.path.join(directory, name + ".md")
    return open(path).read().strip("\n") if os.path.exists(path) else ""


def part(name):
    """The text of part NAME: its results, a blank line, its findings."""
    return "\n\n".join(t for t in (read(RESULTS, name), read(FINDINGS, name)) if t)


def render():
    out = []
    for marker, name, _ in PARTS:
        text = part(name)
        if marker is None:
            out.append(text + "\n")
        elif text:
            out.append("<!-- %s:begin -->\n%s\n\n<!-- %s:end -->" % (marker, text, marker))
    return "\n\n".join(out) + "\n"


def write_target():
    open(TARGET, "w").write(render())


def store(marker, body):
    """A case's new section MARKER (marker None: the top part): its results replace the last
    ones (a copy of the findings in body is dropped: bench/findings holds them) and
    BENCHMARKS.md is rendered again."""
    name = file_of(marker)
    if any(m == marker and by_hand for m, _, by_hand in PARTS):
        raise RenderError("part %r is written by hand (bench/findings/%s.md), not by a case: give the "
                          "case a section of its own (a line in PARTS)" % (marker, name))
    results, _ = split(body)
    os.makedirs(RESULTS, exist_ok=True)
    open(os.path.join(RESULTS, name + ".md"), "w").write(results + "\n")
    write_target()


def import_file(path):
    """Splits a BENCHMARKS.md into bench/results and bench/findings. Refuses (changing nothing)
    a file with a section PARTS does not name or with text between the sections."""
    text = open(path).read()
    first = text.find("<!-- ")
    top = text if first < 0 else text[:first]
    parts = {"peers": top}
    pos = first if first >= 0 else len(text)
    for m in SECTION.finditer(text, pos):
        between = text[pos:m.start()]
        if between.strip():
            raise RenderError("text outside any section before <!-- %s:begin --> in %s: move it into "
                              "a findings file (bench/findings) of a part" % (m.group(1), path))
        parts[file_of(m.group(1))] = m.group(2)
        pos = m.end()
    if text[pos:].strip():
        raise RenderError("text after the last section of %s (or a section without its end marker): "
                          "move it into a findings file (bench/findings) of a part" % path)
    for d in (RESULTS, FINDINGS):
        os.makedirs(d, exist_ok=True)
    for _, name, by_hand in PARTS:
        whole = parts.get(name, "")
        results, findings = ("", whole.strip("\n")) if by_hand else split(whole)
        for d, t in ((RESULTS, results), (FINDINGS, findings)):
            p = os.path.join(d, name + ".md")
            if t:
                open(p, "w").write(t + "\n")
            elif os.path.exists(p):
                os.remove(p)
    if render() != text:
        raise RenderError("%s split into bench/results and bench/findings, but they render to "
                          "another text (blank lines around a part?): compare with "
                          "`scripts/bench report && git diff BENCHMARKS.md`" % path)


def main(argv):
    try:
        if not argv:
            write_target()
            return 0
        if argv == ["--check"]:
            if open(TARGET).read() == render():
                return 0
            sys.stderr.write("BENCHMARKS.md is not what bench/results and bench/findings render to: "
                             "edit those (a case writes its results; findings are by hand) and run "
                             "`scripts/bench report`; after a merge that rewrote BENCHMARKS.md, "
                             "`scripts/bench report --import` splits it\n")
            return 1
        if argv[0] == "--import" and len(argv) <= 2:
            import_file(argv[1] if len(argv) == 2 else TARGET)
            return 0
    except RenderError as e:
        sys.stderr.write("scripts/bench report: %s\n" % e)
        return 1
    sys.stderr.write("usage: scripts/bench report [--check | --import [FILE]]\n")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
