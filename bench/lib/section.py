"""A case's section of a report, between its markers.

    <!-- NAME:begin -->
    ...
    <!-- NAME:end -->

BENCHMARKS.md is rendered whole from its parts (bench/lib/render.py): a section written to it
becomes the case's results (bench/results/<file>.md) and the file is rendered again. Any other
file (a smoke run's target/bench-<case>/smoke.md, RELIABILITY.md for failover) gets the section
replaced in place, or appended.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import render  # noqa: E402


def markers(name):
    return "<!-- %s:begin -->" % name, "<!-- %s:end -->" % name


def extract(text, name):
    """The section NAME of text, markers included, or None."""
    begin, end = markers(name)
    b, e = text.find(begin), text.find(end)
    return text[b:e + len(end)] if 0 <= b < e else None


def write(path, name, body):
    """Replaces section NAME of the file at path with body (the text between the markers),
    or appends it; creates the file (and its directory) if need be. BENCHMARKS.md: through
    render.store."""
    if os.path.abspath(path) == render.TARGET:
        try:
            render.store(name, body)
        except render.RenderError as e:
            sys.exit("section %s: %s" % (name, e))
        return
    begin, end = markers(name)
    section = begin + "\n" + body.strip("\n") + "\n\n" + end
    text = open(path).read() if os.path.exists(path) else ""
    b, e = text.find(begin), text.find(end)
    if 0 <= b < e:
        text = text[:b] + section + text[e + len(end):]
    elif text:
        text = text.rstrip() + "\n\n" + section + "\n"
    else:
        text = section + "\n"
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    open(path, "w").write(text)
