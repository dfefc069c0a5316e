"""Planted bug (part 1): a node joins a chain when *one* of its readers is in it, even if its value is
also read elsewhere or returned by the graph."""
# %% [a7-chains] patch
# <<<
        if readers and None not in owners and len(owners) == 1:
            chain = chain_of[readers[0]]
# ===
        inner = [u for u in readers if u != "output" and u in chain_of]
        if inner:
            chain = chain_of[inner[0]]
# >>>
