"""SMS length in segments: GSM-7 when every character has a GSM 03.38 code, else UCS-2.

One segment holds 160 GSM-7 septets or 70 UCS-2 code units; a message of several segments
loses room to the concatenation header: 153 septets or 67 code units each.
"""

from __future__ import annotations

from dataclasses import dataclass

_GSM_BASIC = set(
    "@£$¥èéùìòÇ\nØø\rÅåΔ_ΦΓΛΩΠΨΣΘΞÆæßÉ !\"#¤%&'()*+,-./0123456789:;<=>?"
    "¡ABCDEFGHIJKLMNOPQRSTUVWXYZÄÖÑÜ§¿abcdefghijklmnopqrstuvwxyzäöñüà"
)
# The extension table: each costs an escape septet plus its own.
_GSM_EXTENDED = set("^{}\\[~]|€\f")


@dataclass(frozen=True)
class Segments:
    encoding: str  # "GSM-7" or "UCS-2"
    units: int  # septets (GSM-7) or UTF-16 code units (UCS-2)
    count: int


def segments(text: str) -> Segments:
    if all(c in _GSM_BASIC or c in _GSM_EXTENDED for c in text):
        units = sum(2 if c in _GSM_EXTENDED else 1 for c in text)
        return Segments("GSM-7", units, _count(units, single=160, multi=153))
    units = len(text.encode("utf-16-le")) // 2
    return Segments("UCS-2", units, _count(units, single=70, multi=67))


def _count(units: int, *, single: int, multi: int) -> int:
    if units <= single:
        return 1 if units else 0
    return -(-units // multi)
