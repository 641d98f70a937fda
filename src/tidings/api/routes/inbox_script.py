"""GET /inbox.js: the inbox's web component (docs/inbox.md, The web component), served by
tidings so that a page of any origin includes it with one script tag and no build step."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, Response

from tidings.api.auth import PUBLIC

router = APIRouter(tags=["inbox"], dependencies=PUBLIC)
SCRIPT = (Path(__file__).parents[1] / "static" / "inbox.js").read_bytes()


@router.get("/inbox.js", include_in_schema=False)
async def inbox_script() -> Response:
    """The script is public: it holds no secret; the token it is given does."""
    return Response(
        SCRIPT,
        media_type="text/javascript; charset=utf-8",
        headers={"Cache-Control": "public, max-age=300", "X-Content-Type-Options": "nosniff"},
    )
