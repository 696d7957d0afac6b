"""The documentation cannot drift silently: the README stays a short front page, user docs cite no internal
issue numbers, every module, file, flag and link the docs name exists, and every package docstring names
each of its modules (the docstrings and pyproject's import contracts are where the architecture is stated).
"""

from __future__ import annotations

import argparse
import ast
import importlib
import importlib.util
import re
from pathlib import Path

import pytest

from optplan.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
USER_DOCS = [README, *DOCS]
PACKAGE = ROOT / "optplan"
MAX_README_LINES = 200


def text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def ids(paths: list[Path]) -> list[str]:
    return [str(p.relative_to(ROOT)) for p in paths]


def test_readme_is_a_short_front_page_that_keeps_its_first_lines() -> None:
    lines = text(README).splitlines()
    assert len(lines) <= MAX_README_LINES, f"README.md has {len(lines)} lines; move detail into docs/"
    assert lines[0] == "# optplan"
    assert "pip install . && optplan repack instances/seed-dryrun.yaml -o table" in lines[3]
    assert "pip install -e '.[test]' && pytest" in lines[4]


def test_the_docs_folder_has_the_pages_the_readme_links() -> None:
    linked = set(re.findall(r"\]\((docs/[\w.-]+\.md)", text(README)))
    assert {str(p.relative_to(ROOT)) for p in DOCS} == linked, "every page linked from the README, and no more"


@pytest.mark.parametrize("path", USER_DOCS, ids=ids(USER_DOCS))
def test_no_user_doc_cites_an_issue_number(path: Path) -> None:
    hits = [m.group(0) for m in re.finditer(r"issues?\s*#?\d+", text(path), re.IGNORECASE)]
    assert not hits, f"{path.name} cites {hits}: say what the fact is, not where it was asked for"


# --- modules and files the docs name --------------------------------------------------------------------

SOURCE_FILES = [p.relative_to(ROOT).as_posix() for d in ("optplan", "tests", "benchmarks")
                for p in (ROOT / d).rglob("*.py")]
FILE_PATH = re.compile(r"(?<![\w/.-])((?:[\w-]+/)*[\w-]+\.py)\b")
REPO_PATH = re.compile(r"(?<![\w/.-])((?:optplan|instances|crds|deploy|benchmarks|tests|docs)/[\w./-]*[\w/])")
DOTTED = re.compile(r"(?<![\w./])(optplan(?:\.\w+)+)(?![\w/-])")  # not a label domain: optplan.io/...


def file_exists(name: str) -> bool:
    """A path from the repository root (``optplan/solvers/repack/exact/pools.py``) or the tail of one
    (``repack/exact/pools.py``, ``binlp.py``), as the docs shorten them inside one family."""
    return (ROOT / name).is_file() or any(f == name or f.endswith("/" + name) for f in SOURCE_FILES)


def resolves(dotted: str) -> bool:
    """``optplan.solvers.repack.exact.pools`` (a module) or ``optplan.api.plan_repack`` (a module's attribute)."""
    parts = dotted.split(".")
    for n in range(len(parts), 0, -1):
        module = ".".join(parts[:n])
        try:
            found = importlib.util.find_spec(module) is not None
        except ModuleNotFoundError:
            found = False
        if found:
            obj: object = importlib.import_module(module)
            for attr in parts[n:]:
                if not hasattr(obj, attr):
                    return False
                obj = getattr(obj, attr)
            return True
    return False


@pytest.mark.parametrize("path", USER_DOCS, ids=ids(USER_DOCS))
def test_every_module_and_file_the_docs_name_exists(path: Path) -> None:
    body = text(path)
    missing = sorted({f for f in FILE_PATH.findall(body) if not file_exists(f)}
                     | {p for p in REPO_PATH.findall(body) if not (ROOT / p).exists()}
                     | {d for d in DOTTED.findall(body) if not resolves(d)})
    assert not missing, f"{path.name} names what does not exist: {missing}"


