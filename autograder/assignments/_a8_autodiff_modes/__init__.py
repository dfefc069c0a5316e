"""Helpers of the a8 spec (``a8_autodiff_modes.py``): the functions graded in each part, written once for
both sides (``functions.py``: the child runs them on the student's ops, the parent on NumPy or on minigrad's
own ops), and the parent's references and hints for the usual mistakes (``references.py``)."""
