"""What surrounds a conversion (docs/architecture.md): the content-addressed cache (a hit converts
nothing, the key follows selection and content, ``cache: false``, errors never cached), files
fetched by URL from a local HTTP server (a retry after a 500, permanent errors not retried,
bounded retries, the size limit, no cache), batches (order, isolated errors, one conversion per
duplicate, async) and the limits taken from the execution config."""

from __future__ import annotations

import asyncio
import http.server
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from holodeck_core.files import (
    NO_TEXT,
    FileLimits,
    WorkerPool,
    aprocess_files,
    cache_key,
    load_image,
    process_files,
)
from holodeck_core.files.cache import CacheEntry, ResultCache
from holodeck_core.models.agent import ExecutionConfig
from holodeck_core.models.test_case import FileInput
from tests import files_helpers
from tests.files_helpers import make_pdf, make_png, run

# Shared fixtures: pytest finds a fixture by its name in the test module.
pool = files_helpers.pool
three_pages = files_helpers.three_pages


@dataclass
class FileServer:
    """A local HTTP server: serves ``files``, fails a path's first requests on demand."""

    base: str = ""
    files: dict[str, tuple[bytes, str]] = field(default_factory=dict)
    failures: dict[str, list[int]] = field(default_factory=dict)
    requests: list[str] = field(default_factory=list)

    def url(self, name: str) -> str:
        return f"{self.base}/{name}"

    def count(self, name: str) -> int:
        return self.requests.count(f"/{name}")


@pytest.fixture
def server() -> Iterator[FileServer]:
    state = FileServer()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = self.path.split("?")[0]
            state.requests.append(path)
            pending = state.failures.get(path.lstrip("/"))
            if pending:
                status = pending.pop(0)
                self.send_response(status)
                if status == 503:  # a 500 gets the client's own backoff, a 503 says "now"
                    self.send_header("Retry-After", "0")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            found = state.files.get(path.lstrip("/"))
            if found is None:
                self.send_error(404)
                return
            body, content_type = found
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            return

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.base = f"http://127.0.0.1:{httpd.server_address[1]}"
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield state
    finally:
        httpd.shutdown()
        httpd.server_close()


# --------------------------------------------------------------------------- the cache


def test_cache_hit_returns_without_converting(
    three_pages: Path, tmp_path: Path, pool: WorkerPool
) -> None:
    cache_dir = tmp_path / "cache"
    file = FileInput(path=three_pages.name, type="pdf", pages=[2])
    first = run(file, three_pages.parent, pool, cache_dir=cache_dir)
    assert first.error is None
    assert first.metadata["cache_hit"] is False
    jobs = pool.stats().jobs
    second = run(file, three_pages.parent, pool, cache_dir=cache_dir)
    assert second.metadata["cache_hit"] is True
    assert second.markdown_content == first.markdown_content
    assert pool.stats().jobs == jobs  # no conversion happened

    # Proof that the answer comes from the entry: change the entry, get the change back.
    key = first.metadata["cache_key"]
    store = ResultCache(cache_dir)
    entry = store.get(key)
    assert entry is not None
    store.path_for(key).write_text(
        CacheEntry(**{**entry.model_dump(), "markdown": "FROM THE CACHE"}).model_dump_json()
    )
    assert run(file, three_pages.parent, pool, cache_dir=cache_dir).markdown_content == (
        "FROM THE CACHE"
    )
    assert not [p for p in cache_dir.rglob("*") if p.name.endswith(".tmp")]  # atomic writes


def test_cache_key_changes_with_selection_and_content() -> None:
    base = FileInput(path="a.pdf", type="pdf")
    source = "sha256:" + "0" * 64
    keys = {
        cache_key(source, base),
        cache_key(source, FileInput(path="a.pdf", type="pdf", pages=[1])),
        cache_key(source, FileInput(path="a.pdf", type="pdf", pages=[2])),
        cache_key("sha256:" + "1" * 64, base),
        cache_key(source, FileInput(path="a.xlsx", type="excel")),
        cache_key(source, FileInput(path="a.xlsx", type="excel", sheet="A")),
        cache_key(source, FileInput(path="a.xlsx", type="excel", sheet="B")),
        cache_key(source, FileInput(path="a.xlsx", type="excel", sheet="A", range="A1:B2")),
        cache_key("url:http://x/a.pdf", base),
        cache_key("url:http://x/a.pdf", FileInput(url="http://x/a.pdf", type="pdf", pages=[1])),
    }
    assert len(keys) == 10
    same = FileInput(path="a.pdf", type="pdf", pages=[2, 1, 2])
    assert cache_key(source, same) == cache_key(
        source, FileInput(path="a.pdf", type="pdf", pages=[1, 2])
    )


