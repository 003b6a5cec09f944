"""``sds evaluate ORIGINAL SYNTHETIC`` and ``sds split INPUT``: the data owner's evaluation
outside a release (NOT differentially private: both read the sensitive table)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from sds_release.flows.cli.common import JsonOpt, csv_list, echo_json

__all__ = ["evaluate", "split"]


def evaluate(
    original: Annotated[
        str, typer.Argument(help="The sensitive table (with --privacy-risk: its training rows).")
    ],
    synthetic: Annotated[str, typer.Argument(help="The synthetic table, e.g. synthetic.csv.")],
    reporting_length: Annotated[int, typer.Option(min=1, help="Longest combination.")] = 3,
    config: Annotated[
        Path | None,
        typer.Option(
            help="Release config: preprocess ORIGINAL as the release did (columns, zeros, bins)."
        ),
    ] = None,
    resolution: Annotated[int, typer.Option(min=1, help="k of the preservation metrics.")] = 10,
    as_json: JsonOpt = False,
    delimiter: Annotated[str | None, typer.Option(help="CSV delimiter (default ',').")] = None,
    privacy_risk: Annotated[
        bool,
        typer.Option(
            "--privacy-risk",
            help="Also run anonymeter's singling-out, linkability and inference attacks on "
            "SYNTHETIC (needs --control and `make anonymeter`).",
        ),
    ] = False,
    control: Annotated[
        Path | None,
        typer.Option(
            help="Rows held back before the release (`sds split`'s control file); ORIGINAL is "
            "then the training file that was released."
        ),
    ] = None,
    n_attacks: Annotated[
        int, typer.Option(min=1, help="Targets per attack (intervals narrow as 1/√n).")
    ] = 500,
    seed: Annotated[int, typer.Option(help="Seed of the attacks' random choices.")] = 0,
    secrets: Annotated[
        str | None,
        typer.Option(help="Columns the inference attack guesses (default: each in turn)."),
    ] = None,
    link_columns: Annotated[
        str | None,
        typer.Option(help="The linkability attack's first view (default: half the columns)."),
    ] = None,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            help="Also write the result as JSON to this private file (0600); never inside a "
            "release directory.",
        ),
    ] = None,
) -> None:
    """Compare SYNTHETIC with ORIGINAL: SDS aggregate metrics and marginal TVD, and with
    --privacy-risk anonymeter's attack-based risks (NOT DP: for the data owner only)."""
    from sds_core.errors import SdsInputError
    from sds_release.store.compare import compare_tables, summary_lines

    if privacy_risk != (control is not None):
        raise SdsInputError(
            "--privacy-risk and --control go together: the attacks compare the training rows "
            "(ORIGINAL) with rows held back before the release (--control FILE; `sds split "
            "INPUT --control-share 0.2` makes both before the release)"
        )
    if output is not None:
        _check_private_output(output)
    result: dict[str, Any] = compare_tables(
        original,
        synthetic,
        reporting_length=reporting_length,
        resolution=resolution,
        config=config,
        delimiter=delimiter,
    )
    if control is not None:
        from sds_release.store.compare import RiskParams
        from sds_release.store.compare import privacy_risk as run_risk

        params = RiskParams(
            n_attacks=n_attacks,
            seed=seed,
            secrets=tuple(csv_list(secrets) or ()),
            link_columns=tuple(csv_list(link_columns) or ()),
        )
        result["privacy_risk"] = run_risk(
            original, synthetic, control, params=params, config=config, delimiter=delimiter
        )
    if output is not None:
        from sds_release.store.workspace.files import atomic_write_json

        atomic_write_json(output, result, private=True)
    if as_json:
        echo_json(result)
        return
    for line in summary_lines(result):
        typer.echo(line)
    if "privacy_risk" in result:
        from sds_release.store.compare import risk_summary_lines

        for line in risk_summary_lines(result["privacy_risk"]):
            typer.echo(line)
    if output is not None:
        typer.echo(f"written (private): {output}")


def _check_private_output(output: Path) -> None:
    """Refuse an ``--output`` inside a published release directory (one holding a manifest)."""
    from sds_core.errors import SdsInputError

    for folder in output.resolve().parents:
        if (folder / "manifest.json").exists():
            raise SdsInputError(
                f"--output {output} is inside the release directory {folder}, which is "
                "published: the evaluation is computed from the sensitive data; write it "
                "outside the releases (e.g. next to the input)"
            )


def split(
    input_path: Annotated[str, typer.Argument(metavar="INPUT", help="The sensitive table.")],
    out_dir: Annotated[
        Path, typer.Option("--out-dir", help="Where training.* and control.* go (private).")
    ],
    control_share: Annotated[
        float, typer.Option(help="Chance that each row (or subject) is held back.")
    ] = 0.2,
    seed: Annotated[
        int | None, typer.Option(help="Key of the coins (default: fresh, not repeatable).")
    ] = None,
    delimiter: Annotated[str, typer.Option(help="CSV delimiter.")] = ",",
    subject_id: Annotated[
        str | None, typer.Option(help="Column naming the person: their rows stay together.")
    ] = None,
) -> None:
    """Hold back control rows before a release: INPUT -> training and control files (0600).

    Release the training file; keep the control file for `sds evaluate TRAINING SYNTHETIC
    --privacy-risk --control CONTROL`. Neither is ever published.
    """
    from sds_release.store.compare import split_input

    files = split_input(
        input_path,
        out_dir,
        control_share=control_share,
        seed=seed,
        delimiter=delimiter,
        subject_id=subject_id,
    )
    typer.echo(f"control (keep private, never release): {files.control}")
    typer.echo(f"training (release this file): {files.training}")
