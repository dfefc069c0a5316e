"""Neural-network ops, one file per family, each public function right under its Function.

They are part of the core (``Tensor.relu`` binds from here); ``minigrad.nn.functional`` re-exports them
under PyTorch's ``F.`` names.
"""
