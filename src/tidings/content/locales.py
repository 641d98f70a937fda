"""Which locales to try for a template, most specific first."""

from __future__ import annotations

import functools

LAST_RESORT = "en"


def normalise(locale: str) -> str:
    """``pt_br`` and ``PT-br`` are ``pt-BR``: language lower case, region upper case."""
    parts = locale.replace("_", "-").split("-")
    head, rest = parts[0].lower(), parts[1:]
    return "-".join([head, *(p.upper() if len(p) == 2 else p for p in rest)])


@functools.lru_cache(maxsize=4096)
def fallback_chain(requested: str | None, type_default: str | None) -> tuple[str, ...]:
    """exact (``pt-BR``) -> language (``pt``) -> the type's default locale -> ``en``."""
    chain: list[str] = []
    if requested:
        exact = normalise(requested)
        chain += [exact, exact.split("-")[0]]
    if type_default:
        chain.append(normalise(type_default))
    chain.append(LAST_RESORT)
    return tuple(dict.fromkeys(chain))