def test_another_page_is_a_cache_miss(three_pages: Path, tmp_path: Path, pool: WorkerPool) -> None:
    cache_dir = tmp_path / "cache"
    run(FileInput(path=three_pages.name, type="pdf", pages=[1]), three_pages.parent, pool,
        cache_dir=cache_dir)  # fmt: skip
    jobs = pool.stats().jobs
    other = run(
        FileInput(path=three_pages.name, type="pdf", pages=[2]),
        three_pages.parent,
        pool,
        cache_dir=cache_dir,
    )
    assert other.metadata["cache_hit"] is False
    assert pool.stats().jobs == jobs + 1
    assert "Bravo page marker" in other.markdown_content


def test_cache_false_disables_the_cache(tmp_path: Path, pool: WorkerPool) -> None:
    (tmp_path / "t.txt").write_text("plain words here", encoding="utf-8")
    cache_dir = tmp_path / "cache"
    file = FileInput(path="t.txt", type="text", cache=False)
    jobs = pool.stats().jobs
    for _ in range(2):
        result = run(file, tmp_path, pool, cache_dir=cache_dir)
        assert result.metadata["cache_hit"] is False
    assert pool.stats().jobs == jobs + 2
    assert not cache_dir.exists() or not any(cache_dir.rglob("*.json"))


def test_errors_are_not_cached(tmp_path: Path, pool: WorkerPool) -> None:
    make_pdf(tmp_path / "blank.pdf", [""])
    cache_dir = tmp_path / "cache"
    for _ in range(2):
        result = run(FileInput(path="blank.pdf", type="pdf"), tmp_path, pool, cache_dir=cache_dir)
        assert result.error == NO_TEXT
        assert result.metadata["cache_hit"] is False
    assert not cache_dir.exists() or not any(cache_dir.rglob("*.json"))


# --------------------------------------------------------------------------- URLs


def test_url_retries_after_a_500_and_caches_by_url_and_pages(
    server: FileServer, tmp_path: Path, pool: WorkerPool
) -> None:
    server.files["docs/three.pdf"] = (
        make_pdf(tmp_path / "three.pdf", ["Alpha page marker", "Bravo page marker"]).read_bytes(),
        "application/pdf",
    )
    server.failures["docs/three.pdf"] = [500]
    cache_dir = tmp_path / "cache"
    url = server.url("docs/three.pdf")

    first = run(FileInput(url=url, type="pdf", pages=[1]), tmp_path, pool, cache_dir=cache_dir)
    assert first.error is None, first.error
    assert "Alpha page marker" in first.markdown_content
    assert "Bravo" not in first.markdown_content
    assert server.count("docs/three.pdf") == 2  # the 500, then the retry
    assert first.cached_path is not None
    assert Path(first.cached_path).is_relative_to(cache_dir)
    assert first.metadata["source"] == "url"

    again = run(FileInput(url=url, type="pdf", pages=[1]), tmp_path, pool, cache_dir=cache_dir)
    assert again.metadata["cache_hit"] is True
    assert server.count("docs/three.pdf") == 2  # no new request

    jobs = pool.stats().jobs
    page_two = run(FileInput(url=url, type="pdf", pages=[2]), tmp_path, pool, cache_dir=cache_dir)
    assert page_two.metadata["cache_hit"] is False  # the key has the pages
    assert pool.stats().jobs == jobs + 1
    assert "Bravo page marker" in page_two.markdown_content
    assert server.count("docs/three.pdf") == 2  # the downloaded bytes were reused


