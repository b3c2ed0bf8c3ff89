"""User tool modules: importing what `package.module:attr` names, and as files, for a Grove in
another process (the service): which modules every process has already (installed), the source
files of one that is not (found as `grove run --tools` finds it), and importing such files there.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import sys
import sysconfig
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from grove.supervisor.errors import CommandError

MAX_FILES_BYTES = 8_000_000  # code, not data: past this something big came along
GROVE_ROOT = "grove"  # every package of Grove's is under it (SPEC 19)
_INSTALLED_ROOTS = tuple(
    Path(path).resolve()
    for key in ("stdlib", "platstdlib", "purelib", "platlib")
    if (path := sysconfig.get_paths().get(key))
)
_IMPORTING = threading.Lock()  # shipped files are imported one set at a time


def installed(top: str, location: str | None) -> bool:
    """Whether every process has the module `top` (a top-level name) whose file is
    `location` as this one does: Grove's own, the standard library and installed packages.
    A module from a local file is not."""
    if top == GROVE_ROOT or top in sys.builtin_module_names or location is None:
        return True
    path = Path(location).resolve()
    return any(path.is_relative_to(root) for root in _INSTALLED_ROOTS)


def module_files(specs: Iterable[str]) -> dict[str, str]:
    """The source files (path relative to the import root -> text) of the local modules that
    `package.module:attr` specs name, the whole top-level package of each; the current
    directory is searched first. Installed modules need no files; CommandError for a module
    that cannot be found."""
    files: dict[str, str] = {}
    here = str(Path.cwd())
    path = [here, *(entry for entry in sys.path if entry != here)]
    for spec in specs:
        module = spec.partition(":")[0]
        top = module.partition(".")[0]
        if not top.isidentifier():
            raise CommandError(f"tool spec {spec!r} is not 'package.module:attr'")
        found = importlib.machinery.PathFinder.find_spec(top, path)
        if found is None:
            raise CommandError(
                f"tool spec {spec!r}: cannot import {module}: No module named {top!r}"
            )
        if installed(top, found.origin):
            continue
        if found.submodule_search_locations:  # a package: all of its Python files
            root = Path(next(iter(found.submodule_search_locations)))
            sources = [p for p in sorted(root.rglob("*.py")) if "__pycache__" not in p.parts]
            base = root.parent
        else:
            assert found.origin is not None
            sources, base = [Path(found.origin)], Path(found.origin).parent
        for source in sources:
            files[source.relative_to(base).as_posix()] = source.read_text(encoding="utf-8")
    size = sum(len(text.encode()) for text in files.values())
    if size > MAX_FILES_BYTES:
        raise CommandError(
            f"the tool modules' files are {size:,} bytes, over the {MAX_FILES_BYTES:,} limit"
        )
    return files


def checked_path(name: str) -> Path:
    """A shipped file's relative path, refused when it could land outside its directory."""
    path = Path(name)
    if (
        path.is_absolute()
        or path.suffix != ".py"
        or not all(part.isidentifier() for part in (*path.parts[:-1], path.stem))
    ):
        raise CommandError(f"a shipped tool file must be a relative path to a .py file: {name!r}")
    return path


@contextmanager
def importable(files: dict[str, str]) -> Iterator[None]:
    """Within: the shipped `files` import first, fresh (another set of the same names shipped
    earlier is not reused); after: they are forgotten again, modules and all."""
    if not files:
        yield
        return
    paths = [checked_path(name) for name in files]
    tops = {path.parts[0].removesuffix(".py") for path in paths}
    with _IMPORTING, tempfile.TemporaryDirectory(prefix="grove-tools-") as directory:
        for path, text in zip(paths, files.values(), strict=True):
            target = Path(directory) / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        here = str(Path.cwd())
        if here not in sys.path:  # import_spec puts it first otherwise, before these files
            sys.path.insert(0, here)
        sys.path.insert(0, directory)
        held = {name: sys.modules.pop(name) for name in list(sys.modules) if _under(name, tops)}
        importlib.invalidate_caches()
        try:
            yield
        finally:
            sys.path.remove(directory)
            for name in [name for name in sys.modules if _under(name, tops)]:
                del sys.modules[name]
            sys.modules.update(held)


def _under(name: str, tops: set[str]) -> bool:
    return name.partition(".")[0] in tops


def import_spec(spec: str) -> list[Callable[..., Any]]:
    """The function, or list of functions, that `package.module:attr` names; the current
    directory is searched first, as `uvicorn main:app` does."""
    module_name, _, attribute = spec.partition(":")
    if (
        not module_name
        or not attribute
        or not all(part.isidentifier() for part in (*module_name.split("."), *attribute.split(".")))
    ):
        raise CommandError(f"tool spec {spec!r} is not 'package.module:attr'")
    here = str(Path.cwd())
    if here not in sys.path:
        sys.path.insert(0, here)
    try:
        value: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise CommandError(f"tool spec {spec!r}: cannot import {module_name}: {exc}") from exc
    for part in attribute.split("."):
        if not hasattr(value, part):
            raise CommandError(f"tool spec {spec!r}: {module_name} has no {attribute}")
        value = getattr(value, part)
    functions = list(value) if isinstance(value, list | tuple) else [value]
    for function in functions:
        if not callable(function):
            raise CommandError(f"tool spec {spec!r}: {function!r} is not a function")
    return functions
