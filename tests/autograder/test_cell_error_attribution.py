"""When several graded cells of a part raise, each failing test is explained by the cell it depends on."""
from autograder.grader import _relevant_cell_error

ERRORS = [("a1-exp", "RuntimeError in cell 'a1-exp': boom"), ("a1-div", "NameError in cell 'a1-div': x")]


def test_the_cell_named_like_the_test_explains_it():
    assert _relevant_cell_error(ERRORS, "Div") == ERRORS[1][1]
    assert _relevant_cell_error(ERRORS, "Exp") == ERRORS[0][1]


def test_otherwise_the_first_failing_cell():
    assert _relevant_cell_error(ERRORS, "engine: diamond") == ERRORS[0][1]
