"""Every lecture notebook executes top to bottom (nbclient) on CPU, and is committed without outputs."""
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
LECTURES = sorted((ROOT / "lectures").glob("*.ipynb"))
COURSE = LECTURES + sorted((ROOT / "solutions").glob("*.ipynb")) + sorted((ROOT / "assignments").glob("*.ipynb"))


@pytest.mark.parametrize("path", COURSE, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_committed_without_outputs(path):
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, f"{path.name}: cell {cell.id} has outputs"


@pytest.mark.notebook
@pytest.mark.parametrize("path", LECTURES, ids=lambda p: p.name)
def test_lecture_executes(path, tmp_path):
    from nbclient import NotebookClient
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=180, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}).execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors
    images = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs
              if o.output_type == "display_data" and "image/png" in o.get("data", {})]
    assert images, f"{path.name} draws no plot"
