"""The ``copy-to-bucket`` task: a complete, signed release copied to ``publish_to``.

Runs after the publish stage, outside the release's stages: it charges nothing and a failure
leaves the local release complete, with the command that copies it again (``sds publish``).
"""

from __future__ import annotations

from pathlib import Path

from prefect import task

from sds_core.errors import SdsInputError
from sds_release.store.run.release_run import ReleaseRun
from sds_release.store.storage.bucket import upload_release
from sds_release.tasks.options import task_logger


@task(name="copy-to-bucket", persist_result=False, retries=1, retry_delay_seconds=2)
def copy_to_bucket(run: ReleaseRun, release_dir: str) -> str:
    """Copy the release directory to ``publish_to``; returns the release's URL there.

    Raises:
        SdsInputError: the copy failed; the message says the local release is complete and
            how to copy it again.
    """
    target = str(run.params.publish_to)
    try:
        url = upload_release(Path(release_dir), target, run.release_id)
    except SdsInputError as e:
        raise SdsInputError(
            f"release {run.release_id} is complete in {release_dir}, but copying it to "
            f"{target} failed: {e}. Nothing under {target} is presented as complete; copy it "
            f"again with `sds publish {run.release_id} --to {target}` (and --home of this "
            "release)"
        ) from None
    task_logger().info("copied the signed release to %s", url)
    return url
