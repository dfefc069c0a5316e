"""Planted bug (part 3): the online softmax forgets to rescale what it summed when the running max grows."""
# %% [a7-flash] patch
# <<<
                alpha = np.exp(m - m_new)
# ===
                alpha = 1.0
# >>>
