"""The release workspace: $SDS_HOME layout, release ids, atomic writes and the release manifest.

``$SDS_HOME/releases/<dataset>/<release-id>/`` holds what may be published (manifest.json and the
artifacts it lists with their sha256); ``$SDS_HOME/private/<release-id>/`` holds what never is. Used
by the flow's tasks and the CLI; auditing lives in :mod:`release_store.audit`. No Prefect import.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import platform
import re
import secrets
import shutil
import stat
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from sds_core.errors import SdsInputError

HOME_ENV = "SDS_HOME"
DEFAULT_HOME = ".sds"
MANIFEST = "manifest.json"
SIGNATURE = "manifest.sig"
"""Ed25519 signature of ``manifest.json`` (release_store.signing); not listed in the manifest."""
PUBLIC_KEY = "signing-key.pub"
"""The public key that checks ``manifest.sig`` (PEM); not listed in the manifest."""
PUBLISHED = (
    "aggregates.parquet",
    "aggregates.tsv",
    "synthetic.parquet",
    "synthetic.csv",
    "evaluation.json",
    "report.html",
    "explorer.html",
)
SYNTHETIC_PART = re.compile(r"synthetic\.parquet/part-\d{5}\.parquet")
"""The only artifact names with a directory: the parts of a split ``synthetic.parquet``
(``release_store.artifact_encoding.synthetic_part_name``)."""
STATUSES = ("running", "complete", "failed")
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def utc_now() -> str:
    """Current UTC time, ISO 8601 with milliseconds (stage timings need sub-second resolution)."""
    return datetime.now(UTC).isoformat(timespec="milliseconds")


# -- home and ids ----------------------------------------------------------------------------------
def resolve_home(home: str | Path | None = None) -> Path:
    """The SDS home: ``home`` (--home), else $SDS_HOME, else ./.sds; created, checked, resolved.

    A symlinked home is followed: the directory it points to is the home, and it must pass the
    same checks. The home must be writable, owned by the current user and not writable by
    everyone: it holds the private workspace (release keys, checkpoints).

    Raises:
        SdsInputError: the directory cannot be created or written, belongs to another user or
            is world-writable, naming it and the fix.
    """
    source = "--home" if home else (HOME_ENV if os.environ.get(HOME_ENV) else "default home")
    given = str(home or os.environ.get(HOME_ENV) or DEFAULT_HOME)
    if "\0" in given:
        raise SdsInputError(f"{source} contains a NUL byte; give a plain directory path")
    path = Path(given).expanduser().absolute()
    try:
        if not path.exists():
            path.mkdir(parents=True, mode=0o755)
        path = path.resolve(strict=True)
        probe = path / f".write-probe-{os.getpid()}-{secrets.token_hex(4)}"
        probe.write_bytes(b"")
        probe.unlink()
        st = path.stat()
    except (OSError, RuntimeError) as e:  # RuntimeError: a symlink loop
        reason = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        raise SdsInputError(
            f"{source} {path} is not a writable directory ({reason}); pass a directory "
            f"you can write to with --home DIR or set {HOME_ENV}"
        ) from e
    if st.st_uid != os.geteuid():
        raise SdsInputError(
            f"{source} {path} belongs to another user (uid {st.st_uid}); its private "
            "workspace (release keys, checkpoints) must not be shared: use a home of your "
            "own, and share budgets through one PostgreSQL ledger (--ledger)"
        )
    if st.st_mode & stat.S_IWOTH:
        raise SdsInputError(
            f"{source} {path} is writable by every user (mode {stat.S_IMODE(st.st_mode):o}); "
            f"anyone could replace its private files: run `chmod o-w {path}` or choose "
            "another --home"
        )
    return path


def validate_id(value: object, what: str = "release id") -> str:
    """Check a dataset or release id: 1-128 of [A-Za-z0-9._-], starting alphanumeric.

    >>> validate_id("2026-11-22T031455Z-a1b2c3")
    '2026-11-22T031455Z-a1b2c3'
    """
    if not isinstance(value, str) or not _ID.fullmatch(value):
        raise SdsInputError(
            f"{what} {value!r} is not valid: use 1-128 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit (no spaces or path separators)"
        )
    return value


def new_release_id(dataset: str | None = None, *, now: datetime | None = None) -> str:
    """A fresh release id such as ``2026-11-22T031455Z-3fa9c1`` (UTC time + 6 random hex).

    Release ids are unique across datasets (the private workspace is keyed by id alone), so the
    dataset is only validated, not embedded.
    """
    if dataset is not None:
        validate_id(dataset, "dataset id")
    stamp = (now or datetime.now(UTC)).astimezone(UTC).strftime("%Y-%m-%dT%H%M%SZ")
    return f"{stamp}-{secrets.token_hex(3)}"


@dataclass(frozen=True, slots=True)
class ReleasePaths:
    """Every path of one release, per the release contract."""

    home: Path
    dataset: str
    release_id: str

    @property
    def release_dir(self) -> Path:
        """Publishable directory ``releases/<dataset>/<release-id>``."""
        return self.home / "releases" / self.dataset / self.release_id

    @property
    def private_dir(self) -> Path:
        """Never-published directory ``private/<release-id>``."""
        return self.home / "private" / self.release_id

    @property
    def ledger(self) -> Path:
        """The home's ledger file."""
        return self.home / "ledger.sqlite"

    @property
    def manifest(self) -> Path:
        """``manifest.json`` of the release."""
        return self.release_dir / MANIFEST

    def artifact(self, name: str) -> Path:
        """A published file by contract name (``aggregates.parquet``, ``report.html``...)."""
        if Path(name).name != name or name in ("", ".", ".."):
            raise SdsInputError(f"artifact name {name!r} must be a plain file name")
        return self.release_dir / name

    def private(self, name: str) -> Path:
        """A file in the private workspace (seed, validation details, checkpoints)."""
        return self.private_dir / name

    def create(self, *, exist_ok: bool = False) -> None:
        """Create both directories (``private/`` and the private one mode 0700).

        Raises:
            SdsInputError: the release id already exists and ``exist_ok`` is False.
        """
        if not exist_ok:
            for d in (self.release_dir, self.private_dir):
                if d.exists():
                    raise SdsInputError(
                        f"release id {self.release_id!r} already exists ({d}); choose another "
                        f"release id, or continue it with `sds resume {self.release_id}`"
                    )
        self.release_dir.mkdir(parents=True, exist_ok=True)
        self.private_dir.mkdir(parents=True, exist_ok=True)
        os.chmod(self.private_dir.parent, 0o700)  # $SDS_HOME/private lists every release id
        os.chmod(self.private_dir, 0o700)


