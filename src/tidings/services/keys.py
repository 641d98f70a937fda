"""The API keys as the API's key check reads them: every key (for the cache), or one by its
hash (a key made by another process since the last read). Issuing and revoking are the
CLI's (``tidings keys``)."""

from __future__ import annotations

from tidings.store.api_keys import StoredKey, all_keys, by_hash
from tidings.store.engine import Database

__all__ = ["Database", "StoredKey", "all_keys", "by_hash"]
