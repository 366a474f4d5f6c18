"""The package's layers: data flow FASTA -> tokens -> task batches -> encoder -> task head -> scores/tracks, and no
module imports one of a later layer (function-level imports included)."""

from __future__ import annotations

import ast

from conftest import REPO

# in the order data flows; a module may import its own layer and earlier ones
LAYERS = [
    ["genolin", "genolin.errors", "genolin.progress", "genolin.host"],
    ["genolin.io", "genolin.genes"],
    ["genolin.tokenize"],
    ["genolin.ops"],
    ["genolin.mixers"],
    ["genolin.model"],
    ["genolin.config"],
    ["genolin.tasks", "genolin.peaks", "genolin.calibrate"],
    ["genolin.checkpoint", "genolin.device", "genolin.memory", "genolin.averaging", "genolin.schedule",
     "genolin.models"],
    ["genolin.inference"],
    ["genolin.train", "genolin.train_graph", "genolin.selection", "genolin.evaluate", "genolin.predict",
     "genolin.bench", "genolin.explain", "genolin.motifs"],
    ["genolin.cli", "genolin.__main__"],
]


def layer_of(module: str) -> int:
    best = None
    for i, names in enumerate(LAYERS):
        for name in names:
            if (module == name or module.startswith(name + ".")) and (best is None or len(name) > best[1]):
                best = (i, len(name))
    assert best is not None, f"{module} is in no layer: add it to LAYERS"
    return best[0]


def genolin_imports(path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.split(".")[0] == "genolin"}
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "genolin":
            out.add(node.module)
    return out


def test_no_import_goes_back_up():
    package = REPO / "genolin"
    wrong = []
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(REPO).with_suffix("").parts
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        for imported in genolin_imports(path):
            if layer_of(imported) > layer_of(module):
                wrong.append(f"{module} imports {imported}")
    assert not wrong, "\n".join(wrong)


def test_the_layer_check_catches_an_upward_import(tmp_path):
    bad = tmp_path / "m.py"
    bad.write_text("def f():\n    from genolin.train import train\n")
    assert genolin_imports(bad) == {"genolin.train"}  # found inside a function
    assert layer_of("genolin.train") > layer_of("genolin.tasks.track") > layer_of("genolin.model")
    assert layer_of("genolin.model") > layer_of("genolin.mixers.linear") > layer_of("genolin.ops")


def task_name_tests(path) -> list[str]:
    """Comparisons of a value with a task's name ("sequence", "track") in ``path``: ==, !=, in and not in."""
    names = {"sequence", "track"}
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Compare):
            for part in [node.left, *node.comparators]:
                values = part.elts if isinstance(part, (ast.Tuple, ast.List, ast.Set)) else [part]
                if any(isinstance(v, ast.Constant) and v.value in names for v in values):
                    found.append(f"{path}:{node.lineno}")
                    break
    return found


def test_nothing_outside_the_tasks_checks_a_tasks_name():
    """What differs between tasks is the task's attributes (genolin.tasks) or its preset section's contents
    (genolin.config), never a test of its name."""
    package = REPO / "genolin"
    found = [hit for path in sorted(package.rglob("*.py")) if "tasks" not in path.relative_to(package).parts
             for hit in task_name_tests(path)]
    assert not found, "\n".join(found)


def test_the_task_name_check_catches_a_comparison(tmp_path):
    bad = tmp_path / "m.py"
    bad.write_text("def f(task):\n    return task == 'track' or task in ('sequence', 'x')\n")
    assert len(task_name_tests(bad)) == 2


def test_no_class_over_250_lines_and_no_function_over_80():
    """Issue 58's sizes: a class holds one role, a function reads in one screen."""
    too_long = []
    for path in sorted((REPO / "genolin").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            lines = getattr(node, "end_lineno", 0) - getattr(node, "lineno", 0) + 1
            if isinstance(node, ast.ClassDef) and lines > 250:
                too_long.append(f"{path.relative_to(REPO)}: class {node.name}, {lines} lines")
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and lines > 80:
                too_long.append(f"{path.relative_to(REPO)}: {node.name}, {lines} lines")
    assert not too_long, "\n".join(too_long)
