"""Wheels of installed distributions, so a test can pip-install pinned versions without the network.

An installed distribution is its RECORD's files plus its .dist-info; zipped back under the tags of its
WHEEL file, that is a wheel pip installs like the one it came from. Used by the Gradescope setup.sh test.
"""
from __future__ import annotations

import re
import zipfile
from importlib.metadata import distribution
from pathlib import Path


def _requires(dist) -> list[str]:
    out = []
    for req in dist.requires or []:
        if ";" in req and "extra ==" in req:
            continue                                        # optional extras are not installed by default
        out.append(re.split(r"[ ;<>=!~\[(]", req, maxsplit=1)[0])
    return out


def closure(names) -> list:
    """The installed distributions `names` need, themselves included."""
    seen, todo, dists = set(), list(names), []
    while todo:
        name = todo.pop().lower().replace("_", "-")
        if name in seen:
            continue
        seen.add(name)
        try:
            d = distribution(name)
        except Exception:
            continue                                        # a marker-only dependency not installed here
        dists.append(d)
        todo += _requires(d)
    return dists


def repack(dist, folder: Path) -> Path:
    info = next(f for f in dist.files if f.name == "WHEEL" and f.parent.name.endswith(".dist-info"))
    tags = [ln.split(":", 1)[1].strip() for ln in Path(dist.locate_file(info)).read_text().splitlines()
            if ln.startswith("Tag:")]
    tag = tags[0] if len(tags) == 1 else "-".join(
        ".".join(sorted({t.split("-")[i] for t in tags})) for i in range(3))
    name = re.sub(r"[-_.]+", "_", dist.metadata["Name"])
    path = folder / f"{name}-{dist.version}-{tag}.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as zf:
        for f in dist.files:
            src = Path(dist.locate_file(f))
            if f.parts[0] != ".." and src.is_file() and "__pycache__" not in f.parts:
                zf.write(src, f.as_posix())
    return path


def wheelhouse(names, folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for d in closure(names):
        repack(d, folder)
    return folder
