"""Imports only point down the flow (docs/architecture.md, Import layers).

Every module under src/tidings belongs to one layer, found by the longest matching prefix in
``LAYERS``; it may import its own package and lower layers, never a higher layer, and never
another package of its own layer. Imports are read with ``ast`` at any depth (inside
functions, ``if TYPE_CHECKING:`` blocks), so a deferred import cannot hide a cycle.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import tidings


@dataclass(frozen=True)
class Layer:
    name: str
    packages: tuple[str, ...]
    # Only the entry points may import each other: they are one program's front door
    # (__main__ runs cli, cli starts runner).
    siblings_may_import: bool = False


PROVIDER_PACKAGES = tuple(
    f"tidings.providers.{kind}"
    for kind in (
        "apns",
        "discord",
        "fcm",
        "mailgun",
        "postmark",
        "resend",
        "sendgrid",
        "ses",
        "slack",
        "smtp",
        "teams",
        "telegram",
        "sparkpost",
        "twilio",
        "twilio_whatsapp",
        "vonage",
        "webhook",
        "webpush",
        "whatsapp",
    )
)

# Top to bottom; keep in step with docs/architecture.md, Import layers.
LAYERS: tuple[Layer, ...] = (
    Layer(
        "entry points",
        (
            "tidings.__main__",
            "tidings.cli",
            "tidings.runner",
        ),
        siblings_may_import=True,
    ),
    Layer("simulator", ("tidings.simulator",)),
    Layer("api", ("tidings.api",)),
    # The composition of a dispatcher from the Service (tidings/assembly.py), above the
    # dispatcher it builds, so that nothing in dispatch/ needs the Service.
    Layer("assembly", ("tidings.assembly",)),
    # services/: what the API's routes call (the application layer), a root like the flows.
    Layer(
        "flow roots",
        (
            "tidings.intake",
            "tidings.dispatch.dispatcher",
            "tidings.background.relay",
            "tidings.services",
        ),
    ),
    Layer("service", ("tidings.service",)),
    Layer("settings", ("tidings.settings",)),
    Layer("dispatch and campaigns", ("tidings.dispatch", "tidings.campaigns")),
    # A type's steps: their shape and check (the API's too), the planner and step runner.
    Layer("workflows", ("tidings.workflows",)),
    # Work beside the sends (producer webhooks, retention, reaping, report folding); the
    # relay, which takes the whole Service, is a flow root above.
    Layer("background", ("tidings.background",)),
    # dispatch/'s rooms, each importing only the rooms below it (docs/architecture.md).
    Layer("dispatch: protection", ("tidings.dispatch.protection",)),
    Layer("transport", ("tidings.transport",)),
    Layer("content and policy", ("tidings.content", "tidings.policy")),
    # providers/: the failover chains over the account kinds, the kinds and the receivers'
    # registry, one package per provider (none imports another), then the vocabulary and
    # the helpers they share (docs/architecture.md, A provider is a package).
    Layer("providers: chains", ("tidings.providers.chains",)),
    Layer("providers: registries", ("tidings.providers.kinds", "tidings.providers.registry")),
    Layer("providers: one package each", PROVIDER_PACKAGES),
    Layer("providers", ("tidings.providers",)),
    Layer("tracking", ("tidings.tracking",)),
    Layer("store", ("tidings.store",)),
    # Shared by the intake and the send pipeline; it logs through the base.
    Layer("group commit", ("tidings.group_commit",)),
    Layer(
        "base",
        (
            "tidings.priorities",
            "tidings.states",
            "tidings.ids",
            "tidings.clock",
            "tidings.singleflight",
            "tidings.waiting",
            "tidings.refusal",
            "tidings.metrics",
            "tidings.logs",
        ),
    ),
    # The Python client producers import: below everything, so it imports nothing of
    # tidings but itself (only httpx and the standard library).
    Layer("client", ("tidings.client",)),
)
# tidings/__init__.py (the version) is base vocabulary too; matched exactly, as a prefix it
# would place every module.
ROOT = "tidings"
BASE = next(index for index, layer in enumerate(LAYERS) if layer.name == "base")

# Imports that still break the rule, each with the change that will remove it. An entry that
# no longer matches any import fails the test too: delete it then. Nothing else goes here.
PENDING_EXCEPTIONS: tuple[tuple[str, str, str], ...] = ()


@dataclass(frozen=True)
class Module:
    name: str
    source: str
    is_package: bool = False


@dataclass(frozen=True)
class Placed:
    layer: int  # index into LAYERS, 0 at the top
    package: str  # the matching prefix


def place(module: str) -> Placed | None:
    if module == ROOT:
        return Placed(BASE, ROOT)
    best: Placed | None = None
    for index, layer in enumerate(LAYERS):
        for package in layer.packages:
            matches = module == package or module.startswith(package + ".")
            if matches and (best is None or len(package) > len(best.package)):
                best = Placed(index, package)
    return best


def imported_names(module: Module, known: set[str]) -> list[tuple[str, int]]:
    """(imported tidings module, line) for every import in ``module``, at any depth."""
    found: list[tuple[str, int]] = []
    for node in ast.walk(ast.parse(module.source)):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(module, node.module, node.level)
            for alias in node.names:
                # ``from pkg import mod`` imports pkg.mod; ``from mod import name``, mod.
                candidate = f"{base}.{alias.name}"
                found.append((candidate if candidate in known else base, node.lineno))
    unique = dict.fromkeys(found)  # one report per module and line, however many names
    return [(name, line) for name, line in unique if name.split(".")[0] == ROOT]


def _absolute(module: Module, target: str | None, level: int) -> str:
    if level == 0:
        return target or ""
    parts = module.name.split(".")
    package = parts if module.is_package else parts[:-1]
    base = package[: len(package) - (level - 1)]
    return ".".join(base + ([target] if target else []))


def _describe(module: str, placed: Placed) -> str:
    return f"{module} (layer {placed.layer + 1}, {LAYERS[placed.layer].name})"


def breaks_layering(source: Placed, target: Placed) -> str | None:
    """Why an import from ``source`` to ``target`` is refused, or None if it is allowed."""
    if target.package == source.package or target.layer > source.layer:
        return None
    if target.layer < source.layer:
        return "a higher layer"
    if LAYERS[source.layer].siblings_may_import:
        return None
    return "a package of its own layer"


def _pending(
    importer: str, name: str, pending: Sequence[tuple[str, str, str]]
) -> tuple[str, str] | None:
    for allowed_importer, imported, _reason in pending:
        if importer == allowed_importer and (name == imported or name.startswith(imported + ".")):
            return (allowed_importer, imported)
    return None


def violations(
    modules: Sequence[Module],
    pending: Sequence[tuple[str, str, str]] = PENDING_EXCEPTIONS,
) -> list[str]:
    """Every import that breaks the layering, every module in no layer, and every pending
    exception that no longer happens; empty when all is well."""
    known = {module.name for module in modules}
    problems: list[str] = []
    used: set[tuple[str, str]] = set()
    for module in modules:
        source = place(module.name)
        if source is None:
            problems.append(
                f"{module.name} is in no layer: add its package to LAYERS in "
                "tests/unit/test_import_layers.py and to docs/architecture.md, Import layers"
            )
            continue
        for name, line in imported_names(module, known):
            target = place(name)
            if target is None:
                problems.append(f"{module.name}:{line} imports {name}, which is in no layer")
                continue
            why = breaks_layering(source, target)
            allowance = _pending(module.name, name, pending) if why else None
            if allowance is not None:
                used.add(allowance)
            elif why is not None:
                problems.append(
                    f"{_describe(module.name, source)}:{line} imports {_describe(name, target)}, "
                    f"{why}: imports must point down the flow (docs/architecture.md, "
                    "Import layers)"
                )
    problems += [
        f"PENDING_EXCEPTIONS: {importer} no longer imports {imported}; remove the entry"
        for importer, imported, _reason in pending
        if (importer, imported) not in used
    ]
    return problems


def project_modules() -> list[Module]:
    root = Path(tidings.__file__).parent
    modules = []
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root.parent).with_suffix("").parts
        is_package = parts[-1] == "__init__"
        name = ".".join(parts[:-1] if is_package else parts)
        modules.append(Module(name, path.read_text(encoding="utf-8"), is_package))
    return modules


def test_imports_only_point_down_the_flow() -> None:
    problems = violations(project_modules())
    assert not problems, "\n".join(problems)


def test_every_module_is_placed_and_read() -> None:
    modules = {module.name for module in project_modules()}
    # The walk sees the whole tree, not an empty or partial one.
    assert {"tidings", "tidings.store.wakeup", "tidings.dispatch.dispatcher"} <= modules
    assert "tidings.store.migrations.versions.0001_initial_schema" in modules


# The checker itself, on synthetic modules: it must be able to fail.


def _layer(name: str) -> str:
    """How a message names layer ``name``: its number counted from the top, and its name."""
    number = next(index for index, layer in enumerate(LAYERS) if layer.name == name) + 1
    return f"layer {number}, {name}"


def _check(sources: Mapping[str, str], pending: Sequence[tuple[str, str, str]] = ()) -> list[str]:
    return violations([Module(name, source) for name, source in sources.items()], pending)


def test_the_checker_names_both_modules_and_layers_of_an_import_pointing_up() -> None:
    problems = _check(
        {
            "tidings.store.claims": "def f():\n    from tidings.dispatch.lanes import direct\n",
            "tidings.dispatch.lanes.direct": "",
        }
    )
    assert problems == [
        f"tidings.store.claims ({_layer('store')}):2 imports tidings.dispatch.lanes.direct "
        f"({_layer('dispatch and campaigns')}), a higher layer: imports must point down the "
        "flow (docs/architecture.md, Import layers)"
    ]


def test_the_checker_reads_type_checking_blocks_and_relative_imports() -> None:
    hidden = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import tidings.service\n"
    assert len(_check({"tidings.store.claims": hidden})) == 1
    assert len(_check({"tidings.store.claims": "from ..settings import Settings\n"})) == 1
    assert len(_check({"tidings.store.claims": "from . import schema\n"})) == 0


def test_the_checker_refuses_imports_between_packages_of_one_layer() -> None:
    intake = {"tidings.intake.accept": "from tidings.dispatch.dispatcher import Dispatcher\n"}
    content = {"tidings.content.compose": "import tidings.policy.preferences\n"}
    for sources in (intake, content):
        (problem,) = _check(sources)
        assert "a package of its own layer" in problem


def test_the_checker_allows_its_own_package_and_lower_layers() -> None:
    sources = {
        "tidings.dispatch.dispatcher": "from tidings.dispatch.lanes.direct import DirectLane\n",
        "tidings.dispatch.lanes.direct": "from tidings.store import claims\nimport tidings.ids\n",
        "tidings.api.app": "from tidings import __version__\n",
        "tidings.cli.serve": "from tidings.runner import run\n",
    }
    assert _check(sources) == []
    # ...but not dispatch's modules reaching up to the dispatcher, a root above them.
    upwards = {
        "tidings.dispatch.lanes.direct": "from tidings.dispatch import dispatcher\n",
        "tidings.dispatch.dispatcher": "",
    }
    (problem,) = _check(upwards)
    assert f"tidings.dispatch.dispatcher ({_layer('flow roots')})" in problem


def test_the_client_imports_nothing_of_tidings_but_itself() -> None:
    assert _check({"tidings.client.calls": "from tidings.client.errors import error_from\n"}) == []
    for source in ("from tidings import __version__\n", "from tidings.refusal import Refusal\n"):
        (problem,) = _check({"tidings.client.calls": source})
        assert f"tidings.client.calls ({_layer('client')})" in problem


def test_the_checker_refuses_modules_in_no_layer() -> None:
    (problem,) = _check({"tidings.newthing.core": ""})
    assert problem.startswith("tidings.newthing.core is in no layer")


def test_pending_exceptions_allow_only_what_they_name_and_must_stay_in_use() -> None:
    pending = [("tidings.content.preview", "tidings.service", "moves into api/")]
    allowed = {"tidings.content.preview": "from tidings.service import Service\n"}
    assert _check(allowed, pending) == []
    other = {"tidings.content.preview": "from tidings.settings import Settings\n"}
    problems = _check(other, pending)
    assert len(problems) == 2  # the import, and the exception now unused
    assert problems[1].startswith("PENDING_EXCEPTIONS: tidings.content.preview no longer")


def test_every_provider_package_is_placed_among_the_provider_packages() -> None:
    """A new provider's folder joins PROVIDER_PACKAGES, so that no kind imports another."""
    providers = Path(tidings.__file__).parent / "providers"
    folders = {path.parent.name for path in providers.glob("*/__init__.py")}
    assert {f"tidings.providers.{name}" for name in folders} == set(PROVIDER_PACKAGES)


