"""``bioattn data fetch``: checksums, resume, retries, no half-written files — against a local HTTP server."""
from __future__ import annotations

import gzip
import hashlib
import http.server
import json
import threading
from pathlib import Path
from typing import Iterator

import pytest

from bioattn.cli import main
from bioattn.data.fetch import ChecksumError, RemoteFile, download, load_registry
from tests.helpers import REPO_ROOT

PAYLOAD = bytes(range(256)) * 1000  # 256,000 bytes
SHA256 = hashlib.sha256(PAYLOAD).hexdigest()


class FileServer(http.server.BaseHTTPRequestHandler):
    """Serves :data:`PAYLOAD` at ``/good``, a corrupted copy at ``/corrupt``, a copy whose first response
    closes halfway at ``/truncated`` and one that ignores ``Range`` at ``/norange``; records each request."""

    requests: list[tuple[str, str | None]] = []
    truncations_left = 0

    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        FileServer.requests.append((self.path, self.headers.get("Range")))
        if self.path == "/missing":
            self.send_error(404)
            return
        body = PAYLOAD if self.path != "/corrupt" else b"x" + PAYLOAD[1:]
        start = 0
        ranged = self.headers.get("Range") and self.path != "/norange"
        if ranged:
            start = int(self.headers["Range"].removeprefix("bytes=").rstrip("-"))
        self.send_response(206 if ranged else 200)
        self.send_header("Content-Length", str(len(body) - start))
        self.end_headers()
        if self.path == "/truncated" and FileServer.truncations_left > 0:
            FileServer.truncations_left -= 1
            self.wfile.write(body[start:start + (len(body) - start) // 2])
            self.close_connection = True
            return
        self.wfile.write(body[start:])

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    """Base URL of a :class:`FileServer` on 127.0.0.1, in a thread."""
    FileServer.requests = []
    FileServer.truncations_left = 0
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), FileServer)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def remote(url: str, sha256: str | None = SHA256) -> RemoteFile:
    return RemoteFile(path="sub/data.bin", url=url, sha256=sha256)


def quiet(message: str) -> None:
    pass


def test_download_verifies_and_leaves_no_part_file(server, tmp_path):
    dest = tmp_path / "sub" / "data.bin"
    download(remote(f"{server}/good"), dest, progress=False, log=quiet)
    assert dest.read_bytes() == PAYLOAD
    assert list(dest.parent.iterdir()) == [dest]


def test_checksum_mismatch_is_an_error_and_leaves_nothing(server, tmp_path):
    dest = tmp_path / "data.bin"
    with pytest.raises(ChecksumError, match="checksum mismatch.*sha256"):
        download(remote(f"{server}/corrupt"), dest, progress=False, log=quiet)
    assert list(tmp_path.iterdir()) == []


def test_truncated_download_is_resumed_with_range(server, tmp_path):
    FileServer.truncations_left = 1
    dest = tmp_path / "data.bin"
    download(remote(f"{server}/truncated"), dest, progress=False, log=quiet)
    assert dest.read_bytes() == PAYLOAD
    assert [r for _, r in FileServer.requests] == [None, f"bytes={len(PAYLOAD) // 2}-"]
    assert not dest.with_name("data.bin.part").exists()


def test_existing_part_file_is_resumed(server, tmp_path):
    dest = tmp_path / "data.bin"
    dest.with_name("data.bin.part").write_bytes(PAYLOAD[:1000])
    download(remote(f"{server}/good"), dest, progress=False, log=quiet)
    assert dest.read_bytes() == PAYLOAD
    assert FileServer.requests == [("/good", "bytes=1000-")]


def test_server_ignoring_range_restarts_from_zero(server, tmp_path):
    dest = tmp_path / "data.bin"
    dest.with_name("data.bin.part").write_bytes(b"garbage")
    download(remote(f"{server}/norange"), dest, progress=False, log=quiet)
    assert dest.read_bytes() == PAYLOAD


def test_corrupt_part_file_is_downloaded_again(server, tmp_path):
    dest = tmp_path / "data.bin"
    dest.with_name("data.bin.part").write_bytes(b"y" * 1000)  # wrong bytes a resume cannot fix
    messages: list[str] = []
    download(remote(f"{server}/good"), dest, progress=False, log=messages.append)
    assert dest.read_bytes() == PAYLOAD
    assert any("downloading it again" in m for m in messages)


