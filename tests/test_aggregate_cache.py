"""The aggregate cache's rules, against a notification log in memory."""

from __future__ import annotations

from dataclasses import dataclass, field
from uuid import UUID, uuid4

from session_awareness.application.aggregate_cache import (
    LOOK_LIMIT,
    LOOK_PAGES,
    PASSED_BOUND,
    AggregateCache,
)


@dataclass
class Item:
    id: UUID
    version: int
    history: list[int] = field(default_factory=list)


@dataclass
class Log:
    rows: list[tuple[int, UUID, int]] = field(default_factory=list)
    looks: int = 0

    def append(self, originator_id: UUID, version: int) -> int:
        self.rows.append((len(self.rows) + 1, originator_id, version))
        return len(self.rows)

    def originators_after(self, position: int, limit: int) -> list[tuple[int, UUID, int]]:
        self.looks += 1
        return self.rows[position : position + limit]

    def max_notification_id(self) -> int | None:
        return len(self.rows) or None


def forward_to(version: int):  # type: ignore[no-untyped-def]
    def forward(item: Item) -> Item:
        item.history.append(item.version)
        item.version = version
        return item

    return forward


def cached(cache: AggregateCache, item_id: UUID) -> Item | None:
    hit = cache.get(item_id, forward_to(-1))
    return None if hit is None else hit[0]


def test_a_saved_aggregate_is_served_as_a_copy_without_reading_the_store() -> None:
    log, item = Log(), Item(uuid4(), 1)
    cache = AggregateCache(log, maxsize=10)
    cache.look()
    cache.saved([item], {item.id: log.append(item.id, 1)})
    copy = cached(cache, item.id)
    assert copy == item and copy is not item


def test_an_aggregate_another_writer_changed_is_fast_forwarded_on_its_next_get() -> None:
    log, item = Log(), Item(uuid4(), 1)
    cache = AggregateCache(log, maxsize=10)
    cache.look()
    cache.saved([item], {item.id: log.append(item.id, 1)})
    log.append(item.id, 2)  # another writer
    cache.look()
    hit = cache.get(item.id, forward_to(2))
    assert hit is not None and hit[1] is True and hit[0].version == 2


def test_the_writers_own_events_do_not_make_its_copies_stale() -> None:
    log, item = Log(), Item(uuid4(), 1)
    cache = AggregateCache(log, maxsize=10)
    cache.look()
    cache.saved([item], {item.id: log.append(item.id, 1)})
    cache.look()
    hit = cache.get(item.id, forward_to(-1))
    assert hit is not None and hit[1] is False


def test_a_save_the_log_position_has_passed_is_kept_stale() -> None:
    """Another thread looked past this save (as when saves commit together, ADR 025): a
    newer event of the aggregate may be behind, so its next get fast-forwards."""
    log, item = Log(), Item(uuid4(), 1)
    cache = AggregateCache(log, maxsize=10)
    cache.look()
    at = log.append(item.id, 1)
    log.append(item.id, 2)  # another writer, seen by another thread's look
    cache.look()
    cache.saved([item], {item.id: at})
    hit = cache.get(item.id, forward_to(2))
    assert hit is not None and hit[1] is True and hit[0].version == 2


def test_a_passed_save_is_kept_fresh_when_the_looks_read_nothing_newer_of_it() -> None:
    """The looks that passed the save read only the save itself and another aggregate's
    event: the copy is the newest, served without reading the store."""
    log, item, other = Log(), Item(uuid4(), 1), Item(uuid4(), 1)
    cache = AggregateCache(log, maxsize=10)
    cache.look()
    at = log.append(item.id, 1)  # this save, committed; another thread looks first
    log.append(other.id, 1)
    cache.look()
    cache.saved([item], {item.id: at})
    hit = cache.get(item.id, forward_to(-1))
    assert hit is not None and hit[1] is False and hit[0].version == 1


def test_a_passed_save_is_stale_when_a_look_read_a_newer_event_of_it_while_uncached() -> None:
    """A newer event of the aggregate was read while no copy of it was cached (dropped, or
    never loaded): the look's note still makes the saved copy stale."""
    log, item = Log(), Item(uuid4(), 1)
    cache = AggregateCache(log, maxsize=10)
    cache.look()
    cache.saved([item], {item.id: log.append(item.id, 1)})
    cache.forget([item.id])
    at = log.append(item.id, 2)  # this save, committed
    log.append(item.id, 3)  # another writer's, right after it
    cache.look()
    cache.saved([Item(item.id, 2)], {item.id: at})
    hit = cache.get(item.id, forward_to(3))
    assert hit is not None and hit[1] is True and hit[0].version == 3


