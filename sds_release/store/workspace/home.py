"""The SDS home: its layout, release ids, and the paths of one release.

``$SDS_HOME/releases/<dataset>/<release-id>/`` holds what may be published (manifest.json and the
artifacts it lists with their sha256); ``$SDS_HOME/private/<release-id>/`` holds what never is.
The home itself is private to its owner (0700): other local accounts read nothing in it.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from sds_core.errors import SdsInputError

HOME_ENV = "SDS_HOME"
DEFAULT_HOME = ".sds"
MANIFEST = "manifest.json"
SIGNATURE = "manifest.sig"
"""Ed25519 signature of ``manifest.json`` (sds_release.store.audit.signing); not listed in the
manifest."""
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
(``sds_release.store.workspace.encoding.synthetic_part_name``)."""
STATUSES = ("running", "complete", "failed")
HOME_MODE = 0o700
"""A new home's mode: its owner only (releases are published by copying them out of it)."""
PRIVATE_UMASK = 0o077
"""The file-creation mask of the processes that write in a home (a release, the home's Prefect
server, its supervisor and warm runner): what they create is 0600, their folders 0700."""
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def utc_now() -> str:
    """Current UTC time, ISO 8601 with milliseconds (stage timings need sub-second resolution)."""
    return datetime.now(UTC).isoformat(timespec="milliseconds")


# -- home and ids ----------------------------------------------------------------------------------
def resolve_home(home: str | Path | None = None) -> Path:
    """The SDS home: ``home`` (--home), else $SDS_HOME, else ./.sds; created, checked, resolved.

    A symlinked home is followed: the directory it points to is the home, and it must pass the
    same checks. The home must be writable, owned by the current user and not writable by
    everyone: it holds the private workspace (release keys, checkpoints). A new home is made
    :data:`HOME_MODE` (0700).

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
            path.mkdir(parents=True, mode=HOME_MODE)
            os.chmod(path, HOME_MODE)  # mkdir's mode passes through the umask
        path = path.resolve(strict=True)
        had_acl = drop_default_acl(path)
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
    if had_acl:
        _drop_inherited_acls(path)
        make_home_folders_private(path)
    return path


DEFAULT_ACL_XATTR = "system.posix_acl_default"


def drop_default_acl(folder: Path) -> bool:
    """Remove ``folder``'s default POSIX ACL (Linux), if it has one; whether it did.

    A default ACL (``setfacl -d``, often on shared project folders, and inherited by a home made
    inside one) decides the modes of what is created under the folder instead of the umask: the
    release files the home holds came out 0664 and their folders 0775 whatever the umask. A
    home's files are its owner's only (0600, folders 0700), so its default ACL goes (and, by
    :func:`resolve_home`, what the home's folders made before inherited). File systems without
    ACLs have nothing to remove.
    """
    remove = getattr(os, "removexattr", None)
    if remove is None:
        return False
    try:  # asked first: some file systems (tmpfs) remove an absent ACL without an error
        os.getxattr(folder, DEFAULT_ACL_XATTR)
        remove(folder, DEFAULT_ACL_XATTR)
    except OSError:  # none there (ENODATA), or no ACLs on this file system (ENOTSUP)
        return False
    return True


HOME_FOLDERS = ("releases", "private", "prefect")
"""The folders a home's releases, private workspace and Prefect server write in."""
LEDGER_FILE = "ledger.sqlite"
"""The home's local ledger (``sds_release.store.ledger``), when no ``--ledger`` URL is given."""


def _home_folders(home: Path) -> list[Path]:
    """The :data:`HOME_FOLDERS` the home has (not symbolic links: they are not followed)."""
    return [home / t for t in HOME_FOLDERS if (home / t).is_dir() and not (home / t).is_symlink()]


def _drop_inherited_acls(home: Path) -> None:
    """A home that had a default ACL (made inside a shared folder by a version that kept it):
    its folders inherited the ACL, so a release written in one of them would again come out
    0664 in folders 0775. Each folder of :data:`HOME_FOLDERS` loses it. Nothing else under the
    home is touched (a home may be a folder that holds other files)."""
    for root in _home_folders(home):
        for folder, _, _ in os.walk(root):
            drop_default_acl(Path(folder))


def make_home_folders_private(home: Path) -> list[Path]:
    """Everything in the home's own folders (:data:`HOME_FOLDERS`: releases, private
    workspace, Prefect server) and its ledger made its owner's only (:func:`make_private`), as a
    home made by an earlier version may hold them open to others; the paths whose mode changed.
    The user's other files in the home's folder are left as they are."""
    changed = [p for root in _home_folders(home) for p in make_private(root, tree=True)]
    for ledger in sorted(home.glob(f"{LEDGER_FILE}*")):  # the local ledger and its journal
        changed += make_private(ledger)
    return changed


def make_private(path: Path, *, tree: bool = False) -> list[Path]:
    """Take group's and other users' access away from ``path`` and, with ``tree``, from every
    file and folder under it (0755 becomes 0700, 0644 becomes 0600; the owner's bits stay);
    symbolic links are left alone. Returns the paths whose mode changed.
    """
    paths = [Path(path)]
    if tree:
        for folder, dirs, files in os.walk(path):  # symlinked folders are not followed
            paths += [Path(folder, name) for name in (*dirs, *files)]
    changed = []
    for p in paths:
        try:
            st = os.lstat(p)
            if stat.S_ISLNK(st.st_mode) or not st.st_mode & 0o077:
                continue
            os.chmod(p, stat.S_IMODE(st.st_mode) & ~0o077)
        except FileNotFoundError:  # removed meanwhile (a server's temporary file)
            continue
        changed.append(p)
    return changed


@contextlib.contextmanager
def private_umask() -> Iterator[None]:
    """Within: files this process creates are 0600 and its folders 0700
    (:data:`PRIVATE_UMASK`, added to the umask it had, restored at the end)."""
    before = os.umask(PRIVATE_UMASK)
    os.umask(before | PRIVATE_UMASK)
    try:
        yield
    finally:
        os.umask(before)


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


def find_release(home: str | Path, release_id: str) -> Path | None:
    """The directory ``releases/<dataset>/<release_id>`` of the home (any dataset), or None.

    The id is validated first, so it can never be a glob pattern or a path.
    """
    validate_id(release_id)
    found = sorted(p for p in (Path(home) / "releases").glob(f"*/{release_id}") if p.is_dir())
    return found[0] if found else None
