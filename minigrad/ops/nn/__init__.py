"""Neural-network ops (one file per family). The user-facing API is ``minigrad.nn.functional``."""