def test_url_permanent_error_is_not_retried(
    server: FileServer, tmp_path: Path, pool: WorkerPool
) -> None:
    result = run(FileInput(url=server.url("missing.pdf?token=s3cr3t"), type="pdf"), tmp_path, pool)
    assert result.error is not None
    assert result.error.startswith("download failed: HTTP 404")
    assert "s3cr3t" not in result.error  # query strings stay out of messages
    assert server.count("missing.pdf") == 1


def test_url_gives_up_after_bounded_retries(
    server: FileServer, tmp_path: Path, pool: WorkerPool
) -> None:
    server.files["flaky.txt"] = (b"eventually", "text/plain")
    server.failures["flaky.txt"] = [503, 503, 503, 503, 503]
    result = run(FileInput(url=server.url("flaky.txt"), type="text"), tmp_path, pool)
    assert result.error is not None
    assert result.error.startswith("download failed after 4 attempts: HTTP 503")
    assert server.count("flaky.txt") == 4


def test_url_over_the_size_limit(server: FileServer, tmp_path: Path, pool: WorkerPool) -> None:
    server.files["big.txt"] = (b"y" * 5000, "text/plain")
    result = run(FileInput(url=server.url("big.txt"), type="text"), tmp_path, pool, max_bytes=100)
    assert result.error is not None
    assert "5000 bytes" in result.error
    assert "100 bytes" in result.error


def test_url_without_cache_keeps_nothing(
    server: FileServer, tmp_path: Path, pool: WorkerPool
) -> None:
    server.files["notes"] = (b"Plain notes from the web.", "text/plain; charset=utf-8")
    cache_dir = tmp_path / "cache"
    result = run(
        FileInput(url=server.url("notes"), type="text", cache=False),
        tmp_path,
        pool,
        cache_dir=cache_dir,
    )
    assert result.error is None, result.error
    assert "Plain notes from the web." in result.markdown_content
    assert result.cached_path is None
    assert not cache_dir.exists() or not any(p.is_file() for p in cache_dir.rglob("*"))


def test_url_image_loads_from_the_cached_download(
    server: FileServer, tmp_path: Path, pool: WorkerPool
) -> None:
    png = make_png(tmp_path / "dot.png").read_bytes()
    server.files["img/dot"] = (png, "image/png")
    result = run(
        FileInput(url=server.url("img/dot"), type="image"), tmp_path, pool, cache_dir=tmp_path / "c"
    )
    assert result.error is None, result.error
    assert result.metadata["mime_type"] == "image/png"
    requests = server.count("img/dot")
    assert load_image(result, base_dir=tmp_path).data == png
    assert server.count("img/dot") == requests  # read from the cache, not fetched again


# --------------------------------------------------------------------------- batches and limits


def test_process_files_keeps_order_isolates_errors_and_dedupes(
    three_pages: Path, pool: WorkerPool
) -> None:
    folder = three_pages.parent
    (folder / "a.txt").write_text("first text file", encoding="utf-8")
    files = [
        FileInput(path="a.txt", type="text"),
        FileInput(path="missing.pdf", type="pdf"),
        FileInput(path=three_pages.name, type="pdf", pages=[2]),
        FileInput(path="a.txt", type="text"),
    ]
    jobs = pool.stats().jobs
    results = process_files(files, base_dir=folder, pool=pool)
    assert [r.original for r in results] == files
    assert "first text file" in results[0].markdown_content
    assert results[1].error is not None
    assert "Bravo page marker" in results[2].markdown_content
    assert results[3].markdown_content == results[0].markdown_content
    assert pool.stats().jobs == jobs + 2  # the duplicate was converted once
    assert process_files([], base_dir=folder, pool=pool) == []


def test_aprocess_files(tmp_path: Path, pool: WorkerPool) -> None:
    (tmp_path / "a.txt").write_text("async words", encoding="utf-8")
    results = asyncio.run(
        aprocess_files([FileInput(path="a.txt", type="text")], base_dir=tmp_path, pool=pool)
    )
    assert "async words" in results[0].markdown_content


def test_limits_from_execution() -> None:
    assert FileLimits.from_execution(None) == FileLimits()
    limits = FileLimits.from_execution(
        ExecutionConfig(file_timeout=5, download_timeout=7, max_file_mb=1.5)
    )
    assert limits.model_dump() == {
        "file_timeout": 5.0,
        "download_timeout": 7.0,
        "max_bytes": 1572864,
    }