# The application layer (docs/architecture.md, Application layer): routes call services/,
# and nothing under api/ reads or writes the store itself. No exceptions.
API = "tidings.api"
STORE = "tidings.store"


def _within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def imports_between(
    modules: Sequence[Module], importer: str, imported: str, rule: str
) -> list[str]:
    """Every import of ``imported`` by a module of ``importer``, at any depth."""
    known = {module.name for module in modules}
    return [
        f"{module.name}:{line} imports {name}: {rule}"
        for module in modules
        if _within(module.name, importer)
        for name, line in imported_names(module, known)
        if _within(name, imported)
    ]


def api_imports_of_the_store(modules: Sequence[Module]) -> list[str]:
    """Every import of ``store`` by a module of ``api/``, at any depth."""
    rule = "the API calls services/, never the store (docs/architecture.md, Application layer)"
    return imports_between(modules, API, STORE, rule)


def test_no_module_of_the_api_imports_the_store() -> None:
    problems = api_imports_of_the_store(project_modules())
    assert not problems, "\n".join(problems)


def test_the_checker_refuses_the_api_importing_the_store_and_allows_services() -> None:
    deferred = "def f():\n    from tidings.store import users\n"
    modules = [
        Module("tidings.api.routes.registry", deferred),
        Module("tidings.api.auth", "import tidings.store.engine\n"),
        Module("tidings.services.registry", "from tidings.store import users\n"),
        Module("tidings.store.users", ""),
    ]
    assert api_imports_of_the_store(modules) == [
        "tidings.api.routes.registry:2 imports tidings.store.users: the API calls services/, "
        "never the store (docs/architecture.md, Application layer)",
        "tidings.api.auth:1 imports tidings.store.engine: the API calls services/, never the "
        "store (docs/architecture.md, Application layer)",
    ]


