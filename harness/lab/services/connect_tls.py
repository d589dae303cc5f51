"""Kafka Connect's REST API closed to other local users: HTTPS with client certificates.

Every local user can reach a loopback port, and Connect's REST API has no password of
its own (its basic-auth extension is not among the lab's jars). So the worker listens
on HTTPS and requires a client certificate signed by the stack's own CA; the CA's key,
the keystores and the client's key live in `<connect data>/tls/` (mode 700), readable
by the stack's user alone. A stranger's connection ends in the TLS handshake.

The files are made once per stack folder: openssl (on this machine) for the keys and
certificates, keytool (next to the runtime's java) for the truststore, since a PKCS12
file of openssl 3.0 holds no certificate a JVM trusts.
"""

from __future__ import annotations

import os
import shutil
import ssl
import subprocess
from dataclasses import dataclass
from pathlib import Path

from driftlab.harness.lab.services.base import ServiceError
from driftlab.harness.lab.services.ports import LOOPBACK
from driftlab.harness.lab.services.runtime import Runtime

DAYS = "3650"


class _InFolder:
    """A file of the TLS folder, read as an attribute: the folder joined to its name."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, tls: ConnectTls, owner: type | None = None) -> Path:
        return tls.folder / self.name


@dataclass(frozen=True)
class ConnectTls:
    """The files of a stack's Connect TLS, in `folder`, and their password."""

    folder: Path
    password: str

    ca = _InFolder("ca.pem")
    keystore = _InFolder("server.p12")
    truststore = _InFolder("trust.p12")
    client_cert = _InFolder("client.pem")
    client_key = _InFolder("client.key")

    def worker_properties(self) -> dict[str, object]:
        """The worker's HTTPS listener settings (prefixed for the `https` listener)."""
        prefix = "listeners.https."
        return {
            f"{prefix}ssl.keystore.type": "PKCS12",
            f"{prefix}ssl.keystore.location": self.keystore,
            f"{prefix}ssl.keystore.password": self.password,
            f"{prefix}ssl.key.password": self.password,
            f"{prefix}ssl.truststore.type": "PKCS12",
            f"{prefix}ssl.truststore.location": self.truststore,
            f"{prefix}ssl.truststore.password": self.password,
            f"{prefix}ssl.client.auth": "required",
        }

    def client_context(self) -> ssl.SSLContext:
        """What the harness's REST client presents and trusts."""
        context = ssl.create_default_context(cafile=str(self.ca))
        context.load_cert_chain(str(self.client_cert), str(self.client_key))
        return context

    def ensure(self, runtime: Runtime, log_path: Path) -> None:
        """Make the CA, the server's keystore, the truststore and the client's key and
        certificate, unless they exist."""
        if self.truststore.exists() and self.client_key.exists():
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        os.chmod(self.folder, 0o700)
        f = self.folder
        _openssl(
            log_path,
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            DAYS,
            "-subj",
            "/CN=driftlab stack CA",
            "-keyout",
            f / "ca.key",
            "-out",
            self.ca,
        )
        for who, extra in (("server", f"subjectAltName=IP:{LOOPBACK}"), ("client", None)):
            _openssl(
                log_path,
                "req",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-subj",
                f"/CN=driftlab connect {who}",
                "-keyout",
                f / f"{who}.key",
                "-out",
                f / f"{who}.csr",
            )
            ext = f / f"{who}.ext"
            ext.write_text(f"{extra}\n" if extra else "basicConstraints=CA:FALSE\n")
            _openssl(log_path, "x509", "-req", "-in", f / f"{who}.csr", "-CA", self.ca,
                     "-CAkey", f / "ca.key", "-CAcreateserial", "-days", DAYS,
                     "-extfile", ext, "-out", f / f"{who}.pem")  # fmt: skip
        _openssl(log_path, "pkcs12", "-export", "-in", f / "server.pem", "-inkey",
                 f / "server.key", "-name", "connect", "-passout", f"pass:{self.password}",
                 "-out", self.keystore)  # fmt: skip
        keytool = str(Path(runtime.java()).parent / "keytool")
        status = runtime.run(
            [keytool, "-importcert", "-noprompt", "-alias", "ca", "-file", str(self.ca),
             "-keystore", str(self.truststore), "-storetype", "PKCS12",
             "-storepass", self.password],
            log_path,
            timeout=120,
        )  # fmt: skip
        if status != 0:
            raise ServiceError(
                f"connect: keytool could not write {self.truststore}; see {log_path}"
            )
        for path in f.iterdir():
            os.chmod(path, 0o600)


def _openssl(log_path: Path, *args: object) -> None:
    openssl = shutil.which("openssl")
    if openssl is None:
        raise ServiceError("connect: openssl not found (its REST API needs TLS keys); "
                           "install it with `apt-get install openssl`")  # fmt: skip
    with open(log_path, "ab") as log:
        done = subprocess.run(
            [openssl, *map(str, args)], stdout=log, stderr=subprocess.STDOUT, check=False,
            stdin=subprocess.DEVNULL, timeout=120,
        )  # fmt: skip
    if done.returncode != 0:
        raise ServiceError(f"connect: openssl {args[0]} failed; see {log_path}")
