"""A stand-in for the Hugging Face hub on 127.0.0.1, for offline download tests.

It serves model repos from local folders well enough for `huggingface_hub`'s
`snapshot_download` (checked against huggingface_hub 2.4.0):

* ``GET /api/models/<repo>[/revision/<rev>]``: model info with ``sha`` (the
  commit the revision points to) and ``siblings``.
* ``GET /api/models/<repo>/tree/<rev>[/<path>]?recursive=..``: the file
  listing (``type``, ``path``, ``size``, ``oid`` and ``lfs`` for LFS files).
  huggingface_hub 2.x lists files with this, not with ``siblings``.
* ``HEAD``/``GET /<repo>/resolve/<rev>/<path>``: small (git) files are
  answered directly with ``ETag`` (git blob sha1), ``X-Repo-Commit`` and
  ``Content-Length``; LFS files (``*.onnx``, ``*.npy``, ...) get a 302 to a
  second server standing in for the CDN, with ``X-Linked-Etag`` (sha256) and
  ``X-Linked-Size``, as the real hub does. No ``X-Xet-*`` header or
  ``xet-auth`` link is ever sent, so the client stays on plain HTTP.
* ``Range: bytes=N-`` is honoured (206 + ``Content-Range``): huggingface_hub
  resumes a cut transfer that way.
* Errors carry the hub's ``X-Error-Code`` (RepoNotFound, RevisionNotFound,
  EntryNotFound) so the client raises its usual exceptions.

Every request is logged (`requests`, `downloads()`), and `cut()` makes the
server drop the connection after N bytes of a file, to simulate a network cut.
"""

from __future__ import annotations

import hashlib
import json
import socket
import threading
from collections import Counter
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, quote, unquote, urlsplit

# What the hub's default .gitattributes sends to LFS (the subset that matters here).
LFS_SUFFIXES = (".onnx", ".npy", ".bin", ".safetensors", ".pt", ".pth", ".ckpt", ".h5")
CHUNK = 16 * 1024


@dataclass(frozen=True)
class RepoEntry:
    path: str
    data: bytes
    blob_id: str  # git blob sha1 of what git stores (the pointer file for LFS)
    sha256: str | None  # set for LFS files

    @property
    def etag(self) -> str:
        return self.sha256 or self.blob_id


@dataclass
class Request:
    """One request as the fake hub saw it."""

    server: str  # "hub" or "cdn"
    method: str
    path: str  # URL path, percent-decoded
    query: dict[str, list[str]]
    range: str | None
    file: str | None = None  # repo file the request is about, if any
    status: int | None = None
    body_bytes: int = 0
    cut: bool = False


@dataclass
class _Cut:
    after_bytes: int
    times: int | None  # None: every time
    done: int = 0


@dataclass
class _Revision:
    commit: str
    files: dict[str, RepoEntry] = field(default_factory=dict)


def _git_blob_sha1(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _lfs_pointer(sha256: str, size: int) -> bytes:
    return f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha256}\nsize {size}\n".encode()


def _parse_range(header: str | None, size: int) -> int | None:
    """Start offset of a ``bytes=N-`` range (the only form huggingface_hub sends)."""
    if not header or not header.startswith("bytes="):
        return None
    first = header[len("bytes=") :].split(",")[0].strip()
    start, _, _end = first.partition("-")
    if not start.isdigit():
        return None
    return min(int(start), size)


