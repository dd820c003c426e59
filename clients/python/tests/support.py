"""What the tests share: a real ``leasekeeper serve`` in a subprocess, test
certificates and auth files, and the check of answers against
docs/openapi.json."""

import hashlib
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import time
from typing import Any, Dict, List, Mapping, Optional

PYTHON_DIR = pathlib.Path(__file__).resolve().parents[1]
REPO = PYTHON_DIR.parents[1]

# The tests import the package from this folder, not from an installed copy.
if str(PYTHON_DIR) not in sys.path:
    sys.path.insert(0, str(PYTHON_DIR))


def in_ci() -> bool:
    """Whether the tests run in CI, which never skips: .ci/run installs what
    they need."""
    return bool(os.environ.get("CI"))


def build_server(out: pathlib.Path) -> str:
    """Builds ``leasekeeper`` from this repository into out, unless
    ``LEASEKEEPER_BIN`` names one already built."""
    prebuilt = os.environ.get("LEASEKEEPER_BIN")
    if prebuilt:
        return prebuilt
    go = shutil.which("go")
    if go is None:
        raise RuntimeError("the tests need go to build leasekeeper (or LEASEKEEPER_BIN)")
    subprocess.run([go, "build", "-o", str(out), "./cmd/leasekeeper"], cwd=str(REPO), check=True)
    return str(out)


class Server:
    """One ``leasekeeper serve`` on loopback, on a SQLite file of its own,
    that a test may stop, pause, kill and start again on the same address
    and database."""

    def __init__(self, binary: str, workdir: pathlib.Path, args: Optional[List[str]] = None, tls: bool = False) -> None:
        self.binary = binary
        self.dir = workdir
        self.args = list(args or [])
        self.tls = tls
        self.db = workdir / "leasekeeper.db"
        self.ready = workdir / "ready"
        self.log = workdir / "serve.log"
        self.addr = "127.0.0.1:0"
        self.proc: Optional["subprocess.Popen[bytes]"] = None

    @property
    def url(self) -> str:
        """The server's URL."""
        return ("https://" if self.tls else "http://") + self.addr

    def start(self) -> None:
        """Starts the server, on its last address if it had one, and waits
        until it listens."""
        if self.ready.exists():
            self.ready.unlink()
        argv = [self.binary, "serve", "--db", str(self.db), "--listen", self.addr, "--ready-file", str(self.ready)]
        with open(str(self.log), "ab") as log:
            self.proc = subprocess.Popen(argv + self.args, stdout=log, stderr=log)
        deadline = time.monotonic() + 30
        while True:
            if self.ready.exists():
                text = self.ready.read_text()
                if text.endswith("\n"):
                    self.addr = text.strip()
                    return
            if self.proc.poll() is not None:
                raise RuntimeError("leasekeeper serve exited %d: %s" % (self.proc.returncode, self.log.read_text()))
            if time.monotonic() > deadline:
                raise RuntimeError("leasekeeper serve did not start: %s" % self.log.read_text())
            time.sleep(0.02)

    def stop(self, sig: int = signal.SIGTERM) -> None:
        """Stops the server (SIGTERM: gracefully) and waits for it."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.send_signal(sig)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def kill(self) -> None:
        """Kills the server (SIGKILL), as a crash would."""
        self.stop(signal.SIGKILL)

    def pause(self) -> None:
        """Stops the server's process (SIGSTOP): it keeps its connections
        but answers nothing."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        """Resumes a paused server."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGCONT)


def hash_token(token: str) -> str:
    """An auth file's token_sha256."""
    return hashlib.sha256(token.encode()).hexdigest()


def write_auth_file(path: pathlib.Path, principals: List[Dict[str, Any]]) -> str:
    """Writes an auth file of principals, each given with its "token" in
    place of its hash."""
    out = []
    for p in principals:
        p = dict(p)
        p["token_sha256"] = hash_token(p.pop("token"))
        out.append(p)
    path.write_text(json.dumps({"principals": out}))
    return str(path)