def release_paths(home: str | Path, dataset: str, release_id: str) -> ReleasePaths:
    """Validated :class:`ReleasePaths` of a release (ids checked; nothing created)."""
    return ReleasePaths(Path(home), validate_id(dataset, "dataset id"), validate_id(release_id))


# -- atomic writes ---------------------------------------------------------------------------------
def _atomic(path: str | Path, write: Callable[[io.BufferedWriter], object], private: bool) -> Path:
    """Write through a temp file in the same directory, fsync, rename, fsync the directory."""
    path = Path(path)
    if private:  # a private file's new directories (checkpoints/) are 0700 like private/<id>
        missing = [d for d in (path.parent, *path.parent.parents) if not d.exists()]
        path.parent.mkdir(parents=True, exist_ok=True)
        for d in missing:
            os.chmod(d, 0o700)
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600 if private else 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    return path


def atomic_write_bytes(path: str | Path, data: bytes, *, private: bool = False) -> Path:
    """Atomically write ``data`` (readers see the old file or the whole new one, never a part)."""
    return _atomic(path, lambda f: f.write(data), private)


def atomic_write_stream(
    path: str | Path, write: Callable[[io.BufferedWriter], object], *, private: bool = False
) -> Path:
    """Atomically write a file produced piece by piece by ``write(file)`` (a large artifact
    never held whole in memory)."""
    return _atomic(path, write, private)


