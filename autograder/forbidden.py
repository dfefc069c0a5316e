"""What a graded cell may not use, found in the cell's syntax tree (never in its text).

A rule is a dotted name: ``"minigrad.memory"`` forbids importing that module or anything in it, and any
attribute chain that resolves to it (``mg.memory.enable``, with ``mg`` bound by ``import minigrad as mg``
in the cell or the spec's preamble). ``"F.conv2d"`` forbids that chain on a name the cell never binds, and
``"*.softmax"`` forbids the attribute on any object (``logits.softmax(1)``). ``"=minigrad.compile"`` (a
leading ``=``) forbids exactly that name and none under it: ``mg.compile(fn)``, ``c = mg.compile``,
``getattr(mg, "compile")`` are uses, ``mg.compile.ir.Graph`` and ``from minigrad.compile import Graph`` are
not (a7 forbids the callable ``mg.compile``, which would fuse for the student, while the student builds on
the IR under it). An ``import`` statement that merely binds the exact name (``import minigrad.compile as
c``, ``from minigrad import compile``) is no use either; what the cell then does with the name is checked.

Reading the tree instead of the text means that a student's own ``class CachingAllocator``, a comment or a
string that mentions a forbidden name is no use of it, while the indirect routes still are:
``importlib.import_module("minigrad.memory")``, ``__import__(...)``, ``getattr(mg, "memory")`` and
``sys.modules["minigrad.memory"]``, and, because nobody can tell what they reach, the same calls with a
name computed at run time on a forbidden package. Deliberate obfuscation (``exec`` of an encoded string)
still needs a human; see the README's known limits.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass


COMPUTED = "a name computed at run time"   # the rule of an indirect use whose target nobody can tell

#: what no graded cell of any assignment may use, on top of the assignment's own rules: the grader's own
#: modules (a spec's helpers are not the student's), and the tools that reach the grader's state in the
#: sandbox (its measurements, the harness's frames and closures, the garbage collector's heap, raw memory).
#: The grader also enforces what it can at run time (autograder/_guard.py); these make the attempt visible
#: early, with a line number.
INTEGRITY = [
    "autograder", "tracemalloc", "_tracemalloc", "ctypes", "_ctypes", "sys.modules", "sys._getframe",
    "sys.settrace", "sys.setprofile", "gc.get_objects", "gc.get_referrers", "gc.get_referents",
    "inspect.currentframe", "inspect.stack", "inspect.getouterframes", "inspect.getclosurevars",
    "inspect.trace", "importlib.reload", "*.f_back", "*.f_locals", "*.f_globals", "*.tb_frame",
    "*.gi_frame", "*.cr_frame", "*.ag_frame", "*.__closure__", "*.cell_contents", "*.__globals__",
]
INTEGRITY_RULES = frozenset(INTEGRITY)


@dataclass(frozen=True)
class Use:
    line: int
    written: str        # what the cell wrote, as far as the rule reaches (`mg.memory`, `minigrad.ops`)
    rule: str


_OWN = "<cell>."     # the prefix of names the cell binds to its own objects: no rule names them


def _matches(dotted: str, rule: str, binding: bool = False) -> bool:
    if rule.startswith("*."):
        return rule[2:] in dotted.split(".")[1:]
    if rule.startswith("="):
        return not binding and dotted == rule[1:]
    return dotted == rule or dotted.startswith(rule + ".")


class _Scanner(ast.NodeVisitor):
    def __init__(self, rules: list[str], bindings: dict[str, str]):
        self.rules = rules
        self.bound = dict(bindings)                       # name -> the dotted name it refers to
        self.packages = {r.lstrip("=").split(".")[0] for r in rules if not r.startswith("*.")}
        self.uses: list[Use] = []

    # -- recording
    def _check(self, node, dotted: str, written: list[str] | None = None, binding: bool = False) -> bool:
        """Record a use of ``dotted`` if a rule forbids it; ``binding``: an import statement names it."""
        for rule in self.rules:
            if _matches(dotted, rule, binding):
                parts = written or dotted.split(".")
                keep = len(parts) if rule.startswith("*.") else max(1, len(parts) - (len(dotted.split("."))
                                                                                   - len(rule.split("."))))
                self.uses.append(Use(node.lineno, ".".join(parts[:keep]), rule))
                return True
        return False

    def _computed(self, node, what: str):
        self.uses.append(Use(node.lineno, what, COMPUTED))

    # -- names
    def _chain(self, node) -> tuple[str | None, list[str]]:
        """(the dotted name an attribute chain resolves to, the chain as written); (None, []) otherwise.
        A chain may start at a call whose result is known: ``__import__("m").x``, ``importlib.import_module
        ("m").x``, ``sys.modules["m"].x``, ``sys.modules.get("m").x``, ``getattr(obj, "a").x`` and
        ``operator.attrgetter("a.b")(obj).x``."""
        attrs = []
        while isinstance(node, ast.Attribute):
            attrs.append(node.attr)
            node = node.value
        attrs.reverse()
        if isinstance(node, (ast.Call, ast.Subscript)):
            root = self._call_root(node)
            if root is None:
                return None, []
            return ".".join([root, *attrs]), [*root.split("."), *attrs]
        if not isinstance(node, ast.Name):
            return None, []
        root = self.bound.get(node.id, node.id)
        return ".".join([root, *attrs]), [node.id, *attrs]

    def _call_root(self, node) -> str | None:
        """The dotted name a call or subscript evaluates to, when a constant says it; else None."""
        def const(arg):
            return arg.value if isinstance(arg, ast.Constant) and isinstance(arg.value, str) else None
        if isinstance(node, ast.Subscript):
            if self._chain(node.value)[0] == "sys.modules":
                return const(node.slice)
            return None
        func = self._chain(node.func)[0] if isinstance(node.func, (ast.Name, ast.Attribute, ast.Call)) else None
        args = node.args
        if func == "importlib.import_module" and args:
            return const(args[0])
        if func == "__import__" and args:
            name = const(args[0])
            fromlist = len(args) > 3 or any(k.arg == "fromlist" for k in node.keywords)
            return name if name is None or fromlist else name.split(".")[0]
        if func == "sys.modules.get" and args:
            return const(args[0])
        if func == "getattr" and len(args) >= 2 and const(args[1]):
            owner = self._chain(args[0])[0]
            return f"{owner}.{const(args[1])}" if owner else None
        if isinstance(node.func, ast.Call) and args and \
                self._chain(node.func.func)[0] == "operator.attrgetter" and node.func.args:
            path, owner = const(node.func.args[0]), self._chain(args[0])[0]
            return f"{owner}.{path}" if path and owner else None
        return None

    def _bind(self, target, value=None):
        if isinstance(target, ast.Name):
            dotted, written = self._chain(value) if value is not None else (None, [])
            if dotted is not None and (written[0] in self.bound or written[0] in self.packages):
                self.bound[target.id] = dotted          # `m = mg`: m is minigrad from here on
            else:
                self.bound[target.id] = _OWN + target.id    # the cell's own object now
        elif isinstance(target, (ast.Tuple, ast.List)):
            for t in target.elts:
                self._bind(t)

    # -- statements that bind names
    def visit_Import(self, node):
        for a in node.names:
            self._check(node, a.name, binding=True)
            if a.asname:
                self.bound[a.asname] = a.name
            else:
                top = a.name.split(".")[0]
                self.bound[top] = top

    def visit_ImportFrom(self, node):
        if node.level:          # relative imports mean nothing in a notebook cell
            return
        for a in node.names:
            dotted = f"{node.module}.{a.name}" if a.name != "*" else node.module
            self._check(node, dotted, binding=True)
            if a.name != "*":
                self.bound[a.asname or a.name] = dotted

    def visit_Assign(self, node):
        self.visit(node.value)
        for t in node.targets:
            self._bind(t, node.value if len(node.targets) == 1 else None)

    def visit_FunctionDef(self, node):
        self.bound[node.name] = _OWN + node.name
        self.generic_visit(node)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node):
        self.bound[node.name] = _OWN + node.name        # `class CachingAllocator:` is the student's own
        self.generic_visit(node)

    # -- uses
    def visit_Attribute(self, node):
        dotted, written = self._chain(node)
        if dotted is not None:
            if not self._check(node, dotted, written) and "__dict__" in written and \
                    dotted.split(".")[0] in self.packages:
                self._computed(node, ".".join(written))
            base = node
            while isinstance(base, ast.Attribute):
                base = base.value
            if isinstance(base, (ast.Call, ast.Subscript)):
                self.visit(base)                         # the call's own arguments
            return                                       # the inner attributes are part of this chain
        self.generic_visit(node)

    def visit_Name(self, node):
        if node.id in self.bound and isinstance(node.ctx, ast.Load):
            self._check(node, self.bound[node.id], [node.id])

    def visit_Call(self, node):
        func = self._chain(node.func)[0] if isinstance(node.func, (ast.Name, ast.Attribute)) else None
        args = node.args
        const = args and isinstance(args[0], ast.Constant) and isinstance(args[0].value, str)
        if func in ("importlib.import_module", "__import__") and args:
            if const:
                self._check(node, args[0].value)
            else:
                self._computed(node, f"{func}(...)")
        elif func == "getattr" and len(args) >= 2:
            owner = self._chain(args[0])[0]
            if owner is not None and owner.split(".")[0] in self.packages:
                if isinstance(args[1], ast.Constant) and isinstance(args[1].value, str):
                    self._check(node, f"{owner}.{args[1].value}")
                else:
                    self._computed(node, f"getattr({ast.unparse(args[0])}, ...)")
        elif func == "vars" and args:
            owner = self._chain(args[0])[0]
            if owner is not None and owner.split(".")[0] in self.packages:
                self._computed(node, f"vars({ast.unparse(args[0])})")
        elif func == "sys.modules.get" and args:
            if const:
                self._check(node, args[0].value)
            else:
                self._computed(node, "sys.modules.get(...)")
        elif isinstance(node.func, ast.Call) and self._chain(node.func.func)[0] == "operator.attrgetter":
            root = self._call_root(node)
            if root is not None:
                self._check(node, root)
        self.generic_visit(node)

    def visit_Subscript(self, node):
        if self._chain(node.value)[0] == "sys.modules":
            key = node.slice
            if isinstance(key, ast.Constant) and isinstance(key.value, str):
                self._check(node, key.value)
            else:
                self._computed(node, "sys.modules[...]")
        self.generic_visit(node)


def _bindings(preamble: str) -> dict[str, str]:
    scan = _Scanner([], {})
    try:
        scan.visit(ast.parse(preamble))
    except SyntaxError:
        pass
    return scan.bound


def forbidden_uses(source: str, rules: list[str], preamble: str = "") -> list[Use]:
    """Every use of a forbidden name in `source`, in line order. A cell that does not parse has none: it
    fails on its own when it runs."""
    if not rules:
        return []
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    scan = _Scanner(list(rules), _bindings(preamble))
    scan.visit(tree)
    return sorted(scan.uses, key=lambda u: u.line)


def forbidden_message(rules: list[str], preamble: str, cells) -> str:
    """Why a part scores 0 when one of its graded `cells` [(cell id, source)] uses a forbidden name (the
    assignment's `rules`, and ``INTEGRITY``); "" if none. The grader and the self-check (``check()``) both say
    it with these words."""
    for cid, source in cells:
        uses = forbidden_uses(source, [*rules, *INTEGRITY], preamble)
        if uses:
            u = uses[0]
            if u.rule == COMPUTED:
                return (f"cell '{cid}' line {u.line} uses `{u.written}` with a name computed at run time: the "
                        f"grader cannot tell what it reaches, so the part scores 0. Name what you use directly.")
            if u.rule in INTEGRITY_RULES and u.rule not in rules:
                return (f"cell '{cid}' line {u.line} uses `{u.written}`, which no graded cell may use (it reaches "
                        f"the grader's own modules or state): the part scores 0")
            return f"cell '{cid}' line {u.line} uses `{u.written}`, which this assignment asks you to write yourself"
    return ""
