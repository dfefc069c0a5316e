"""Planted shortcut (part 2): backward recomputes the chain through mg.compile, the library's compiler (it
would fuse the chain for the student). The cell still builds on the IR (Graph, Node), which stays allowed:
the exact-name rule "=minigrad.compile" refuses only the callable itself."""
# %% [a7-fuse] patch
# <<<
            out = chain_fn(k.chain, k.inputs, leaves)
# ===
            out = mg.compile(lambda *v: chain_fn(k.chain, k.inputs, v))(*leaves)
# >>>