def atomic_write_text(path: str | Path, text: str, *, private: bool = False) -> Path:
    """Atomically write UTF-8 text."""
    return atomic_write_bytes(path, text.encode("utf-8"), private=private)


def atomic_write_json(path: str | Path, obj: Any, *, private: bool = False) -> Path:
    """Atomically write JSON (sorted keys, indent 2, trailing newline)."""
    return atomic_write_text(
        path, json.dumps(obj, indent=2, sort_keys=True) + "\n", private=private
    )


def atomic_write_parquet(path: str | Path, table: Any, *, private: bool = False) -> Path:
    """Atomically write a ``pyarrow.Table`` or pandas DataFrame (index dropped) as Parquet."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if not isinstance(table, pa.Table):
        table = pa.Table.from_pandas(table, preserve_index=False)
    return _atomic(path, lambda f: pq.write_table(table, f), private)


def sha256_file(path: str | Path) -> str:
    """Hex sha256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def collect_versions() -> dict[str, str]:
    """Versions for the manifest (from package metadata: nothing heavy is imported)."""
    out = {"python": platform.python_version()}
    for key, dist in (
        ("project", "sds-release"),
        ("numpy", "numpy"),
        ("pandas", "pandas"),
        ("pyarrow", "pyarrow"),
        ("prefect", "prefect"),
        ("great_expectations", "great-expectations"),
    ):
        try:
            out[key] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[key] = "not installed"
    return out


# -- manifest --------------------------------------------------------------------------------------
class Manifest:
    """``manifest.json`` of a release as a JSON dict, with helpers for stages and artifacts.

    Lifecycle: :meth:`new` (status ``running``) and :meth:`save` before any artifact is written;
    :meth:`stage_started` / :meth:`stage_finished` per stage; :meth:`record_artifact` per
    published file; ``status = "complete"`` and a final save only at publish.
    """

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data

    @classmethod
    def new(
        cls,
        *,
        release_id: str,
        dataset: str,
        parameters: Mapping[str, Any],
        privacy: Mapping[str, Any] | None = None,
    ) -> Manifest:
        """A fresh ``running`` manifest with versions filled in."""
        return cls(
            {
                "release_id": validate_id(release_id),
                "dataset": validate_id(dataset, "dataset id"),
                "created_at": utc_now(),
                "status": "running",
                "parameters": dict(parameters),
                "privacy": dict(privacy or {}),
                "input": {},
                "stages": [],
                "artifacts": {},
                "versions": collect_versions(),
            }
        )

    @classmethod
    def load(cls, path: str | Path) -> Manifest:
        """Read a manifest (a file path or a release directory).

        Raises:
            SdsInputError: missing or not a JSON object with release_id/dataset/status.
        """
        path = Path(path)
        path = path / MANIFEST if path.is_dir() else path
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise SdsInputError(f"cannot read release manifest {path}: {e}") from e
        if not isinstance(data, dict) or not {"release_id", "dataset", "status"} <= data.keys():
            raise SdsInputError(f"{path} is not a release manifest (release_id, dataset, status)")
        return cls(data)

    def save(self, path: str | Path) -> Path:
        """Atomically write (``path`` is the manifest file or the release directory)."""
        path = Path(path)
        return atomic_write_json(path / MANIFEST if path.is_dir() else path, self.data)

    @property
    def status(self) -> str:
        """running | complete | failed."""
        return str(self.data["status"])

    @status.setter
    def status(self, value: str) -> None:
        if value not in STATUSES:
            raise SdsInputError(f"manifest status must be one of {STATUSES}, got {value!r}")
        self.data["status"] = value

    def stage(self, name: str) -> dict[str, Any] | None:
        """The stage record named ``name``, or None."""
        return next((s for s in self.data["stages"] if s.get("name") == name), None)

    def stage_started(self, name: str) -> dict[str, Any]:
        """Mark a stage running (idempotent for a resumed stage: keeps the first start time)."""
        rec = self.stage(name)
        if rec is None:
            rec = {
                "name": name,
                "status": "running",
                "started": utc_now(),
                "finished": None,
                "artifacts": [],
            }
            self.data["stages"].append(rec)
        rec["status"] = "running"
        return rec

    def stage_finished(self, name: str, artifacts: Iterable[str] = ()) -> dict[str, Any]:
        """Mark a stage complete and list the artifact names it produced."""
        rec = self.stage(name) or self.stage_started(name)
        rec.update(
            status="complete",
            finished=utc_now(),
            artifacts=sorted({*rec.get("artifacts", []), *artifacts}),
        )
        return rec

    def record_artifact(self, name: str, path: str | Path) -> str:
        """Record a published file's sha256 under its name; returns the hash."""
        digest = sha256_file(path)
        self.data["artifacts"][name] = digest
        return digest


