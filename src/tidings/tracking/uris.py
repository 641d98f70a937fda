"""A link as a URI (RFC 3986) that an HTTP header can carry: the IRI-to-URI mapping of
RFC 3987, 3.1, used for the click redirect's ``Location`` (docs/tracking.md, The links).

A non-ASCII host is converted label by label to IDNA (UTS 46, as browsers do); every
other character a URI cannot hold (non-ASCII, controls, space, ``"<>\\^`{|}``, a ``%``
that starts no escape) is percent-encoded as UTF-8. Existing ``%XX`` escapes and the
reserved characters (``:/?#[]@!$&'()*+,;=``) stay as they are, so the link means what
it meant: an ASCII URI comes back unchanged.
"""

from __future__ import annotations

import re

import idna

_URI_CHAR = r"A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;="
# A character to percent-encode, or an escape to keep (told apart by the replacement).
_TO_ESCAPE = re.compile(rf"%[0-9A-Fa-f]{{2}}|[^{_URI_CHAR}]")
# Anything the fast path cannot return as it is: such a character, or a bare "%".
_NOT_URI = re.compile(rf"[^{_URI_CHAR}%]|%(?![0-9A-Fa-f]{{2}})")
_AUTHORITY = re.compile(r"(?P<head>(?:[A-Za-z][A-Za-z0-9+.\-]*:)?//)(?P<authority>[^/?#]*)")
_PORT = re.compile(r":[0-9]*\Z")


def as_uri(url: str) -> str:
    """``url`` as a URI; total (never raises), and an ASCII URI comes back unchanged."""
    if _NOT_URI.search(url) is None:
        return url
    found = _AUTHORITY.match(url)
    if found is None:
        return escape(url)
    rest = url[found.end() :]
    return found.group("head") + _authority(found.group("authority")) + escape(rest)


def escape(text: str) -> str:
    """``text`` with what a URI cannot hold percent-encoded (UTF-8); escapes kept."""
    return _TO_ESCAPE.sub(_escaped, text)


def _escaped(found: re.Match[str]) -> str:
    text = found.group(0)
    if len(text) == 3:  # an escape already
        return text
    # surrogatepass: a lone surrogate (which no message should hold) still has bytes.
    return "".join(f"%{byte:02X}" for byte in text.encode("utf-8", "surrogatepass"))


def _authority(authority: str) -> str:
    userinfo, at, host_port = authority.rpartition("@")
    port_at = len(host_port)
    if not host_port.startswith("["):  # an IP literal's colons are not its port's
        port = _PORT.search(host_port)
        port_at = port.start() if port else port_at
    host, port_text = host_port[:port_at], host_port[port_at:]
    return escape(userinfo) + at + _host(host) + port_text


def _host(host: str) -> str:
    if host.isascii():
        return escape(host)
    return ".".join(_label(label) for label in host.split("."))


def _label(label: str) -> str:
    if label.isascii():
        return escape(label)
    try:
        return idna.encode(label, uts46=True).decode("ascii")
    except ValueError:  # not a valid IDN label (UnicodeError is a ValueError)
        return escape(label)
