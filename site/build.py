"""Build the course website: ``python site/build.py`` (what ``make site`` runs) -> build/site/html/index.html.

1. Assemble the sources in ``<out>/src``: ``site/index.md`` (the course map and navigation) and
   ``site/conf.py``, the README, the lectures, the assignment *handouts* (``assignments/``: the generated
   student notebooks, never ``solutions/``), the autograder README and ``docs/``. Links between those pages
   are kept; links to anything else in the repository (source files, ``solutions/``) become plain text, so
   every link on the site resolves.
2. Run Sphinx (MyST-NB executes the lectures, cached in ``<out>/jupyter_cache``; Furo theme).
3. Check that no solution code reached the site: every line of every ``### BEGIN SOLUTION`` region is
   searched for in the text of every built page, script and search index. A hit fails the build.

``--pages`` builds a small site of some pages only (the tests do that), with a generated index.
"""
import argparse
import html.parser
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SITE = ROOT / "site"
PAGES = (["README.md"] + sorted(f"lectures/{p.name}" for p in (ROOT / "lectures").glob("*.ipynb"))
         + sorted(f"assignments/{p.name}" for p in (ROOT / "assignments").glob("*.ipynb"))
         + ["autograder/README.md"] + sorted(f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md")))
_LINK = re.compile(r"(?<!!)\[([^\]\n]+)\]\(([^)\s]+)\)")


def rewrite_links(text, page, pages):
    """Keep links to pages of the site (and to the web); turn links to other repository files into text."""
    def fix(m):
        label, target = m.group(1), m.group(2)
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            return m.group(0)
        path = target.split("#", 1)[0]
        resolved = os.path.normpath(os.path.join(os.path.dirname(page), path))
        return m.group(0) if resolved in pages else label
    return _LINK.sub(fix, text)


def assemble(src, pages, index=None):
    if src.exists():
        shutil.rmtree(src)
    src.mkdir(parents=True)
    for name in ("conf.py", "favicon.svg"):
        shutil.copy(SITE / name, src / name)
    mathjax = _local_mathjax()
    if mathjax is not None:
        shutil.copytree(mathjax, src / "_mathjax" / "mathjax")
    (src / "index.md").write_text(index if index is not None else (SITE / "index.md").read_text())
    for page in pages:
        if page.startswith("solutions/"):
            raise SystemExit(f"site: {page} is a solution and never goes on the site")
        dst = src / page
        dst.parent.mkdir(parents=True, exist_ok=True)
        text = (ROOT / page).read_text(encoding="utf-8")
        if page.endswith(".ipynb"):
            nb = json.loads(text)
            for cell in nb["cells"]:
                if cell["cell_type"] == "markdown":
                    source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
                    cell["source"] = rewrite_links(source, page, pages)
            text = json.dumps(nb, indent=1, ensure_ascii=False)
        else:
            text = rewrite_links(text, page, pages)
        dst.write_text(text, encoding="utf-8")


def _local_mathjax():
    """MathJax's files from the jupyter-server-mathjax package (the site extra), or None (then the pages
    load MathJax from Sphinx's default CDN)."""
    try:
        import jupyter_server_mathjax
    except ImportError:
        return None
    static = Path(jupyter_server_mathjax.__file__).parent / "static"
    return static if (static / "MathJax.js").exists() else None


def small_index(pages):
    """The index of a partial build: every page in one toctree."""
    names = "\n".join(os.path.splitext(p)[0] for p in pages)
    return f"# minigrad (partial build)\n\n```{{toctree}}\n:maxdepth: 1\n\n{names}\n```\n"


# --- no solution code on the site --------------------------------------------------------------------------
def solution_lines(min_length=16):
    """Lines of the solution regions that occur in none of the site's source pages: code that only the
    solutions hold (a hint in a handout may quote a line on purpose; that line is not secret)."""
    public = " ".join(_norm(_page_text(page).replace("`", "")) for page in PAGES)  # as rendered
    lines = set()
    for nb_path in (ROOT / "solutions").glob("*.ipynb"):
        for cell in json.loads(nb_path.read_text())["cells"]:
            inside = False
            for line in _source(cell).splitlines():
                if "### BEGIN SOLUTION" in line:
                    inside = True
                elif "### END SOLUTION" in line:
                    inside = False
                elif inside:
                    n = _norm(line)
                    if len(n) >= min_length and not n.startswith("#") and n not in public:
                        lines.add(n)
    return lines


def _page_text(page):
    text = (ROOT / page).read_text(encoding="utf-8")
    if page.endswith(".ipynb"):
        text = "\n".join(_source(c) for c in json.loads(text)["cells"])
    return text


def _source(cell):
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def _norm(line):
    return " ".join(line.split())


class _Text(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.parts = []

    def handle_data(self, data):
        self.parts.append(data)


def site_text(html_dir):
    """{file: its text} for every page, script and index of the built site (HTML tags stripped, so code
    split into highlighting spans reads as the source did)."""
    out = {}
    for path in Path(html_dir).rglob("*"):
        if not path.is_file() or path.suffix not in (".html", ".js", ".txt", ".json", ".ipynb", ".py"):
            continue
        raw = path.read_text(encoding="utf-8", errors="replace")
        if path.suffix == ".html":
            parser = _Text()
            parser.feed(raw)
            raw = "".join(parser.parts)
        out[str(path.relative_to(html_dir))] = _norm(raw)
    return out


def find_solution_leaks(html_dir):
    """[(file, solution line)] for every solution line found in the built site; empty when clean."""
    lines = solution_lines()
    leaks = []
    for name, text in site_text(html_dir).items():
        if "BEGIN SOLUTION" in text and name.startswith(("assignments/", "lectures/")):
            leaks.append((name, "### BEGIN SOLUTION"))      # a solution region rendered as a page
        leaks += [(name, line) for line in lines if line in text]
    return leaks


# --- build ---------------------------------------------------------------------------------------------------
def build(out, pages=None, execute="cache", quiet=True):
    out = Path(out).resolve()
    chosen = list(PAGES if pages is None else pages)
    src, html_dir = out / "src", out / "html"
    assemble(src, chosen, None if pages is None else small_index(chosen))
    env = dict(os.environ, SITE_EXECUTE=execute, SITE_CACHE=str(out / "jupyter_cache"))
    cmd = [sys.executable, "-m", "sphinx", "-b", "html", "-E", str(src), str(html_dir)]
    if quiet:
        cmd.insert(3, "-q")
    proc = subprocess.run(cmd, cwd=src, env=env)
    if proc.returncode:
        raise SystemExit(f"site: sphinx-build failed (exit {proc.returncode})")
    leaks = find_solution_leaks(html_dir)
    if leaks:
        raise SystemExit("site: solution code reached the site:\n" +
                         "\n".join(f"  {f}: {line}" for f, line in leaks[:20]))
    return html_dir


def main(argv=None):
    p = argparse.ArgumentParser(description="Build the course website (Sphinx + MyST-NB).")
    p.add_argument("--out", default=str(ROOT / "build" / "site"), help="output folder (html/ inside)")
    p.add_argument("--pages", nargs="*", help="build only these repository files (a partial site)")
    p.add_argument("--execute", default="cache", choices=["cache", "force", "off"],
                   help="how MyST-NB runs the lectures (default: cache, re-running only changed ones)")
    p.add_argument("--verbose", action="store_true")
    args = p.parse_args(argv)
    html_dir = build(args.out, args.pages, args.execute, quiet=not args.verbose)
    print(f"site: built {html_dir / 'index.html'}  (open it in a browser, or: python -m http.server -d {html_dir})")


if __name__ == "__main__":
    main()
