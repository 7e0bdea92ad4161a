"""The console's pages over a scenario's store, on SQLite and PostgreSQL (R-O1)."""

from __future__ import annotations

import itertools
import re
from typing import Any
from urllib.parse import quote

import pytest
from markupsafe import escape
from starlette.testclient import TestClient

from session_awareness.application import SessionAwareness
from session_awareness.infrastructure.console import create_app, cursors
from session_awareness.infrastructure.console.views import session_href, store_head
from session_awareness.testing.read_models import read_model_rows
from tests.conftest import ServiceFactory
from tests.console.scenario import (
    BARE,
    CHILD,
    GROUP,
    HOSTILE_CHANNEL,
    HOSTILE_KEY,
    HOSTILE_LABEL,
    MANAGER,
    notice,
)

PAGES = ["/", "/watches", "/health", "/metrics", session_href(CHILD), session_href(MANAGER),
         session_href(HOSTILE_KEY), session_href(BARE, "ops")]  # fmt: skip


def text_of(html: str) -> str:
    """What a person reads: the markup's text, tags dropped, entities kept escaped."""
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


class TestOverview:
    def test_shows_each_agent_and_its_session_tree(self, client: TestClient) -> None:
        """R-O1: agents, and under the manager its children, each with kind, label and
        stateVersion; the manager's pending notice is counted."""
        page = client.get("/")
        assert page.status_code == 200
        html = page.text
        assert 'data-agent="main"' in html and 'data-agent="ops"' in html
        manager = html.index(f'data-key="{MANAGER}"')
        child = html.index(f'data-key="{CHILD}"')
        assert manager < child
        assert '<ul class="tree">' in html[manager:child]  # the child hangs under the manager
        assert "2 pending notices" in text_of(html[manager:child])  # the child's and the group's
        assert escape(HOSTILE_LABEL) in html and HOSTILE_LABEL not in html

    def test_filters_by_agent_kind_and_label(self, client: TestClient) -> None:
        """R-O1: the agent, kind and label filters narrow the rows."""
        assert BARE not in client.get("/?agentId=main").text
        only_group = client.get("/?kind=group").text
        assert GROUP in only_group and f'data-key="{CHILD}"' not in only_group
        labelled = client.get("/?label=ops+room").text
        assert GROUP in labelled and f'data-key="{MANAGER}"' not in labelled

    def test_is_paginated(self, reader: SessionAwareness) -> None:
        """R-O1: a page holds at most its size and links to the next; the pages together
        hold every live session once."""
        app = create_app(reader, page_size=2)
        with TestClient(app, base_url="http://localhost") as small:
            pages = [small.get(f"/?page={n}").text for n in range(3)]
        keys = [re.findall(r'data-key="([^"]+)"', page) for page in pages]
        assert [len(k) for k in keys] == [2, 2, 1]
        assert all("page=" in page and "older" in page for page in pages[:2])
        assert "older" not in pages[2]
        assert len({k for page in keys for k in page}) == 5

    def test_counts_the_pages_pending_notices_without_reading_every_watchers(
        self, client: TestClient, reader: SessionAwareness, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """R-O1 (issue 39): the page's pending notices are counted for its own sessions in
        one read, not from every watcher with a notice in the store, then one read a row."""

        def forbidden(*args: Any, **kwargs: Any) -> Any:
            raise AssertionError("the overview read beyond its page's watchers")

        monkeypatch.setattr(reader.store.read_model, "watchers_with_pending", forbidden)
        monkeypatch.setattr(reader.store.read_model, "cursors_of_watcher", forbidden)
        html = client.get("/").text
        manager, child = html.index(f'data-key="{MANAGER}"'), html.index(f'data-key="{CHILD}"')
        assert "2 pending notices" in text_of(html[manager:child])
        assert html.count("pending notice") == 1

    def test_the_forms_empty_fields_mean_any(self, client: TestClient) -> None:
        """R-O1: the filter form as a browser submits it, nothing chosen, lists everything."""
        page = client.get("/?agentId=&kind=&label=&activeMinutes=")
        assert page.status_code == 200 and page.text.count('class="session"') == 5
        assert client.get("/watches?watcher=&target=&state=").text.count('<tr class="edge') == 3

    def test_refuses_bad_filters_with_the_reason(self, client: TestClient) -> None:
        """R-O1: a bad filter is a 400 page naming it, never a traceback."""
        page = client.get("/?kind=nonsense")
        assert page.status_code == 400 and "kinds.0" in page.text
        assert client.get("/?page=-1").status_code == 400
        assert client.get("/?activeMinutes=soon").status_code == 400


class TestWatches:
    def test_draws_each_cursor_with_its_positions_and_state(self, client: TestClient) -> None:
        """R-O1: the picture and the table show every cursor: the manager's on the child is
        pending with its notice (L 1, N 2, M 3), the main session's on the group ambient."""
        html = client.get("/watches").text
        assert "<svg" in html and 'class="edge pending"' in html and 'class="edge ambient"' in html
        assert "L 1 · N 2 · M 3 · pending" in html
        assert escape(notice(CHILD, 1)) in html
        rows = re.findall(r'<tr class="edge (\w+)">(.*?)</tr>', html, re.S)
        states = {(state, CHILD in row, GROUP in row) for state, row in rows}
        assert ("pending", True, False) in states and ("ambient", False, True) in states

    def test_filters_by_watcher_target_and_state_and_pages(
        self, client: TestClient, reader: SessionAwareness
    ) -> None:
        """R-O1: the cursors narrow to a watcher, a target or the pending ones, a page at a
        time."""

        def rows(path: str) -> list[str]:
            return re.findall(r'<tr class="edge (\w+)">', client.get(path).text)

        assert sorted(rows("/watches?state=pending")) == ["ambient", "pending"]
        assert len(rows(f"/watches?watcher={quote(MANAGER)}")) == 3
        assert rows(f"/watches?target={quote(CHILD)}") == ["pending"]
        assert rows("/watches?watcher=agent:main:nobody") == []
        with TestClient(create_app(reader, edges_page=2), base_url="http://localhost") as small:
            first, second = small.get("/watches").text, small.get("/watches?page=1").text
        assert first.count('<tr class="edge') == 2 and "next" in first
        assert second.count('<tr class="edge') == 1 and "3 cursors, 2 pending" in second


class TestWatchesReadOnePage:
    """Issue 39, item 6: a cursor page costs one page of rows, whatever the store holds."""

    def test_serves_every_filter_without_reading_every_cursor(
        self, client: TestClient, reader: SessionAwareness, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """R-O1: the watches page, filtered or not, a page at a time, with its counts, is
        served without listing every cursor: at a million sessions that list was 800,000
        rows for one page view."""

        def every_row(before: int) -> Any:
            raise AssertionError(f"a page read every cursor updated before {before}")

        monkeypatch.setattr(reader.store.read_model, "cursors_updated_before", every_row)
        whole = client.get("/watches").text
        assert whole.count('<tr class="edge') == 3 and "3 cursors, 2 pending" in whole
        assert len(re.findall(r'<tr class="edge', client.get("/watches?state=pending").text)) == 2
        narrowed = client.get(f"/watches?watcher={quote(MANAGER)}&target={quote(CHILD)}").text
        assert re.findall(r'<tr class="edge (\w+)">', narrowed) == ["pending"]
        assert "1 cursor, 1 pending" in narrowed
        with TestClient(create_app(reader, edges_page=2), base_url="http://localhost") as small:
            assert small.get("/watches?page=1").text.count('<tr class="edge') == 1
            assert small.get("/watches?page=-1").status_code == 400

    def test_each_page_is_the_one_the_whole_list_gave(
        self, reader: SessionAwareness, writer: SessionAwareness
    ) -> None:
        """R-O1: for each filter (a watcher, a target, the pending ones, together, none
        matching) and each page of one or two cursors, the edges, the counts and whether
        more follow are those of the whole list, filtered and sorted as the page did before
        (watcher key, target key, target id)."""
        writer.watch(HOSTILE_KEY, CHILD)  # a second watcher on the child, synced
        writer.watch(HOSTILE_KEY, GROUP)
        every = reader.read_model.cursors_updated_before(2**62)
        for watcher, target, pending_only in itertools.product(
            (None, MANAGER, HOSTILE_KEY, "agent:main:nobody"),
            (None, CHILD, GROUP, "agent:main:nobody"),
            (False, True),
        ):
            chosen = sorted(
                (c for c in every
                 if watcher in (None, c.watcher_key) and target in (None, c.target_key)
                 and (c.pending or not pending_only)),
                key=lambda c: (c.watcher_key, c.target_key, c.target_id),
            )  # fmt: skip
            for size in (1, 2):
                for number in range(len(chosen) // size + 2):
                    found = cursors.watches(
                        reader, watcher=watcher, target=target, pending_only=pending_only,
                        page=number, page_size=size,
                    )  # fmt: skip
                    shown = chosen[number * size : (number + 1) * size]
                    assert found.edges == cursors.edges(reader, shown)
                    assert (found.total, found.pending, found.page, found.more) == (
                        len(chosen),
                        sum(c.pending for c in chosen),
                        number,
                        len(chosen) > (number + 1) * size,
                    )

    def test_a_session_page_shows_a_page_of_its_cursors_and_links_to_the_rest(
        self,
        reader: SessionAwareness,
        writer: SessionAwareness,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        """R-O1: a session's watchers and what it watches are each at most one page of the
        watches page, read as one; beyond it the page says more follow and links to the
        watches page filtered to the session."""
        writer.watch(HOSTILE_KEY, CHILD)  # the child's second watcher
        monkeypatch.setattr(cursors, "EDGES_PAGE", 1)
        with TestClient(create_app(reader), base_url="http://localhost") as client:
            child = client.get(session_href(CHILD)).text
            manager = client.get(session_href(MANAGER)).text
            single = client.get(session_href(HOSTILE_KEY)).text
        watchers = child[child.index('id="watchers"') : child.index('id="watching"')]
        assert watchers.count('<tr class="edge') == 1
        assert f'href="/watches?target={quote(CHILD, safe="/")}"' in watchers
        watching = manager[manager.index('id="watching"') : manager.index('id="transitions"')]
        assert watching.count('<tr class="edge') == 1  # of its three cursors
        assert f'href="/watches?watcher={quote(MANAGER, safe="/")}"' in watching
        assert 'id="more-watchers"' not in single and 'id="more-watching"' not in single


class TestSessionPage:
    def test_shows_the_timeline_watchers_and_transitions(self, client: TestClient) -> None:
        """R-O1: the signal timeline (sequence, kind, actor, summary), the watermark and
        historyGap, its watcher with L/N/M, and its cursors' transitions from history."""
        html = client.get(session_href(CHILD)).text
        timeline = html[
            html.index('id="timeline"') : html.index("</table>", html.index('id="timeline"'))
        ]
        assert [int(n) for n in re.findall(r'<td class="n">(\d+)</td>', timeline)] == [1, 2, 3]
        assert "child_spawned" in timeline and "goal_changed" in timeline
        assert escape("human message via " + HOSTILE_CHANNEL) in timeline
        assert 'id="watermark">0<' in html and "no history gap" in html
        watchers = html[html.index('id="watchers"') :]
        assert MANAGER in watchers[: watchers.index("</table>")]
        transitions = html[html.index('id="transitions"') :]
        assert "notice_opened" in transitions and "cursor_seeded" in transitions

    def test_shows_the_watermark_and_history_gap_after_pruning(
        self, client: TestClient, open_svc: ServiceFactory
    ) -> None:
        """R-O1, R-S3: once retention pruned the child's oldest rows, its page names the
        watermark, starts at the earliest retained sequence and reports the history gap."""
        pruner = open_svc(retention_rows=2)
        pruner.prune()
        watermark = pruner.read_model.session_state(
            pruner.resolve_id(CHILD)[1], after=None, limit=0
        ).head.pruned_watermark  # type: ignore[union-attr]
        assert watermark > 0
        html = client.get(session_href(CHILD)).text
        assert f'id="watermark">{watermark}<' in html
        assert f"history gap: rows up to #{watermark} were pruned" in html
        assert f"earliest available #{watermark + 1}" in html
        later = client.get(session_href(CHILD) + f"?since={watermark}").text
        assert "no history gap" in later

    def test_what_a_session_watches(self, client: TestClient) -> None:
        """R-O1: the manager's page lists the cursors it holds, the pending one's notice too."""
        html = client.get(session_href(MANAGER)).text
        watching = html[html.index('id="watching"') :]
        assert escape(notice(CHILD, 1)) in watching[: watching.index("</table>")]

    def test_takes_url_encoded_and_bare_keys(self, client: TestClient) -> None:
        """R-O1, R-K1: a key is one URL-encoded path segment; a bare key takes ?agentId=."""
        assert client.get("/sessions/" + quote(HOSTILE_KEY, safe="")).status_code == 200
        assert client.get(f"/sessions/{BARE}?agentId=ops").status_code == 200
        assert client.get(f"/sessions/{BARE}?agentId=main").status_code == 404

    def test_an_unknown_session_is_a_404_naming_it(self, client: TestClient) -> None:
        """R-O1, R-S4: an unknown key is reported as unknown, escaped."""
        page = client.get("/sessions/" + quote("agent:main:<i>nope</i>", safe=""))
        assert page.status_code == 404
        assert "Unknown sessionKey: agent:main:&lt;i&gt;nope&lt;/i&gt;" in page.text


class TestHealth:
    def test_shows_backend_store_and_retention(
        self, client: TestClient, reader: SessionAwareness
    ) -> None:
        """R-O1: the backend, the store's state, retention's limits and what a prune would
        remove."""
        html = client.get("/health").text
        assert f'id="backend">{reader.health()["backend"]}<' in html
        assert 'id="store">ok<' in html
        assert "30 days, 50000 rows" in html and 'id="removable">0 rows' in html


class TestStoreDown:
    def test_a_store_that_cannot_be_read_is_a_503_page(
        self, client: TestClient, reader: SessionAwareness
    ) -> None:
        """R-O1: an unreachable store is said so, with status 503, never a traceback."""
        reader.close()
        for path in ["/", "/watches", "/health", session_href(CHILD)]:
            page = client.get(path)
            assert page.status_code == 503, path
            assert "Store unavailable" in page.text


class TestReadOnly:
    def test_looking_at_every_page_changes_nothing(
        self, client: TestClient, reader: SessionAwareness
    ) -> None:
        """R-O1: the console never writes: the event store's head and every read-model row
        are the same after every page was served."""
        head = store_head(reader)
        rows = read_model_rows(reader.store.recorder)
        for path in PAGES:
            assert client.get(path).status_code == 200, path
        assert store_head(reader) == head
        assert read_model_rows(reader.store.recorder) == rows


class TestEscaping:
    def test_no_page_carries_hostile_text_as_markup(self, client: TestClient) -> None:
        """R-O1: keys, labels and summaries are escaped on every page; scripts need the
        response's nonce (Content-Security-Policy), which stored text never has."""
        for path in PAGES:
            page = client.get(path)
            for hostile in (HOSTILE_LABEL, HOSTILE_CHANNEL, "<b>bold</b>"):
                assert hostile not in page.text, (path, hostile)
            if path != "/metrics":
                policy = page.headers["content-security-policy"]
                nonce = re.search(r"'nonce-([^']+)'", policy)
                assert nonce is not None and "unsafe-inline" not in policy
                assert page.text.count("<script") == page.text.count(f'nonce="{nonce[1]}"') - 1
