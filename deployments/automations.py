"""Install the release automations (automations.yaml) on the Prefect server of PREFECT_API_URL.

Creates or updates the notification block they send to (a webhook by default), sets the budget
alert share (the Prefect variable ``sds_budget_alert_share``) and replaces the automations of
the same names, so running it again is safe. See deployments/README.md, "Notifications".

    python deployments/automations.py --webhook-url https://hooks.example.org/sds
    python deployments/automations.py --block slack-webhook/sds-alerts --budget-share 0.25
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DEFAULT_BLOCK = "custom-webhook/sds-alerts"
PLACEHOLDER = "sds-alerts"
# the same value as sds_release.store.ledger.budget_view.ALERT_SHARE_VARIABLE
SHARE_VARIABLE = "sds_budget_alert_share"


def webhook_block(url: str) -> Any:
    """The default notification block: a JSON POST of ``{"subject", "body"}`` to ``url``."""
    from prefect.blocks.notifications import CustomWebhookNotificationBlock

    return CustomWebhookNotificationBlock(
        name="sds-alerts",
        url=url,
        method="POST",
        json_data={"subject": "{{subject}}", "body": "{{body}}"},
    )


def block_id(client: Any, block: str) -> Any:
    """The id of the block document ``TYPE/NAME`` (e.g. ``slack-webhook/sds-alerts``)."""
    from prefect.exceptions import ObjectNotFound

    slug, _, name = block.partition("/")
    if not name:
        raise SystemExit(f"--block {block!r}: give it as TYPE/NAME, e.g. {DEFAULT_BLOCK}")
    try:
        return client.read_block_document_by_name(name=name, block_type_slug=slug).id
    except ObjectNotFound:
        raise SystemExit(
            f"no notification block {block!r} on {os.environ.get('PREFECT_API_URL')}: create "
            "it first (deployments/README.md, Notifications) or pass --webhook-url URL"
        ) from None


def load_automations(path: Path, notify_block_id: Any) -> list[Any]:
    """The automations of ``path`` with their notification block placeholder filled in."""
    import yaml
    from prefect.events.schemas.automations import AutomationCore

    data = yaml.safe_load(path.read_text())
    out = []
    for spec in data["automations"]:
        for action in spec.get("actions", []):
            if action.get("block_document_id") == PLACEHOLDER:
                action["block_document_id"] = str(notify_block_id)
        out.append(AutomationCore.model_validate(spec))
    return out


def install(*, webhook_url: str | None, block: str, share: float, path: Path) -> list[str]:
    """Block, alert share and automations on the server; returns the automations' names."""
    from prefect.client.orchestration import get_client
    from prefect.variables import Variable

    if not 0.0 <= share <= 1.0:
        raise SystemExit(f"--budget-share {share} must be between 0 and 1 (e.g. 0.2 for 20%)")
    if webhook_url:
        webhook_block(webhook_url).save(block.partition("/")[2] or PLACEHOLDER, overwrite=True)
    Variable.set(SHARE_VARIABLE, share, overwrite=True)
    with get_client(sync_client=True) as client:
        automations = load_automations(path, block_id(client, block))
        for automation in automations:
            for old in client.read_automations_by_name(automation.name):
                client.delete_automation(old.id)
            client.create_automation(automation)
    return [a.name for a in automations]


def main(argv: list[str] | None = None) -> int:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--webhook-url",
        default=os.environ.get("SDS_ALERT_WEBHOOK_URL"),
        help="create/update the default webhook block with this URL ($SDS_ALERT_WEBHOOK_URL)",
    )
    parser.add_argument(
        "--block",
        default=DEFAULT_BLOCK,
        help=f"notification block TYPE/NAME the automations send to (default {DEFAULT_BLOCK})",
    )
    parser.add_argument(
        "--budget-share",
        type=float,
        default=float(os.environ.get("SDS_BUDGET_ALERT_SHARE", "0.2")),
        help="notify when less than this share of a dataset's lifetime budget is left",
    )
    parser.add_argument("--file", type=Path, default=HERE / "automations.yaml")
    args = parser.parse_args(argv)
    if not os.environ.get("PREFECT_API_URL"):
        raise SystemExit("PREFECT_API_URL is not set: point it at your Prefect server's /api")
    if args.webhook_url and args.block != DEFAULT_BLOCK and not args.block.startswith("custom-"):
        raise SystemExit("--webhook-url creates a custom-webhook block: leave out --block")
    names = install(
        webhook_url=args.webhook_url, block=args.block, share=args.budget_share, path=args.file
    )
    print(f"installed {', '.join(names)} (alert share {args.budget_share:g})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