# dispatch/ takes its parts, never the whole Service: tidings/assembly.py builds a dispatcher
# (docs/architecture.md, Import layers). The dispatcher is a flow root, above service.py, so
# the layers alone would allow it; this rule does not.
DISPATCH = "tidings.dispatch"
SERVICE = "tidings.service"


def dispatch_imports_of_the_service(modules: Sequence[Module]) -> list[str]:
    rule = (
        "dispatch/ takes its parts, never the Service; tidings/assembly.py builds the "
        "dispatcher (docs/architecture.md, Import layers)"
    )
    return imports_between(modules, DISPATCH, SERVICE, rule)


def test_nothing_in_dispatch_imports_the_service() -> None:
    problems = dispatch_imports_of_the_service(project_modules())
    assert not problems, "\n".join(problems)


def test_the_checker_refuses_dispatch_importing_the_service_and_allows_the_assembly() -> None:
    modules = [
        Module("tidings.dispatch.dispatcher", "from tidings.service import Service\n"),
        Module("tidings.dispatch.lanes.kafka", "def f():\n    import tidings.service\n"),
        Module("tidings.assembly", "from tidings.service import Service\n"),
        Module("tidings.service", ""),
    ]
    assert [problem.split(":")[:2] for problem in dispatch_imports_of_the_service(modules)] == [
        ["tidings.dispatch.dispatcher", "1 imports tidings.service"],
        ["tidings.dispatch.lanes.kafka", "2 imports tidings.service"],
    ]