def test_a_passed_save_older_than_the_looks_notes_is_stale() -> None:
    """The notes start afresh past their bound; a save from before their start cannot be
    vouched for, so it is stale."""
    log, item = Log(), Item(uuid4(), 1)
    cache = AggregateCache(log, maxsize=10)
    cache.look()
    at = log.append(item.id, 1)
    for _ in range(PASSED_BOUND // (LOOK_LIMIT - 1) + 2):  # a page of others per look
        for _ in range(LOOK_LIMIT - 1):
            log.append(uuid4(), 1)
        cache.look()
    cache.saved([item], {item.id: at})
    hit = cache.get(item.id, forward_to(1))
    assert hit is not None and hit[1] is True


def test_a_load_is_kept_only_if_no_look_happened_since_it_began() -> None:
    log, item = Log(), Item(uuid4(), 1)
    cache = AggregateCache(log, maxsize=10)
    seen_at = cache.look()
    cache.loaded(item, seen_at)
    assert cached(cache, item.id) == item
    other = Item(uuid4(), 1)
    log.append(other.id, 1)
    cache.look()
    cache.loaded(other, seen_at)
    assert cached(cache, other.id) is None


def test_a_long_gap_in_the_log_empties_the_cache() -> None:
    """Reading the log page by page would cost more than loading again what is used."""
    log, item = Log(), Item(uuid4(), 1)
    cache = AggregateCache(log, maxsize=10)
    cache.look()
    cache.saved([item], {item.id: log.append(item.id, 1)})
    for _ in range(LOOK_LIMIT * LOOK_PAGES + 1):
        log.append(uuid4(), 1)
    assert cache.look() == len(log.rows)
    assert cached(cache, item.id) is None


def test_the_least_recently_used_aggregate_is_evicted_first() -> None:
    log = Log()
    cache = AggregateCache(log, maxsize=2)
    cache.look()
    items = [Item(uuid4(), 1) for _ in range(3)]
    cache.saved(items[:2], {i.id: log.append(i.id, 1) for i in items[:2]})
    cached(cache, items[0].id)  # now the most recently used
    cache.saved(items[2:], {items[2].id: log.append(items[2].id, 1)})
    assert cached(cache, items[1].id) is None
    assert cached(cache, items[0].id) is not None and cached(cache, items[2].id) is not None


def test_a_save_right_after_the_position_moves_it_past_the_saves_own_events() -> None:
    log, item = Log(), Item(uuid4(), 1)
    cache = AggregateCache(log, maxsize=10)
    cache.look()
    ids = [log.append(item.id, 1), log.append(uuid4(), 1)]
    cache.saved([item], {item.id: ids[0]}, ids)
    assert cache.position == 2
    looks = log.looks
    assert cache.look() == 2 and log.looks == looks + 1  # one empty page, nothing read back


def test_a_save_behind_another_writers_events_leaves_the_position_for_the_next_look() -> None:
    log, item, other = Log(), Item(uuid4(), 1), Item(uuid4(), 1)
    cache = AggregateCache(log, maxsize=10)
    cache.look()
    cache.saved([other], {other.id: log.append(other.id, 1)}, [1])
    log.append(other.id, 2)  # another writer
    at = log.append(item.id, 1)
    cache.saved([item], {item.id: at}, [at])
    assert cache.position == 1
    cache.look()
    assert cache.position == 3
    hit = cache.get(other.id, forward_to(2))
    assert hit is not None and hit[1] is True


def test_a_peek_hands_out_the_cached_aggregate_itself_unless_another_writer_changed_it() -> None:
    """A reader that changes nothing (a fan-out telling a pending cursor) reads the cached
    object without a copy; a stale one, or one never cached, is not served."""
    log, item = Log(), Item(uuid4(), 1)
    cache = AggregateCache(log, maxsize=10)
    cache.look()
    assert cache.peek(item.id) is None
    cache.saved([item], {item.id: log.append(item.id, 1)})
    assert cache.peek(item.id) is item
    log.append(item.id, 2)  # another writer
    cache.look()
    assert cache.peek(item.id) is None


def test_a_peek_of_many_is_each_ones_peek_in_order() -> None:
    """A drain's cursors peeked at once (`peek_many`, one hold of the lock) are what `peek`
    serves each: the cached object itself, None for one another writer changed or never
    cached, with nothing stale as with something stale."""
    log = Log()
    items = [Item(uuid4(), 1) for _ in range(4)]
    cache = AggregateCache(log, maxsize=10)
    cache.look()
    cache.saved(items[:3], {item.id: log.append(item.id, 1) for item in items[:3]})
    ids = [item.id for item in items]
    assert cache.peek_many(ids) == [cache.peek(i) for i in ids] == [*items[:3], None]
    assert all(a is b for a, b in zip(cache.peek_many(ids)[:3], items, strict=False))
    log.append(items[1].id, 2)  # another writer
    cache.look()
    assert cache.peek_many(ids) == [cache.peek(i) for i in ids] == [items[0], None, items[2], None]


def test_a_save_whose_caller_comes_late_never_replaces_a_newer_copy() -> None:
    """Two saves of one aggregate commit in turn, and the later one's caller reaches the
    cache first (its ids follow the position, which moves past them unread): the earlier
    save's copy, older, is never served as the newest."""
    log, item = Log(), Item(uuid4(), 4)
    cache = AggregateCache(log, maxsize=10)
    cache.look()
    early = log.append(item.id, 4)  # committed; its caller is slow to come back
    cache.look()  # another thread's look reads it
    late = log.append(item.id, 5)
    cache.saved([Item(item.id, 5)], {item.id: late}, [late])
    cache.saved([item], {item.id: early}, [early])
    hit = cache.get(item.id, forward_to(5))
    assert hit is not None and hit[0].version == 5
    cache.clear()
    cache.look()
    early = log.append(item.id, 6)
    cache.look()
    late = log.append(item.id, 7)
    cache.saved([Item(item.id, 7)], {item.id: late}, [late])
    cache.forget([item.id])  # the newer copy is gone: the older one must be stale
    cache.saved([Item(item.id, 6)], {item.id: early}, [early])
    hit = cache.get(item.id, forward_to(7))
    assert hit is not None and hit[1] is True and hit[0].version == 7