def discard_incomplete(release_dir: str | Path, *, reason: str | None = None) -> list[str]:
    """Make a failed release impossible to mistake for a complete one.

    Deletes every file of ``release_dir`` except the manifest, then saves the manifest with
    status ``failed``, no artifacts and ``reason`` (which must not quote input values). A
    directory without a readable manifest is removed entirely. Returns the names removed.
    """
    release_dir = Path(release_dir)
    if not release_dir.is_dir():
        return []
    removed = sorted(
        str(p.relative_to(release_dir))
        for p in release_dir.rglob("*")
        if p.is_file() and p.name != MANIFEST
    )
    try:
        manifest = Manifest.load(release_dir / MANIFEST)
    except SdsInputError:
        shutil.rmtree(release_dir)
        return removed
    for name in removed:
        (release_dir / name).unlink(missing_ok=True)
    for d in sorted((p for p in release_dir.rglob("*") if p.is_dir()), reverse=True):
        d.rmdir()
    manifest.status = "failed"
    manifest.data.update(artifacts={}, failed_at=utc_now())
    if reason is not None:
        manifest.data["failure"] = reason
    manifest.save(release_dir)
    return removed


def verify_release(release_dir: str | Path) -> list[str]:
    """Problems of a published release directory (empty list = intact and complete).

    Checks: manifest readable, status ``complete``, ids match the directory, every listed
    artifact present with its sha256, and no file that the manifest does not list.
    """
    release_dir = Path(release_dir)
    try:
        manifest = Manifest.load(release_dir / MANIFEST)
    except SdsInputError as e:
        return [str(e)]
    problems = []
    if manifest.status != "complete":
        problems.append(f"status is {manifest.status!r}, not 'complete'")
    if manifest.data["release_id"] != release_dir.name:
        problems.append(
            f"manifest release_id {manifest.data['release_id']!r} does not match "
            f"the directory {release_dir.name!r}"
        )
    if manifest.data["dataset"] != release_dir.parent.name:
        problems.append(
            f"manifest dataset {manifest.data['dataset']!r} does not match the "
            f"directory {release_dir.parent.name!r}"
        )
    problems += artifact_problems(release_dir, manifest.data.get("artifacts") or {})
    return problems + synthetic_part_problems(release_dir, manifest.data)


