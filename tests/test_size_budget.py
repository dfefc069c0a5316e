"""The size budget script counts what it says and fails on what it should (the tree itself is checked by
`make test` running the script)."""
from tools import size_budget


def test_counts_lines_and_reports_files_over_the_limit(tmp_path):
    (tmp_path / "minigrad" / "ops").mkdir(parents=True)
    (tmp_path / "autograder").mkdir()
    (tmp_path / "minigrad" / "ops" / "big.py").write_text("x = 1\n" * 12)
    (tmp_path / "minigrad" / "nn.py").write_text("y = 2\n" * 3)
    (tmp_path / "autograder" / "grader.py").write_text("z = 3\n" * 5)
    counts = size_budget.line_counts(tmp_path)
    assert counts == {"minigrad/ops/big.py": 12, "minigrad/nn.py": 3, "autograder/grader.py": 5}
    assert size_budget.core_total(counts) == 12      # ops is core; nn.py and the autograder are not
    assert size_budget.check(counts, file_limit=20, core_limit=20) == []
    problems = size_budget.check(counts, file_limit=10, core_limit=11)
    assert len(problems) == 2
    assert problems[0].startswith("minigrad/ops/big.py: 12 lines (limit 10)")
    assert "the core has 12 lines (limit 11)" in problems[1]