def test_the_name_checks_catch_what_does_not_exist() -> None:
    assert file_exists("optplan/solvers/repack/exact/pools.py") and file_exists("repack/exact/pools.py")
    assert file_exists("binlp.py") and file_exists("tests/cli/test_docs.py")
    assert not file_exists("repack/layout.py") and not file_exists("optplan/solvers/pools.py")
    assert resolves("optplan.solvers.repack.exact.pools") and resolves("optplan.api.plan_repack")
    assert resolves("optplan.solvers.repack.validate.validate_plan")
    assert not resolves("optplan.solvers.repack.layout") and not resolves("optplan.api.no_such_call")
    found = FILE_PATH.findall("see `goals/validate.py` and tests/adapters/test_fuzz.py")
    assert found == ["goals/validate.py", "tests/adapters/test_fuzz.py"]


# --- links ---------------------------------------------------------------------------------------------

LINK = re.compile(r"\]\(([^)\s]+)\)")


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    in_fence = False
    for line in text(path).splitlines():
        if line.startswith("```"):
            in_fence = not in_fence
        m = re.match(r"#{1,6} (.+)", line)
        if m and not in_fence:
            s = slug(m.group(1))
            n = seen.get(s, 0)
            seen[s] = n + 1
            out.add(s if n == 0 else f"{s}-{n}")
    return out


@pytest.mark.parametrize("path", USER_DOCS, ids=ids(USER_DOCS))
def test_every_relative_link_and_anchor_resolves(path: Path) -> None:
    broken = []
    for target in LINK.findall(text(path)):
        if re.match(r"[a-z]+://", target):
            continue
        file, _, anchor = target.partition("#")
        dest = (path.parent / file).resolve() if file else path
        if not dest.exists() or (anchor and dest.suffix == ".md" and anchor not in anchors(dest)):
            broken.append(target)
    assert not broken, f"{path.name}: broken links {broken}"


def test_slugs_are_githubs() -> None:
    assert slug("`optplan repack` — plan a RepackRun") == "optplan-repack--plan-a-repackrun"
    assert slug("Time limits and reproducible plans") == "time-limits-and-reproducible-plans"


# --- every flag of every command is in docs/commands.md ----------------------------------------------------

COMMANDS = ROOT / "docs" / "commands.md"


def sections(body: str) -> dict[str, str]:
    parts = re.split(r"^## (.+)$", body, flags=re.MULTILINE)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts) - 1, 2)}


def subcommands(parser: argparse.ArgumentParser, prefix: str = "") -> dict[str, argparse.ArgumentParser]:
    out: dict[str, argparse.ArgumentParser] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                nested = subcommands(sub, f"{prefix}{name} ")
                out.update(nested or {f"{prefix}{name}": sub})
    return out


@pytest.mark.parametrize("command", sorted(subcommands(build_parser())))
def test_commands_md_documents_every_flag_of_every_command(command: str) -> None:
    by_heading = sections(text(COMMANDS))
    common = by_heading["Common to every command"]
    own = [body for heading, body in by_heading.items() if f"`optplan {command}`" in heading]
    assert own, f"docs/commands.md has no section for `optplan {command}`"
    allowed = common + "".join(own)
    undocumented = []
    for action in subcommands(build_parser())[command]._actions:
        if action.help == argparse.SUPPRESS:  # hidden on purpose (--tiny: the tests' bench)
            continue
        flags = [o for o in action.option_strings if o not in ("-h", "--help")]
        if flags and not any(re.search(rf"(?<![\w-]){re.escape(f)}(?![\w-])", allowed) for f in flags):
            undocumented.append(flags[-1])
    assert not undocumented, f"docs/commands.md, `optplan {command}`: undocumented {undocumented}"


# --- the package docstrings name every module -------------------------------------------------------------

PACKAGES = sorted(p.parent for p in PACKAGE.rglob("__init__.py"))


@pytest.mark.parametrize("package", PACKAGES, ids=[p.relative_to(ROOT).as_posix() for p in PACKAGES])
def test_each_package_docstring_names_each_of_its_modules(package: Path) -> None:
    doc = ast.get_docstring(ast.parse(text(package / "__init__.py"))) or ""
    members = sorted({p.stem for p in package.glob("*.py") if not p.stem.startswith("__")}
                     | {p.parent.name for p in package.glob("*/__init__.py")})
    unnamed = [m for m in members if not re.search(rf"(?<![\w-]){m}(?![\w-])", doc)]
    assert not unnamed, f"{package.relative_to(ROOT)}/__init__.py's docstring does not say what {unnamed} are"
