"""Tiny helper to write a notebook from a list of cells (used to author lectures as plain Python).

    from tools.nbbuild import md, code, write
    write("lectures/01_autodiff.ipynb", [md("# Title"), code("x = 1")])
"""
import nbformat


def md(text):
    return nbformat.v4.new_markdown_cell(text.strip("\n"))


def code(text, **metadata):
    cell = nbformat.v4.new_code_cell(text.strip("\n"))
    cell.metadata.update(metadata)
    return cell


def write(path, cells, title=None):
    nb = nbformat.v4.new_notebook()
    nb.cells = cells
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    for i, cell in enumerate(nb.cells):  # stable ids: clean diffs
        cell["id"] = f"c{i:02d}"
    nbformat.validate(nb)
    with open(path, "w", encoding="utf-8") as f:
        nbformat.write(nb, f)