class FakeHub:
    """Serve repos from folders on 127.0.0.1; use as a context manager or start()/stop()."""

    def __init__(self) -> None:
        self._repos: dict[str, dict[str, _Revision]] = {}  # repo id -> revision name or commit -> revision
        self._blobs: dict[str, RepoEntry] = {}  # sha256 -> entry, for the CDN
        self._cuts: dict[str, _Cut] = {}
        self._lock = threading.Lock()
        self.requests: list[Request] = []
        self._hub: _Server | None = None
        self._cdn: _Server | None = None

    # -- repo content ------------------------------------------------------

    def add_revision(self, repo_id: str, folder: Path, names: tuple[str, ...] = ("main",)) -> str:
        """Publish `folder` as a commit of `repo_id` reachable as each of `names`; returns the commit sha."""
        files: dict[str, RepoEntry] = {}
        for file in sorted(p for p in Path(folder).rglob("*") if p.is_file()):
            rel = file.relative_to(folder).as_posix()
            data = file.read_bytes()
            if rel.endswith(LFS_SUFFIXES):
                sha256 = hashlib.sha256(data).hexdigest()
                entry = RepoEntry(rel, data, _git_blob_sha1(_lfs_pointer(sha256, len(data))), sha256)
                self._blobs[sha256] = entry
            else:
                entry = RepoEntry(rel, data, _git_blob_sha1(data), None)
            files[rel] = entry
        listing = "".join(f"{e.path} {e.blob_id}\n" for e in files.values())
        commit = hashlib.sha1(f"{repo_id}\n{listing}".encode()).hexdigest()
        revision = _Revision(commit, files)
        revisions = self._repos.setdefault(repo_id, {})
        revisions[commit] = revision
        for name in names:
            revisions[name] = revision
        return commit

    # -- fault injection and accounting -------------------------------------

    def cut(self, file: str, after_bytes: int, times: int | None = 1) -> None:
        """Drop the connection once `after_bytes` of `file` have been sent (`times` times; None: always).

        A resumed request (Range) that starts at or after the cut point gets
        its headers and then a dropped connection, without any data.
        """
        with self._lock:
            self._cuts[file] = _Cut(after_bytes, times)

    def clear_cuts(self) -> None:
        with self._lock:
            self._cuts.clear()

    def clear_log(self) -> None:
        with self._lock:
            self.requests.clear()

    def downloads(self) -> Counter[str]:
        """How many GETs of each repo file's content were answered (cut ones included)."""
        with self._lock:
            return Counter(
                r.file
                for r in self.requests
                if r.method == "GET" and r.status in (200, 206) and r.body_bytes and r.file
            )

    def file_requests(self) -> list[Request]:
        """Requests for file content or file metadata (resolve and CDN), not API calls."""
        with self._lock:
            return [r for r in self.requests if r.file is not None]

    def _take_cut(self, file: str) -> int | None:
        with self._lock:
            cut = self._cuts.get(file)
            if cut is None or (cut.times is not None and cut.done >= cut.times):
                return None
            cut.done += 1
            return cut.after_bytes

    def _log(self, request: Request) -> None:
        with self._lock:
            self.requests.append(request)

    def commit(self, repo_id: str, revision: str = "main") -> str:
        """The commit sha a revision name points to."""
        return self._repos[repo_id][revision].commit

    # -- server lifecycle --------------------------------------------------

    @property
    def url(self) -> str:
        """The value for HF_ENDPOINT."""
        assert self._hub is not None, "not started"
        return self._hub.base_url

    @property
    def addresses(self) -> list[tuple[str, int]]:
        """(host, port) of the hub and the CDN servers."""
        return [s.httpd.server_address[:2] for s in (self._hub, self._cdn) if s is not None]

    def start(self) -> FakeHub:
        try:
            self._cdn = _Server(self, "cdn")
            self._hub = _Server(self, "hub")
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        for server in (self._hub, self._cdn):
            if server is not None:
                server.stop()

    @property
    def running(self) -> bool:
        return any(s is not None and s.running for s in (self._hub, self._cdn))

    def __enter__(self) -> FakeHub:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- request handling (called by the handler threads) ----------------

    def _cdn_url(self, entry: RepoEntry) -> str:
        assert self._cdn is not None
        return f"{self._cdn.base_url}/lfs/{entry.sha256}?file={quote(entry.path, safe='')}"


