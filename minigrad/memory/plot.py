"""Timeline plots of a memory snapshot: allocated bytes stacked by op (or label, or tensor), reserved on top.

The x axis is the event sequence number (one step per alloc/free), which spaces events evenly; wall time
would squash a whole forward pass into a sliver next to a slow data-loading step. matplotlib is imported
only when a plot is drawn.
"""
from .stats import format_bytes

BEFORE = "(before recording)"
OTHER = "(other)"


def timeline(snapshot, by="op", top=12):
    """The numbers behind the plot: (x, {group: bytes per event}, reserved per event).

    ``by``: 'op' (the event's cause), 'label' or 'tensor' (one band per allocation, the ``top`` largest;
    the rest, and more than ``top`` groups of any kind, are folded into '(other)').
    """
    if by not in ("op", "label", "tensor"):
        raise ValueError(f"plot_timeline: by must be 'op', 'label' or 'tensor', got {by!r}")
    events = [e for e in snapshot["events"] if e["action"] in ("alloc", "free", "segment_alloc",
                                                               "segment_free")]
    group_of_alloc = _groups(events, by, top)
    current, series, reserved, live = {}, {}, [], {}
    if events:                                    # blocks that were live before recording started
        first = events[0]
        delta = {"alloc": first["size"], "free": -first["size"]}.get(first["action"], 0)
        if first["allocated_bytes"] - delta:
            current[BEFORE] = first["allocated_bytes"] - delta
    for i, e in enumerate(events):
        if e["action"] == "alloc":
            g = group_of_alloc[e["seq"]]
            live[e["address"]] = g
            current[g] = current.get(g, 0) + e["size"]
        elif e["action"] == "free":
            g = live.pop(e["address"], BEFORE)
            current[g] = current.get(g, 0) - e["size"]
        for g, value in current.items():
            series.setdefault(g, [0] * len(events))[i] = value
        reserved.append(e["reserved_bytes"])
    return list(range(len(events))), series, reserved


def _groups(events, by, top):
    """seq of each alloc event -> its band name."""
    allocs = [e for e in events if e["action"] == "alloc"]
    if by == "tensor":
        keep = {e["seq"] for e in sorted(allocs, key=lambda e: -e["size"])[:top]}
        return {e["seq"]: (f"#{e['seq']} {e['cause']} {format_bytes(e['size'])}" if e["seq"] in keep
                           else OTHER) for e in allocs}
    key = "cause" if by == "op" else "label"
    names = [str(e[key]) for e in allocs]
    totals = {}
    for n, e in zip(names, allocs):
        totals[n] = totals.get(n, 0) + e["size"]
    keep = set(sorted(totals, key=lambda n: -totals[n])[:top])
    return {e["seq"]: (n if n in keep else OTHER) for n, e in zip(names, allocs)}


def plot_timeline(snapshot, by="op", ax=None, path=None, top=12):
    """Draw the timeline on ``ax`` (a new figure if None); save it to ``path`` (PNG etc.) if given."""
    x, series, reserved = timeline(snapshot, by, top)
    peak = max([max(reserved, default=0)] + [max(v) for v in series.values()] + [1])
    unit, scale = next((u, s) for u, s in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10), ("B", 1))
                       if peak >= s)
    if ax is None:
        if path is not None:                      # headless: draw with Agg, never touch pyplot's state
            from matplotlib.backends.backend_agg import FigureCanvasAgg
            from matplotlib.figure import Figure
            fig = Figure(figsize=(9, 4.5))
            FigureCanvasAgg(fig)
            ax = fig.add_subplot()
        else:                                     # notebooks: a pyplot figure renders inline
            import matplotlib.pyplot as plt
            _, ax = plt.subplots(figsize=(9, 4.5))
    # bottom to top: what was there before recording, then the biggest bands, then the rest
    names = sorted(series, key=lambda g: (g != BEFORE, g == OTHER, -max(series[g])))
    if names:
        import matplotlib
        tab10 = matplotlib.colormaps["tab10"].colors
        palette = tab10[:7] + tab10[8:] + matplotlib.colormaps["Set3"].colors  # greys mean BEFORE/OTHER
        colours, k = [], 0
        for g in names:
            if g in (BEFORE, OTHER):
                colours.append("0.55" if g == BEFORE else "0.8")
            else:
                colours.append(palette[k % len(palette)])
                k += 1
        ax.stackplot(x, [[v / scale for v in series[g]] for g in names], labels=names, colors=colours,
                     step="post", alpha=0.9)
    ax.step(x, [r / scale for r in reserved], where="post", color="black", linewidth=1.2,
            label="reserved")
    ax.set_xlabel("event (alloc / free) sequence")
    ax.set_ylabel(f"memory ({unit})")
    ax.set_title(f"memory timeline, device {snapshot.get('device', '?')}, by {by}")
    ax.set_xlim(0, max(len(x) - 1, 1))
    ax.set_ylim(bottom=0)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small", frameon=False)
    if path is not None:
        ax.figure.savefig(path, dpi=100, bbox_inches="tight")
    return ax
