"""The course website: a partial site (lecture 03, the a3 handout, two reference pages) is built with the
real build script, checked statically (figures, links, no solution code) and opened in headless Chromium
(pages load without console errors, figures decode, formulas typeset, links resolve, search finds a
lecture) — and a profiler trace is fetched and parsed there.

The browser tests need a Chromium-family browser (Debian: ``apt-get install chromium``) and skip, saying so,
without one. ``make site`` builds the whole site into build/site/html; when it exists the full-site test
opens every page of it too.
"""
import functools
import http.server
import importlib.util
import re
import sys
import threading
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("minigrad_site_build", ROOT / "site" / "build.py")
site_build = importlib.util.module_from_spec(_spec)  # site/build.py, under a name no package uses
_spec.loader.exec_module(site_build)
sys.path.insert(0, str(Path(__file__).resolve().parent))
from cdp import Browser, find_browser  # noqa: E402

PAGES = ["lectures/03_tensors_and_views.ipynb", "assignments/a3_training_loop.ipynb", "docs/ARCHITECTURE.md",
         "autograder/README.md"]
MISSING = [m for m in ("sphinx", "myst_nb", "furo") if importlib.util.find_spec(m) is None]
needs_sphinx = pytest.mark.skipif(bool(MISSING), reason=f"the site extra is not installed ({', '.join(MISSING)} "
                                  f"missing): pip install -e '.[site]'")
BROWSER = find_browser()
needs_browser = pytest.mark.skipif(
    BROWSER is None or importlib.util.find_spec("websocket") is None,
    reason="no Chromium-family browser (or websocket-client) here: apt-get install chromium and "
           "pip install -e '.[site]' to run the browser tests")


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    if MISSING:
        pytest.skip(f"the site extra is not installed ({', '.join(MISSING)} missing)")
    return site_build.build(tmp_path_factory.mktemp("site"), PAGES)


