"""``tidings webhook-secret``: the secret a webhook receiver verifies with."""

from __future__ import annotations

from typing import Annotated

import typer

from tidings.cli.common import ConfigOption, fail, load_settings


def webhook_secret(
    url: Annotated[str, typer.Argument(help="The receiver's URL, as notifications name it.")],
    account: Annotated[
        str, typer.Option(metavar="NAME", help="The webhook account that signs for it.")
    ],
    config: ConfigOption = None,
) -> None:
    """Print the secret a webhook receiver verifies with: its own, derived from the
    account's secret and its URL."""
    from tidings.providers.base import ProviderError
    from tidings.providers.webhook.adapter import WebhookAccount, endpoint_secret

    found = load_settings(config).accounts.get(account)
    if found is None:
        fail(f"no account named {account!r} in the configuration")
        return
    if not isinstance(found, WebhookAccount):
        fail(f"{account!r} is not a webhook account (its kind is {found.kind})")
        return
    try:
        secret = endpoint_secret(found.secret.get_secret_value(), url)
    except ProviderError as error:
        fail(str(error))
        return
    if url.lower().startswith("http:") and not found.allow_insecure:
        # Still printed: the operator may be about to set allow_insecure.
        typer.echo(f"note: {account!r} refuses http:// targets (allow_insecure = false)", err=True)
    print(secret)