def write_test_pki(d: pathlib.Path) -> Dict[str, str]:
    """A throwaway certificate authority and a server certificate for
    127.0.0.1 and localhost, made with the openssl command: the files ca,
    cert and key."""
    openssl = shutil.which("openssl")
    if openssl is None:
        raise RuntimeError("the TLS tests need the openssl command (apt-get install openssl)")
    ca, ca_key = d / "ca.pem", d / "ca-key.pem"
    cert, key, csr, ext = d / "server.pem", d / "server-key.pem", d / "server.csr", d / "server.ext"
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]

    exe: str = openssl

    def run(*args: str) -> None:
        subprocess.run([exe] + list(args), check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    # Key usages as Python 3.13's strict verification wants them.
    run("req", "-x509", *ec, "-keyout", str(ca_key), "-out", str(ca), "-days", "1", "-subj", "/CN=leasekeeper test CA",
        "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    run("req", *ec, "-keyout", str(key), "-out", str(csr), "-subj", "/CN=leasekeeper test server")
    ext.write_text(
        "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
        "keyUsage=critical,digitalSignature\n"
        "extendedKeyUsage=serverAuth\n"
        "basicConstraints=critical,CA:FALSE\n"
        "subjectKeyIdentifier=hash\n"
        "authorityKeyIdentifier=keyid\n"
    )
    run("x509", "-req", "-in", str(csr), "-CA", str(ca), "-CAkey", str(ca_key), "-CAcreateserial",
        "-out", str(cert), "-days", "1", "-extfile", str(ext))
    return {"ca": str(ca), "cert": str(cert), "key": str(key)}


class OpenAPI:
    """Checks the server's answers against docs/openapi.json with Debian's
    python3-jsonschema: the status must be one the operation lists, the
    body must match that status's schema (result objects allow no field the
    document does not have), and the headers it requires must be there."""

    def __init__(self) -> None:
        import jsonschema

        self.doc = json.loads((REPO / "docs" / "openapi.json").read_text())
        self._resolver = jsonschema.RefResolver.from_schema(self.doc)
        self._jsonschema = jsonschema
        self.checked: Dict[str, int] = {}

    def _deref(self, obj: Mapping[str, Any]) -> Mapping[str, Any]:
        while "$ref" in obj:
            node: Any = self.doc
            for part in obj["$ref"].lstrip("#/").split("/"):
                node = node[part]
            obj = node
        return obj

    def schema(self, name: str) -> Dict[str, Any]:
        """The schema of components/schemas/name, as a reference."""
        return {"$ref": "#/components/schemas/" + name}

    def validate(self, schema: Mapping[str, Any], value: Any) -> List[str]:
        """The ways value does not match schema; none when it does."""
        v = self._jsonschema.Draft202012Validator(schema, resolver=self._resolver)
        return ["%s at %s" % (e.message, "/".join(str(p) for p in e.absolute_path)) for e in v.iter_errors(value)]

    def check(self, method: str, target: str, status: int, headers: Mapping[str, str], body: bytes) -> List[str]:
        """The problems of one answer; none when the document allows it."""
        path = target.split("?", 1)[0]
        op = self.doc["paths"].get(path, {}).get(method.lower())
        if op is None:
            return ["%s %s: not in the document" % (method, path)]
        resp = op["responses"].get(str(status))
        if resp is None:
            return ["%s %s: status %d not documented" % (method, path, status)]
        resp = self._deref(resp)
        problems = []
        for name, h in resp.get("headers", {}).items():
            got = {k.lower(): v for k, v in headers.items()}.get(name.lower())
            if got is None:
                if h.get("required"):
                    problems.append("%s %s %d: no %s header" % (method, path, status, name))
                continue
            value: Any = got
            if self._deref(h.get("schema", {})).get("type") == "integer":
                try:
                    value = int(got)
                except ValueError:
                    pass
            problems += ["%s %s %d: header %s: %s" % (method, path, status, name, p) for p in self.validate(h.get("schema", {}), value)]
        content = resp.get("content", {}).get("application/json")
        if content is None:
            return problems + ["%s %s %d: not a JSON answer in the document" % (method, path, status)]
        try:
            value = json.loads(body.decode("utf-8"))
        except ValueError as e:
            return problems + ["%s %s %d: not JSON: %s" % (method, path, status, e)]
        problems += ["%s %s %d: %s" % (method, path, status, p) for p in self.validate(content["schema"], value)]
        key = "%s %s %d" % (method, path, status)
        self.checked[key] = self.checked.get(key, 0) + 1
        return problems
