"""Planted bug (part 1): the recomputation runs with whatever the RNG state is now, so dropout draws new
masks and the gradients silently differ from the run without checkpointing."""
# %% [a5-checkpoint] patch
# <<<
        if rng_state is not None:
            mg.set_rng_state(rng_state)           # the same dropout masks as in the forward
        try:
            with mg.enable_grad(), saved_tensors_hooks(arrays.append, lambda _: None):
                fn(*inputs)
        finally:
            if rng_state is not None:
                mg.set_rng_state(now)             # the stream goes on as if nothing was recomputed
# ===
        with mg.enable_grad(), saved_tensors_hooks(arrays.append, lambda _: None):
            fn(*inputs)                           # BUG: the RNG is not replayed
# >>>