class _Server:
    """One ThreadingHTTPServer in its own thread; stop() closes every connection and joins."""

    def __init__(self, hub: FakeHub, role: str) -> None:
        handler = type(f"{role.title()}Handler", (_Handler,), {"hub": hub, "role": role})
        self.httpd = _HTTPServer(("127.0.0.1", 0), handler)
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, name=f"fake-hub-{role}", daemon=True
        )
        self.thread.start()
        self.running = True

    def stop(self) -> None:
        if not self.running:
            return
        self.httpd.shutdown()
        self.httpd.close_connections()
        self.httpd.server_close()  # joins the handler threads
        self.thread.join(5)
        self.running = False


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = False
    block_on_close = True  # server_close() joins the handler threads

    def __init__(self, *args, **kwargs) -> None:
        self.connections: set[socket.socket] = set()
        self.connections_lock = threading.Lock()
        super().__init__(*args, **kwargs)

    def process_request(self, request, client_address) -> None:
        with self.connections_lock:
            self.connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request) -> None:
        with self.connections_lock:
            self.connections.discard(request)
        super().shutdown_request(request)

    def close_connections(self) -> None:
        """Unblock handler threads waiting on idle keep-alive connections."""
        with self.connections_lock:
            for conn in self.connections:
                try:
                    conn.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 30
    hub: FakeHub
    role: str

    def log_message(self, format: str, *args) -> None:  # quiet
        pass

    def setup(self) -> None:
        threading.current_thread().name = f"fake-hub-{self.role}-connection"
        super().setup()

    def do_HEAD(self) -> None:
        self._dispatch()

    def do_GET(self) -> None:
        self._dispatch()

    def _dispatch(self) -> None:
        split = urlsplit(self.path)
        self.req = Request(
            server=self.role,
            method=self.command,
            path=unquote(split.path),
            query=parse_qs(split.query),
            range=self.headers.get("Range"),
        )
        self.hub._log(self.req)
        try:
            if self.role == "cdn":
                self._cdn(split.path)
            else:
                self._hub(split.path)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    # -- hub -----------------------------------------------------------

    def _hub(self, raw_path: str) -> None:
        parts = raw_path.strip("/").split("/")
        if parts == ["api", "agent-harnesses"]:
            # huggingface_hub's user-agent telemetry fetches this once a day; an empty registry.
            return self._json({"standardEnvVars": [], "harnesses": {}})
        if parts[:2] == ["api", "models"] and len(parts) >= 4:
            repo_id = f"{unquote(parts[2])}/{unquote(parts[3])}"
            rest = parts[4:]
            if not rest:
                return self._model_info(repo_id, "main")
            if rest[0] == "revision" and len(rest) == 2:
                return self._model_info(repo_id, unquote(rest[1]))
            if rest[0] == "tree" and len(rest) >= 2:
                return self._tree(repo_id, unquote(rest[1]), unquote("/".join(rest[2:])))
        elif len(parts) >= 5 and parts[2] == "resolve":
            repo_id = f"{unquote(parts[0])}/{unquote(parts[1])}"
            return self._resolve(repo_id, unquote(parts[3]), unquote("/".join(parts[4:])))
        self._error(404, None, "Not found")

    def _revision(self, repo_id: str, rev: str) -> _Revision | None:
        revisions = self.hub._repos.get(repo_id)
        if revisions is None:
            # The hub answers 401 for unknown (or private) repos to anonymous users.
            self._error(401, "RepoNotFound", "Repository not found")
            return None
        revision = revisions.get(rev)
        if revision is None:
            self._error(404, "RevisionNotFound", "Invalid rev id: " + rev)
        return revision

    def _model_info(self, repo_id: str, rev: str) -> None:
        revision = self._revision(repo_id, rev)
        if revision is None:
            return
        info = {
            "_id": hashlib.md5(repo_id.encode()).hexdigest()[:24],
            "id": repo_id,
            "modelId": repo_id,
            "author": repo_id.split("/")[0],
            "sha": revision.commit,
            "lastModified": "2025-01-01T00:00:00.000Z",
            "createdAt": "2025-01-01T00:00:00.000Z",
            "private": False,
            "gated": False,
            "disabled": False,
            "downloads": 0,
            "likes": 0,
            "tags": [],
            "library_name": "onnx",
            "siblings": [{"rfilename": path} for path in revision.files],
        }
        self._json(info)

    def _tree(self, repo_id: str, rev: str, folder: str) -> None:
        revision = self._revision(repo_id, rev)
        if revision is None:
            return
        recursive = self.req.query.get("recursive", ["false"])[0].lower() in ("1", "true")
        prefix = f"{folder.strip('/')}/" if folder.strip("/") else ""
        entries: dict[str, dict] = {}
        for entry in revision.files.values():
            if not entry.path.startswith(prefix):
                continue
            rel = entry.path[len(prefix) :].split("/")
            # Folders on the way (all of them when recursive, else only the first level).
            for depth in range(1, len(rel) if recursive else min(len(rel), 2)):
                folder_path = prefix + "/".join(rel[:depth])
                entries.setdefault(
                    folder_path,
                    {
                        "type": "directory",
                        "oid": hashlib.sha1(folder_path.encode()).hexdigest(),
                        "size": 0,
                        "path": folder_path,
                    },
                )
            if recursive or len(rel) == 1:
                item = {"type": "file", "oid": entry.blob_id, "size": len(entry.data), "path": entry.path}
                if entry.sha256:
                    item["lfs"] = {"oid": entry.sha256, "size": len(entry.data), "pointerSize": 130}
                entries[entry.path] = item
        if prefix and not entries:
            return self._error(404, "EntryNotFound", f"{folder} does not exist", revision)
        self._json(sorted(entries.values(), key=lambda e: e["path"]))

    def _resolve(self, repo_id: str, rev: str, path: str) -> None:
        self.req.file = path
        revision = self._revision(repo_id, rev)
        if revision is None:
            return
        entry = revision.files.get(path)
        if entry is None:
            return self._error(404, "EntryNotFound", "Entry not found", revision)
        common = {"X-Repo-Commit": revision.commit, "Accept-Ranges": "bytes"}
        if entry.sha256 is not None:
            # LFS: metadata on the redirect itself, bytes from the "CDN" (another origin).
            self._send(
                302,
                {
                    **common,
                    "Location": self.hub._cdn_url(entry),
                    "ETag": f'"{entry.blob_id}"',
                    "X-Linked-Etag": f'"{entry.sha256}"',
                    "X-Linked-Size": str(len(entry.data)),
                    "Content-Type": "text/plain; charset=utf-8",
                },
                b"Found. Redirecting to CDN" if self.command == "GET" else b"",
            )
            return
        self._file(entry, {**common, "ETag": f'"{entry.blob_id}"'})

    # -- cdn -----------------------------------------------------------

    def _cdn(self, raw_path: str) -> None:
        parts = raw_path.strip("/").split("/")
        entry = self.hub._blobs.get(parts[1]) if len(parts) == 2 and parts[0] == "lfs" else None
        if entry is None:
            self._send(404, {"Content-Type": "text/plain"}, b"NoSuchKey")
            return
        self.req.file = self.req.query.get("file", [entry.path])[0]
        self._file(entry, {"ETag": f'"{entry.sha256}"', "Accept-Ranges": "bytes"})

    # -- responses -------------------------------------------------------

    def _file(self, entry: RepoEntry, headers: dict[str, str]) -> None:
        size = len(entry.data)
        start = _parse_range(self.headers.get("Range"), size)
        headers = {**headers, "Content-Type": "application/octet-stream"}
        if start is None:
            status, start = 200, 0
        elif start >= size:
            self._send(416, {**headers, "Content-Range": f"bytes */{size}"}, b"")
            return
        else:
            status = 206
            headers["Content-Range"] = f"bytes {start}-{size - 1}/{size}"
        body = entry.data[start:]
        if self.command == "HEAD":
            self._send(status, headers, b"", content_length=len(body))
            return
        cut_at = self.hub._take_cut(self.req.file or entry.path)
        if cut_at is None:
            self._send(status, headers, body)
            return
        # Promise the whole body, send only up to the cut point, then drop the connection.
        self._send(status, headers, body[: max(cut_at - start, 0)], content_length=len(body))
        self.req.cut = True
        self.close_connection = True
        self.wfile.flush()
        self.connection.shutdown(socket.SHUT_RDWR)

    def _json(self, payload) -> None:
        self._send(200, {"Content-Type": "application/json; charset=utf-8"}, json.dumps(payload).encode())

    def _error(self, status: int, code: str | None, message: str, revision: _Revision | None = None) -> None:
        headers = {"Content-Type": "application/json; charset=utf-8", "X-Error-Message": message}
        if code:
            headers["X-Error-Code"] = code
        if revision is not None:
            headers["X-Repo-Commit"] = revision.commit
        self._send(status, headers, json.dumps({"error": message}).encode())

    def _send(self, status: int, headers: dict[str, str], body: bytes, content_length: int | None = None) -> None:
        self.req.status = status
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body) if content_length is None else content_length))
        self.end_headers()
        if self.command != "HEAD" and body:
            for i in range(0, len(body), CHUNK):
                self.wfile.write(body[i : i + CHUNK])
            self.req.body_bytes = len(body)
