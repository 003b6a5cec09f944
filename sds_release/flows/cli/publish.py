"""``sds publish``: copy a complete, signed release to a bucket (again, after a failed copy)."""

from __future__ import annotations

from typing import Annotated

import typer

from sds_release.flows.cli.common import HomeOpt, fail, home_dir, published_release


def publish_command(
    release_id: str,
    to: Annotated[
        str,
        typer.Option(
            "--to",
            help="s3://BUCKET/PREFIX/: the release goes to PREFIX/<release-id>/, the manifest "
            "last (endpoint and keys from AWS_* variables or a profile).",
        ),
    ],
    home: HomeOpt = None,
) -> None:
    """Copy a complete release to a bucket; prints its URL there."""
    from sds_release.store.storage.bucket import upload_release
    from sds_release.store.storage.urls import ObjectUrl
    from sds_release.store.workspace.integrity import verify_release

    ObjectUrl.parse(to)  # a malformed URL is refused before anything is read
    root = home_dir(home)
    found = published_release(root, release_id)
    problems = verify_release(found)
    if problems:
        raise fail(
            f"release {release_id} is not complete and intact, so it is not copied: "
            f"{'; '.join(problems)}",
            1,
        )
    typer.echo(upload_release(found, to, release_id))
