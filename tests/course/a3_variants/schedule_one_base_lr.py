# Every param group gets the first group's schedule.
# %% [a3-schedule] patch
# <<<
        self.base_lrs = [group["lr"] for group in optimizer.param_groups]
# ===
        self.base_lrs = [optimizer.param_groups[0]["lr"]] * len(optimizer.param_groups)
# >>>