def _serve(directory):
    handler = functools.partial(_QuietHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def server(site):
    s = _serve(site)
    yield f"http://127.0.0.1:{s.server_address[1]}/"
    s.shutdown()


def _pages(html_dir):
    return sorted(p.relative_to(html_dir).as_posix() for p in Path(html_dir).rglob("*.html"))


def _links(html):
    return re.findall(r'<a [^>]*href="([^"]+)"', html)


# ---- the build, checked statically ----------------------------------------------------------------------
@needs_sphinx
def test_partial_site_has_its_pages_executed_figures_and_no_solutions(site):
    pages = _pages(site)
    for expected in ("index.html", "search.html", "lectures/03_tensors_and_views.html",
                     "assignments/a3_training_loop.html", "docs/ARCHITECTURE.html", "autograder/README.html"):
        assert expected in pages
    lecture = (site / "lectures/03_tensors_and_views.html").read_text()
    images = re.findall(r'<img [^>]*src="([^"]+)"', lecture)
    assert len(images) >= 3, "lecture 03 draws at least three plots"
    for src in images:
        assert (site / "lectures" / src).resolve().stat().st_size > 1000, src
    assert "shares x&#39;s version counter" in lecture or "shares x's version counter" in lecture  # executed
    handout = (site / "assignments/a3_training_loop.html").read_text()
    assert "NotImplementedError" in handout and "np.divide(m, w, out=w)" not in handout
    assert site_build.solution_lines() and site_build.find_solution_leaks(site) == []
    assert not list(Path(site).rglob("*solution*"))


@needs_sphinx
def test_every_internal_link_resolves(site):
    for page in _pages(site):
        for href in _links((site / page).read_text()):
            if re.match(r"[a-z]+:", href):
                continue
            path, _, frag = href.partition("#")
            target = (site / page).parent / urllib.parse.unquote(path) if path else site / page
            assert target.exists(), f"{page}: link to {href} does not resolve"
            if frag and target.suffix == ".html":
                assert f'id="{frag}"' in target.read_text(), f"{page}: no anchor #{frag} in {path or page}"


def test_the_leak_check_finds_a_solution_line(tmp_path):
    secret = sorted(site_build.solution_lines())[0]
    (tmp_path / "page.html").write_text(f"<p>fine</p><pre><span>{secret[:5]}</span>{secret[5:]}</pre>")
    assert site_build.find_solution_leaks(tmp_path) == [("page.html", secret)]


def test_solutions_never_become_pages(tmp_path):
    with pytest.raises(SystemExit, match="never goes on the site"):
        site_build.assemble(tmp_path / "src", ["solutions/a3_training_loop.ipynb"], index="# x\n")


def test_links_to_repository_files_become_text_and_links_between_pages_stay():
    pages = ["README.md", "docs/ARCHITECTURE.md", "lectures/01_autodiff.ipynb"]
    text = ("[arch](docs/ARCHITECTURE.md) [code](minigrad/tensor.py) [sol](solutions/a1_autograd.ipynb) "
            "[web](https://example.org) [lec](lectures/01_autodiff.ipynb#part-1) ![img](x.png)")
    assert site_build.rewrite_links(text, "README.md", pages) == (
        "[arch](docs/ARCHITECTURE.md) code sol [web](https://example.org) "
        "[lec](lectures/01_autodiff.ipynb#part-1) ![img](x.png)")
    assert site_build.rewrite_links("[up](../README.md)", "docs/ARCHITECTURE.md", pages) == "[up](../README.md)"


def _course_index(pages=None, title=None):
    return site_build.course_index((ROOT / "site" / "index.md").read_text(), pages or site_build.PAGES,
                                   title or site_build.notebook_title)


def test_the_navigation_follows_the_course_map():
    index = _course_index()
    toctree = re.findall(r"^(lectures/\S+|assignments/\S+)$", index, flags=re.M)
    lectures = sorted(p.stem for p in (ROOT / "lectures").glob("*.ipynb"))
    handouts = sorted(p.stem for p in (ROOT / "assignments").glob("*.ipynb"))
    assert toctree == [f"lectures/{n}" for n in lectures] + [f"assignments/{n}" for n in handouts]
    table = [line for line in index.splitlines() if line.startswith("| ") and ".ipynb" in line]
    assert [re.search(r"\(lectures/(\S+)\.ipynb\)", row).group(1) for row in table] == lectures
    assert sorted(set(re.findall(r"\(assignments/(\S+)\.ipynb\)", index))) == handouts
    assert set(site_build.PAGES) >= {"README.md", "autograder/README.md", "docs/ARCHITECTURE.md"}
    assert not [p for p in site_build.PAGES if p.startswith("solutions/")]


def test_a_new_lecture_is_discovered_without_editing_the_index():
    """A lecture added later: the navigation and the course map pick a new notebook up by itself."""
    pages = site_build.PAGES + ["lectures/14_next_topic.ipynb", "assignments/a12_next.ipynb"]
    index = _course_index(pages, title=lambda page: "The next topic" if "14_" in page else site_build.notebook_title(page))
    assert "\nlectures/14_next_topic\n```" in index and "\nassignments/a12_next\n```" in index
    rows = [line for line in index.splitlines() if line.startswith("| ") and ".ipynb" in line]
    assert rows[-1] == "| 14 | [The next topic](lectures/14_next_topic.ipynb) | — | — |"
    assert site_build.notebook_title("lectures/09_eager_runtime.ipynb").startswith("The eager runtime")


def _empty_nav_entries(html):
    return re.findall(r'<a class="reference internal" href="([^"]*)">\s*</a>', html)


@needs_sphinx
def test_the_navigation_has_no_empty_entries(site):
    for page in _pages(site):
        assert not _empty_nav_entries((site / page).read_text()), f"{page}: empty entries in the navigation"


# ---- in a browser --------------------------------------------------------------------------------------------------
def _check_pages(browser, base, html_dir, search_word, lecture):
    problems = []
    for page in _pages(html_dir):
        errors = browser.open(base + page)
        problems += [f"{page}: {e}" for e in errors]
        problems += [f"{page}: an empty navigation entry links to {href}"
                     for href in _empty_nav_entries((Path(html_dir) / page).read_text())]
        if page.startswith("lectures/"):
            figures = browser.evaluate(
                "Array.from(document.querySelectorAll('img')).map(i => [i.complete, i.naturalWidth, i.src])")
            if not figures:
                problems.append(f"{page}: no figures")
            problems += [f"{page}: figure {src} not decoded" for ok, width, src in figures if not (ok and width > 0)]
        if browser.evaluate("document.querySelectorAll('.math').length > 0"):
            try:                                     # formulas typeset by the local MathJax
                browser.wait_until("document.querySelectorAll('math, .MathJax, mjx-container').length > 0",
                                   timeout=20)
            except TimeoutError:
                problems.append(f"{page}: its formulas were not typeset")
        for href in browser.evaluate("Array.from(document.querySelectorAll('a[href]')).map(a => a.href)"):
            if href.startswith(base):
                url = href.split("#")[0]
                try:
                    urllib.request.urlopen(url, timeout=10).close()
                except Exception as e:
                    problems.append(f"{page}: link {href}: {e}")
    browser.open(base + "search.html?q=" + urllib.parse.quote(search_word))
    hits = browser.wait_until("(() => { const a = Array.from(document.querySelectorAll('#search-results a'))"
                              ".map(a => a.getAttribute('href')); return a.length ? a : null; })()", timeout=15)
    if not any(lecture in h for h in hits):
        problems.append(f"search for {search_word!r} did not find {lecture}: {hits}")
    return problems


@needs_sphinx
@needs_browser
def test_in_a_browser_pages_load_figures_decode_links_resolve_and_search_finds_a_lecture(site, server):
    with Browser(BROWSER) as browser:
        assert browser.evaluate("1 + 1") == 2
        problems = _check_pages(browser, server, site, "contiguity", "lectures/03_tensors_and_views")
        problems += _check_trace_in_browser(browser, server, site)
    assert not problems, "\n".join(problems)


def _check_trace_in_browser(browser, base, html_dir):
    """A profiler trace, fetched and parsed by the browser's own JSON parser (what Perfetto and
    chrome://tracing do first): every complete event has a name, a track and non-negative times."""
    import minigrad as mg
    with mg.profiler.profile() as prof:
        with mg.profiler.record_function("step"):
            (mg.randn(4, 4, requires_grad=True) @ mg.randn(4, 4)).sum().backward()
    prof.export_chrome_trace(str(Path(html_dir) / "trace.json"))
    browser.open(base + "index.html")
    got = browser.evaluate(
        "fetch('trace.json').then(r => r.json()).then(d => { const x = d.traceEvents.filter(e => e.ph === 'X');"
        " return [x.length, x.every(e => typeof e.name === 'string' && Number.isInteger(e.pid) &&"
        " Number.isInteger(e.tid) && e.ts >= 0 && e.dur >= 0)]; })")
    return [] if got == [len(prof.events()), True] else [f"trace.json in the browser: {got}"]


@needs_browser
def test_the_full_site_in_a_browser():
    html_dir = ROOT / "build" / "site" / "html"
    if not (html_dir / "index.html").exists():
        pytest.skip("no full site built: run `make site` (python site/build.py) first")
    s = _serve(html_dir)
    try:
        with Browser(BROWSER) as browser:
            problems = _check_pages(browser, f"http://127.0.0.1:{s.server_address[1]}/", html_dir,
                                    "prefetch", "lectures/04_training_loop")
    finally:
        s.shutdown()
    assert not problems, "\n".join(problems)
