"""Opens and clicks in an email's HTML part: every http(s) link rewritten to its click link,
and a 1x1 open pixel at the end of the body (docs/tracking.md).

Left alone: ``mailto:``, ``tel:`` and any other scheme; links to tidings' own unsubscribe
and tracking routes; links marked ``data-tidings-notrack``.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from urllib.parse import urlsplit

# An <a ...> start tag; quoted attribute values may hold ">".
_A_TAG = re.compile(r"""<a\b(?:[^>"']|"[^"]*"|'[^']*')*>""", re.IGNORECASE)
_HREF = re.compile(
    r"""(?P<lead>\shref\s*=\s*)(?:"(?P<dq>[^"]*)"|'(?P<sq>[^']*)'|(?P<bare>[^\s"'=<>`]+))""",
    re.IGNORECASE,
)
_NOTRACK = re.compile(r"""\sdata-tidings-notrack(?=[\s=>/])""", re.IGNORECASE)
_BODY_END = re.compile(r"</body\s*>", re.IGNORECASE)
# A message with more links than this keeps the rest as they are (bounded work per send).
MAX_TRACKED_LINKS = 1000
MAX_URL_LENGTH = 2048


def tracked_links(
    html_text: str, click_url: Callable[[str], str], skip: Callable[[str], bool]
) -> str:
    """``html_text`` with each trackable link's href replaced by ``click_url(href)``."""
    budget = [MAX_TRACKED_LINKS]

    def rewrite(tag: re.Match[str]) -> str:
        text = tag.group(0)
        href = _HREF.search(text)
        if href is None or _NOTRACK.search(text) or budget[0] <= 0:
            return text
        raw = href.group("dq") if href.group("dq") is not None else href.group("sq")
        url = html.unescape(raw if raw is not None else href.group("bare")).strip()
        if not _trackable(url) or skip(url):
            return text
        budget[0] -= 1
        replaced = f'{href.group("lead")}"{html.escape(click_url(url), quote=True)}"'
        return text[: href.start()] + replaced + text[href.end() :]

    return _A_TAG.sub(rewrite, html_text)


def _trackable(url: str) -> bool:
    if len(url) > MAX_URL_LENGTH or any(c in url for c in "\r\n\t"):
        return False
    try:
        parts = urlsplit(url)
    except ValueError:
        return False
    return parts.scheme.lower() in ("http", "https") and bool(parts.netloc)


def with_open_pixel(html_text: str, pixel_url: str) -> str:
    """The pixel before the last ``</body>``, or at the end."""
    pixel = (
        f'<img src="{html.escape(pixel_url, quote=True)}" width="1" height="1" alt="" '
        'style="display:block;border:0;width:1px;height:1px">'
    )
    ends = list(_BODY_END.finditer(html_text))
    if not ends:
        return html_text + pixel
    at = ends[-1].start()
    return html_text[:at] + pixel + html_text[at:]
