"""``chatscribe api users|keys``: the Chat API's users and API keys, for administrators.

Commands::

    chatscribe api users add EMAIL [--group G]... [--attribute NAME=VALUE]...
    chatscribe api users list [--kind external|internal] [--json]
    chatscribe api users remove EMAIL | --external ID
    chatscribe api users purge              remove expired ephemeral users now
    chatscribe api keys add KEY | revoke KEY | count

They act on the state database the Chat API uses (``CHATSCRIBE_API_DATABASE_URL``, account
``CHATSCRIBE_ACCOUNT_NAME``; :mod:`chat_api.settings`). Internal users must exist before a chat
request names them with ``sessionSettings.internalId`` (interface, "Session settings": "The user
must already exist"); their groups and attributes apply to every request they make.
"""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from chat_api import ChatApiError, ChatApiSettings
from chat_api.state import (
    StateDatabase,
    UserDirectory,
    add_key,
    count_keys,
    open_state,
    revoke_key,
)

users_app = typer.Typer(no_args_is_help=True, help="Chat API users (internal and external).")
keys_app = typer.Typer(no_args_is_help=True, help="Chat API keys (stored hashed).")
out = Console()
err = Console(stderr=True)


def _state(settings: ChatApiSettings) -> StateDatabase:
    return open_state(settings.api_database_url, account=settings.account_name)


def _directory() -> UserDirectory:
    settings = ChatApiSettings()
    return UserDirectory(
        _state(settings),
        declared_attributes=settings.user_attributes,
        declared_groups=settings.user_groups,
        max_external_users=settings.max_external_users,
        default_ttl_s=settings.ephemeral_ttl_s,
    )


def _pairs(values: list[str]) -> dict[str, str]:
    found: dict[str, str] = {}
    for value in values:
        name, sep, text = value.partition("=")
        if not sep or not name.strip():
            raise typer.BadParameter(f"{value!r}: expected NAME=VALUE", param_hint="--attribute")
        found[name.strip()] = text
    return found


@users_app.command("add")
def users_add(
    email: Annotated[str, typer.Argument(help="The internalId (an email address).")],
    group: Annotated[list[str] | None, typer.Option("--group", "-g", help="A group.")] = None,
    attribute: Annotated[
        list[str] | None, typer.Option("--attribute", "-a", help="NAME=VALUE (declared name).")
    ] = None,
) -> None:
    """Create or replace an internal user."""
    try:
        user = _directory().add_internal(
            email, groups=group or [], attributes=_pairs(attribute or [])
        )
    except (ChatApiError, ValueError) as exc:
        err.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from exc
    out.print(f"internal user {email} saved (groups: {', '.join(user.context.groups) or '-'})")


@users_app.command("list")
def users_list(
    kind: Annotated[str | None, typer.Option(help="external or internal.")] = None,
    json_output: Annotated[bool, typer.Option("--json", help="One JSON object per line.")] = False,
) -> None:
    """List the account's users."""
    rows = _directory().list_users(kind)
    if json_output:
        for row in rows:
            out.print_json(json.dumps(row), indent=None)
        return
    table = Table("kind", "user", "groups", "attributes", "ephemeral", "expires_at_s")
    for row in rows:
        table.add_row(
            row["kind"],
            row["user_id"],
            ",".join(row["groups"]),
            json.dumps(row["attributes"]),
            str(row["is_ephemeral"]).lower(),
            "" if row["expires_at_s"] is None else f"{row['expires_at_s']:.0f}",
        )
    out.print(table)


@users_app.command("remove")
def users_remove(
    user_id: Annotated[str, typer.Argument(help="Email of an internal user, or an externalId.")],
    external: Annotated[bool, typer.Option(help="USER_ID is an externalId.")] = False,
) -> None:
    """Remove a user and its threads."""
    kind = "external" if external else "internal"
    if not _directory().remove(kind, user_id):
        err.print(f"[red]error:[/red] no {kind} user {user_id!r}")
        raise typer.Exit(1)
    out.print(f"{kind} user {user_id} removed")


@users_app.command("purge")
def users_purge() -> None:
    """Remove expired ephemeral users (and their threads) now."""
    out.print(f"{_directory().purge_expired()} expired users removed")


@keys_app.command("add")
def keys_add(key: Annotated[str, typer.Argument(help="The API key to accept.")]) -> None:
    """Accept an API key for the account."""
    added = add_key(_state(ChatApiSettings()), key)
    out.print("key added" if added else "key already present")


@keys_app.command("revoke")
def keys_revoke(key: Annotated[str, typer.Argument(help="The API key to refuse.")]) -> None:
    """Refuse an API key from now on (also one that is still configured)."""
    if not revoke_key(_state(ChatApiSettings()), key):
        err.print("[red]error:[/red] no such key")
        raise typer.Exit(1)
    out.print("key revoked")


@keys_app.command("count")
def keys_count() -> None:
    """Print how many keys the account has."""
    out.print(str(count_keys(_state(ChatApiSettings()))))
