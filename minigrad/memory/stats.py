"""Statistics of a CachingAllocator: PyTorch-style flat dicts and a readable summary table.

It reads any object with the allocator's interface (``stats``, ``inactive_split``, ``fragmentation``...)
and imports nothing from ``allocator.py``, which uses ``summary`` in its out-of-memory message.

Vocabulary (as in PyTorch):

- *allocated*: bytes in blocks handed out, counted at their rounded size;
- *requested*: what callers asked for before rounding (allocated - requested = internal fragmentation);
- *active*: allocated blocks not yet returned. minigrad has no streams, so active == allocated;
- *reserved*: bytes in segments obtained from the device, cached or not;
- *inactive split*: free blocks inside partly used segments: cached, yet not releasable by empty_cache.
"""
_AMOUNTS = ("current", "peak", "allocated", "freed")


def fragmentation_of(free_sizes):
    """The one definition of fragmentation used by ``fragmentation()``, lecture 02 and the a2 grader:
    ``1 - largest free block / all free bytes`` of the cache (external fragmentation).

    0 when the free memory is one piece (or there is none): a request as large as all of it fits.
    Close to 1 when it is crumbs: free bytes exist, but a large request still needs a new segment.
    Internal fragmentation (rounding) and cached-but-unused memory are other numbers:
    ``allocated - requested`` and ``reserved - allocated``.
    """
    sizes = [int(s) for s in free_sizes if s > 0]
    total = sum(sizes)
    return 0.0 if total == 0 else 1.0 - max(sizes) / total


def free_holes(segments, blocks):
    """Sizes of the free ranges of ``segments`` [(address, size)] not covered by the live ``blocks``
    [(address, size)]: the cache's free blocks, recovered from a layout (what a grader replaying an
    allocator's trace knows). ``fragmentation_of(free_holes(...))`` is then the allocator's fragmentation."""
    holes = []
    by_start = sorted(blocks)
    for seg_addr, seg_size in sorted(segments):
        cursor, end = seg_addr, seg_addr + seg_size
        for addr, size in by_start:
            if addr + size <= seg_addr or addr >= end:
                continue
            if addr > cursor:
                holes.append(addr - cursor)
            cursor = max(cursor, addr + size)
        if end > cursor:
            holes.append(end - cursor)
    return holes


def memory_stats(allocator):
    """Flat dict with PyTorch's keys, e.g. ``allocated_bytes.all.current``, ``segment.large_pool.peak``."""
    out = {}
    for scope, stats in allocator.stats.items():
        for name, stat in stats.items():
            values = [getattr(stat, a) for a in _AMOUNTS]
            for amount, value in zip(_AMOUNTS, values):
                out[f"{name}.{scope}.{amount}"] = value
            if name in ("allocated_bytes", "allocation"):      # no streams: active is allocated
                active = "active_bytes" if name == "allocated_bytes" else "active"
                for amount, value in zip(_AMOUNTS, values):
                    out[f"{active}.{scope}.{amount}"] = value
    for scope in allocator.stats:            # "all", then each pool
        count, nbytes = allocator.inactive_split(scope)
        out[f"inactive_split.{scope}.current"] = count
        out[f"inactive_split_bytes.{scope}.current"] = nbytes
    out["num_alloc_retries"] = allocator.num_alloc_retries
    out["num_ooms"] = allocator.num_ooms
    out["num_device_alloc"] = allocator.num_device_alloc
    out["num_device_free"] = allocator.num_device_free
    out["memory_limit"] = allocator.memory_limit or 0
    out["fragmentation"] = allocator.fragmentation()
    return dict(sorted(out.items()))


def format_bytes(n):
    """1536 -> '1.50 KiB'; whole units print without decimals ('2 MiB')."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            break
        n /= 1024
    if unit == "B" or float(n).is_integer():
        return f"{int(n)} {unit}"
    return f"{n:.2f} {unit}"


def summary(allocator):
    """A table like ``torch.cuda.memory_summary()``: rows per metric and pool, columns per amount."""
    stats = memory_stats(allocator)
    width = 79

    def row(label, cells=()):
        return ("| " + label.ljust(26) + "".join(str(c).rjust(12) for c in cells)).ljust(width - 1) + "|"

    rule, heavy = "|" + "-" * (width - 2) + "|", "|" + "=" * (width - 2) + "|"
    limit = allocator.memory_limit
    lines = [heavy,
             "|" + f" minigrad memory summary, device {allocator.device_name} ".center(width - 2) + "|",
             rule,
             (f"| OOMs: {allocator.num_ooms}    alloc retries: {allocator.num_alloc_retries}    "
              f"limit: {'none' if limit is None else format_bytes(limit)}    "
              f"fragmentation: {allocator.fragmentation():.2f}").ljust(width - 1) + "|",
             heavy,
             row("Metric", ("Cur Usage", "Peak Usage", "Tot Alloc", "Tot Freed")),
             rule]
    metrics = [("Allocated memory", "allocated_bytes", True), ("Requested memory", "requested_bytes", True),
               ("Reserved memory", "reserved_bytes", True), ("Allocations", "allocation", False),
               ("Reserved segments", "segment", False)]
    pools = (("all", None), ("large_pool", "    from large pool"), ("small_pool", "    from small pool"))
    for title, key, is_bytes in metrics:
        for scope, label in pools:
            cells = [stats[f"{key}.{scope}.{a}"] for a in _AMOUNTS]
            lines.append(row(label or title, [format_bytes(c) if is_bytes else c for c in cells]))
        lines.append(rule)
    for scope, label in pools:
        nbytes = stats[f"inactive_split_bytes.{scope}.current"]
        count = stats[f"inactive_split.{scope}.current"]
        lines.append(row(label or "Non-releasable memory", [format_bytes(nbytes), f"{count} blocks"]))
    lines.append(heavy)
    return "\n".join(lines)
