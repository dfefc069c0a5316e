"""The table ``key_averages().table()`` prints, column for column as PyTorch prints it.

CUDA columns appear when some event ran on a GPU with device timing, memory columns when some event
moved pool bytes, the input-shapes column when the averages were grouped by shape.
"""
def format_time(us):
    """Microseconds as PyTorch writes them: 12.300us, 1.234ms, 2.000s."""
    if us >= 1e6:
        return f"{us / 1e6:.3f}s"
    if us >= 1e3:
        return f"{us / 1e3:.3f}ms"
    return f"{us:.3f}us"


def format_memory(nbytes):
    """Bytes as PyTorch writes them: 512 b, 1.50 Kb, -2.00 Mb (sizes in 1024s)."""
    for unit, scale in (("Gb", 1024 ** 3), ("Mb", 1024 ** 2), ("Kb", 1024)):
        if abs(nbytes) >= scale:
            return f"{nbytes / scale:.2f} {unit}"
    return f"{int(nbytes)} b"


def _percent(part, whole):
    return f"{100.0 * part / whole:.2f}%" if whole else "0.00%"


def build_table(events, sort_by=None, row_limit=100, max_name_column_width=55, header=None):
    rows = list(events)   # averages (events.EventList.table turns raw events into one-event averages)
    if sort_by is not None:
        if rows and not hasattr(rows[0], sort_by):
            raise ValueError(f"profiler table: cannot sort by {sort_by!r} (try self_cpu_time_total, "
                             f"cpu_time_total, cuda_time_total, self_cpu_memory_usage, count)")
        rows.sort(key=lambda r: getattr(r, sort_by), reverse=True)
    self_cpu = sum(r.self_cpu_time_total for r in rows)
    self_cuda = sum(r.self_cuda_time_total for r in rows)
    has_cuda = any(r.cuda_time_total for r in rows)
    has_cpu_mem = any(r.cpu_memory_usage or r.self_cpu_memory_usage for r in rows)
    has_cuda_mem = any(r.cuda_memory_usage or r.self_cuda_memory_usage for r in rows)
    has_shapes = any(r.input_shapes is not None for r in rows)
    if row_limit is not None and row_limit > 0:
        rows = rows[:row_limit]

    columns = [("Name", lambda r: r.key), ("Self CPU %", lambda r: _percent(r.self_cpu_time_total, self_cpu)),
               ("Self CPU", lambda r: format_time(r.self_cpu_time_total)),
               ("CPU total %", lambda r: _percent(r.cpu_time_total, self_cpu)),
               ("CPU total", lambda r: format_time(r.cpu_time_total)),
               ("CPU time avg", lambda r: format_time(r.cpu_time))]
    if has_cuda:
        columns += [("Self CUDA", lambda r: format_time(r.self_cuda_time_total)),
                    ("Self CUDA %", lambda r: _percent(r.self_cuda_time_total, self_cuda)),
                    ("CUDA total", lambda r: format_time(r.cuda_time_total)),
                    ("CUDA time avg", lambda r: format_time(r.cuda_time))]
    if has_cpu_mem:
        columns += [("CPU Mem", lambda r: format_memory(r.cpu_memory_usage)),
                    ("Self CPU Mem", lambda r: format_memory(r.self_cpu_memory_usage))]
    if has_cuda_mem:
        columns += [("CUDA Mem", lambda r: format_memory(r.cuda_memory_usage)),
                    ("Self CUDA Mem", lambda r: format_memory(r.self_cuda_memory_usage))]
    columns.append(("# of Calls", lambda r: str(r.count)))
    if has_shapes:
        columns.append(("Input Shapes", lambda r: str(r.input_shapes)))

    cells = [[fn(r) for _, fn in columns] for r in rows]
    name_width = min(max([len(c[0]) for c in cells] + [4]), max_name_column_width)
    widths = [name_width] + [max(12, len(title)) for title, _ in columns[1:]]
    if has_shapes:
        widths[-1] = max([len(c[-1]) for c in cells] + [12])

    def line(values):
        out = []
        for i, (v, w) in enumerate(zip(values, widths)):
            v = v if len(v) <= w else v[:w - 3] + "..."
            out.append(v.ljust(w) if i == len(widths) - 1 and has_shapes else v.rjust(w))
        return "  ".join(out) + "  "

    rule = "  ".join("-" * w for w in widths) + "  "
    lines = ([header] if header else []) + [rule, line([t for t, _ in columns]), rule]
    lines += [line(c) for c in cells]
    lines += [rule, f"Self CPU time total: {format_time(self_cpu)}"]
    if has_cuda:
        lines.append(f"Self CUDA time total: {format_time(self_cuda)}")
    return "\n".join(lines) + "\n"