def synthetic_part_problems(release_dir: str | Path, manifest: Mapping[str, Any]) -> list[str]:
    """A split ``synthetic.parquet`` against the manifest's ``synthetic_parts``: every part
    listed in ``artifacts`` (whose sha256 :func:`artifact_problems` checks), with the rows the
    manifest gives (Parquet footer), summing to the records; none when it is one file."""
    layout = manifest.get("synthetic_parts")
    if not layout:
        return []
    import pyarrow.parquet as pq

    release_dir = Path(release_dir)
    listed = manifest.get("artifacts") or {}
    problems, total = [], 0
    parts = layout.get("parts") or []
    names = {str(p.get("file")) for p in parts}
    for name in sorted(n for n in listed if SYNTHETIC_PART.fullmatch(n) and n not in names):
        problems.append(f"{name}: an artifact but not in synthetic_parts")
    for part in parts:
        name, rows = str(part.get("file")), int(part.get("rows", -1))
        total += max(rows, 0)
        if name not in listed:
            problems.append(f"{name}: in synthetic_parts but not listed in artifacts")
            continue
        path = release_dir / name
        if not SYNTHETIC_PART.fullmatch(name) or not path.is_file():
            continue  # artifact_problems names it
        try:
            found = pq.read_metadata(path).num_rows
        except Exception as e:  # a damaged footer: the sha256 check fails too
            problems.append(f"{name}: not a readable Parquet file ({type(e).__name__})")
            continue
        if found != rows:
            problems.append(f"{name}: {found} rows, the manifest says {rows}")
    if total != layout.get("rows"):
        problems.append(
            f"synthetic_parts: the parts hold {total} rows, the manifest says {layout.get('rows')}"
        )
    return problems


def artifact_problems(release_dir: str | Path, listed: Mapping[str, str]) -> list[str]:
    """Problems of the files of ``release_dir`` against a manifest's ``artifacts`` (name: sha256).

    Every listed file must be present with its sha256, and every other file must be the
    manifest itself or its signature (``manifest.sig``, ``signing-key.pub``).
    """
    release_dir = Path(release_dir)
    problems = []
    for name, digest in sorted(listed.items()):
        path = release_dir / name
        if Path(name).name != name and not SYNTHETIC_PART.fullmatch(name):
            problems.append(f"artifact name {name!r} is not a plain file name")
        elif not path.is_file():
            problems.append(f"{name}: listed in the manifest but missing")
        elif sha256_file(path) != digest:
            problems.append(f"{name}: sha256 does not match the manifest (file modified)")
    for path in sorted(p for p in release_dir.rglob("*") if p.is_file()):
        name = str(path.relative_to(release_dir))
        if name not in (MANIFEST, SIGNATURE, PUBLIC_KEY) and name not in listed:
            problems.append(f"{name}: file not listed in the manifest")
    return problems


_SVG_GEOMETRY = re.compile(
    r'\s(?:x|y|x1|x2|y1|y2|cx|cy|r|rx|ry|width|height|viewBox|transform|points|d)="[^"]*"'
)
"""SVG attributes that hold pixel geometry (left out of :func:`forbidden_content_check`)."""


def forbidden_content_check(release_dir: str | Path, *, secrets: Iterable[str]) -> list[str]:
    """Which published files contain a value that must never appear (true count, key hex...).

    Each file is searched as raw bytes and, for Parquet, also as its decoded rows and schema,
    for each secret as a whole token (case-insensitive; ``123`` does not match ``41234``).
    Problems name the file and the secret's position in ``secrets``, never the secret itself.
    In HTML the SVG geometry attributes (``x``, ``width``, ``viewBox``, path data...) are left
    out: they are chart layout in pixels, not data (every number a chart shows is also in its
    ``<title>`` or text, which are searched).
    """
    import pyarrow.parquet as pq

    patterns = [
        (i, re.compile(rf"(?<![0-9A-Za-z]){re.escape(s)}(?![0-9A-Za-z])", re.I))
        for i, s in enumerate(str(s) for s in secrets)
        if s
    ]
    problems = []
    for path in sorted(p for p in Path(release_dir).rglob("*") if p.is_file()):
        texts = [path.read_bytes().decode("latin-1")]
        if path.suffix == ".html":
            texts = [_SVG_GEOMETRY.sub("", texts[0])]
        if path.suffix == ".parquet":
            table = pq.read_table(path)
            texts += [str(table.schema), table.to_pandas().to_csv(index=False)]
        for i, pattern in patterns:
            if any(pattern.search(t) for t in texts):
                problems.append(f"{path.name}: contains forbidden value #{i}")
    return problems