def test_repeated_failures_keep_the_part_file_for_a_later_resume(server, tmp_path):
    FileServer.truncations_left = 10
    dest = tmp_path / "data.bin"
    with pytest.raises(Exception, match="failed after 2 attempts"):
        download(remote(f"{server}/truncated"), dest, progress=False, attempts=2, log=quiet)
    assert not dest.exists()
    assert 0 < dest.with_name("data.bin.part").stat().st_size < len(PAYLOAD)


def test_registry_lists_every_recipe_dataset_and_its_card_names_the_command():
    registry = load_registry()
    assert {"gue", "ecoli_sigma70", "adrenalmnist3d", "coev", "pfam_ardca"} <= set(registry)
    for dataset in registry.values():
        for file in dataset.files:
            assert not Path(file.path).is_absolute() and ".." not in Path(file.path).parts
            assert file.url is None or file.url.startswith("https://")
            assert file.url is not None or file.note
        card = REPO_ROOT / dataset.card
        assert f"bioattn data fetch {dataset.name}" in card.read_text(), f"{card} does not name the fetch command"
    gue = {f.path for f in registry["gue"].files}
    assert "promoters/gue/prom_core_all/train.csv" in gue and "promoters/gue/prom_core_all/dev.csv" in gue


def test_registry_checksums_match_the_data_root_copies(require_data):
    """Every registry file present under the data root (as is, or gzipped as ``NAME.gz``) has the recorded SHA-256."""
    root = require_data()
    checked = 0
    for dataset in load_registry().values():
        for file in dataset.files:
            plain, gzipped = root / file.path, root / (file.path + ".gz")
            content = plain.read_bytes() if plain.exists() else gzip.decompress(gzipped.read_bytes()) if gzipped.exists() else None
            if content is None or file.sha256 is None:
                continue
            assert hashlib.sha256(content).hexdigest() == file.sha256, file.path
            checked += 1
    if not checked:
        pytest.skip(f"no registry file under {root}")


def test_fetch_command_downloads_a_dataset_and_reports_unverified(server, tmp_path, monkeypatch, capsys):
    registry = {"toy": {"description": "toy data", "license": "CC0", "card": "data_cards/toy.md", "files": [
        {"path": "toy/a.bin", "url": f"{server}/good", "sha256": SHA256},
        {"path": "toy/b.bin", "url": f"{server}/good", "sha256": None},
        {"path": "toy/c.bin", "url": None, "note": "ask the authors"},
    ]}}
    registry_path = tmp_path / "datasets.json"
    registry_path.write_text(json.dumps(registry))
    monkeypatch.setattr("bioattn.data.fetch.REGISTRY_PATH", registry_path)
    root = tmp_path / "root"
    assert main(["data", "fetch", "toy", "--out", str(root), "--no-progress"]) == 0
    out = capsys.readouterr()
    assert (root / "toy" / "a.bin").read_bytes() == PAYLOAD == (root / "toy" / "b.bin").read_bytes()
    assert not (root / "toy" / "c.bin").exists()
    assert "UNVERIFIED" in out.out and "toy/b.bin" in out.out and "ask the authors" in out.err
    assert main(["data", "fetch", "toy", "--out", str(root), "--no-progress"]) == 0
    assert "0 downloaded, 2 already present" in capsys.readouterr().out


def test_fetch_command_checksum_error_exits_2(server, tmp_path, monkeypatch, capsys):
    registry_path = tmp_path / "datasets.json"
    registry_path.write_text(json.dumps({"toy": {"description": "toy", "license": "CC0", "card": "x.md", "files": [
        {"path": "toy/a.bin", "url": f"{server}/corrupt", "sha256": SHA256}]}}))
    monkeypatch.setattr("bioattn.data.fetch.REGISTRY_PATH", registry_path)
    assert main(["data", "fetch", "toy", "--out", str(tmp_path / "root"), "--no-progress"]) == 2
    assert "checksum mismatch" in capsys.readouterr().err
    assert not any(p.is_file() for p in (tmp_path / "root").rglob("*"))
