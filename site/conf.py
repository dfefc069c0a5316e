"""Sphinx configuration of the course website (read by site/build.py, which assembles the sources).

Sphinx + MyST-NB: Markdown pages and notebooks; lectures are executed during the build (cached in
jupyter-cache, so a rebuild re-runs only changed notebooks); assignment handouts are shown as they are
(student versions: executing them would only raise NotImplementedError). Theme: Furo, with Sphinx's own
full-text search.
"""
import os

project = "minigrad"
author = "the minigrad course"
copyright = "minigrad authors"
extensions = ["myst_nb"]
html_theme = "furo"
html_title = "minigrad — the course"
html_favicon = "favicon.svg"
html_copy_source = False          # no _sources/ copies: what a student reads is the rendered page
html_show_sourcelink = False
root_doc = "index"
exclude_patterns = ["_build", "jupyter_execute", ".jupyter_cache", "**.ipynb_checkpoints"]
myst_enable_extensions = ["dollarmath", "amsmath"]
myst_heading_anchors = 3
myst_update_mathjax = False      # its MathJax 3 options would confuse the local MathJax 2 (below)
nb_execution_mode = os.environ.get("SITE_EXECUTE", "cache")
nb_execution_cache_path = os.environ.get("SITE_CACHE", ".jupyter_cache")
nb_execution_excludepatterns = ["assignments/*"]
nb_execution_timeout = 300
nb_execution_raise_on_error = True
nb_merge_streams = True
nb_execution_show_tb = True
suppress_warnings = ["myst.header", "misc.highlighting_failure"]

# MathJax from the local copy that site/build.py puts in _mathjax/ (jupyter-server-mathjax ships MathJax 2.7),
# so formulas render offline and no page loads anything from another host; Sphinx's CDN default otherwise.
if os.path.isdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), "_mathjax", "mathjax")):
    html_static_path = ["_mathjax"]
    mathjax_path = "mathjax/MathJax.js?config=TeX-AMS-MML_HTMLorMML-full"
    mathjax2_config = {"tex2jax": {"inlineMath": [["\\(", "\\)"]], "displayMath": [["\\[", "\\]"]],
                                   "processRefs": False, "processEnvironments": False},
                        # browsers render MathML themselves (Chromium since 109): no web fonts to fetch
                        "menuSettings": {"renderer": "NativeMML"},
                        # HTML-CSS still loads its font data: the package keeps only STIX-Web's
                        "HTML-CSS": {"availableFonts": ["STIX-Web"], "preferredFont": "STIX-Web",
                                     "webFont": "STIX-Web", "imageFont": None}}
