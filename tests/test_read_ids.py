"""The read model's ids come back as the `UUID`s that were written (`reads._uuid`): SQLite
keeps them as hex, read back without `UUID(int=…)`'s checks of its other forms (a drain's
read of the pending pairs builds one per pair, R-N3), so every property of the id is pinned
against the constructor's."""

from __future__ import annotations

import copy
import pickle
import random
from uuid import UUID, uuid4, uuid5

import pytest

from session_awareness.domain.keys import SessionRef, watch_id
from session_awareness.infrastructure.readmodel.reads import _uuid


def ids() -> list[UUID]:
    rng = random.Random(39)  # noqa: S311 -- seeded ids, not secrets
    session = SessionRef.of("agent:main:subagent:child").session_id
    return [
        UUID(int=0),
        UUID(int=(1 << 128) - 1),
        uuid4(),
        uuid5(session, "x"),
        watch_id("agent:main:main", session),
        *(UUID(int=rng.getrandbits(128)) for _ in range(200)),
    ]


class TestAnIdReadBack:
    def test_an_id_read_from_its_hex_is_the_constructors_in_every_respect(self) -> None:
        """The id read from a hex column equals, hashes, prints, pickles and copies as the
        `UUID` the hex was written from, for the ids the service writes and random ones."""
        for expected in ids():
            read = _uuid(expected.hex)
            assert type(read) is UUID
            assert read == expected and hash(read) == hash(expected)
            assert (read.int, read.is_safe) == (expected.int, expected.is_safe)
            assert (str(read), repr(read), read.hex, read.bytes) == (
                str(expected), repr(expected), expected.hex, expected.bytes
            )  # fmt: skip
            assert (read.version, read.variant) == (expected.version, expected.variant)
            assert pickle.loads(pickle.dumps(read)) == expected  # noqa: S301 -- our own bytes
            assert copy.deepcopy(read) == expected
            assert {expected: 1}[read] == 1

    def test_a_uuid_given_is_returned_as_it_is(self) -> None:
        """PostgreSQL's driver gives its own `UUID`s: passed through."""
        given = uuid4()
        assert _uuid(given) is given

    @pytest.mark.parametrize("value", ["", "xyz", "-1", "1" + "0" * 32, "0x"])
    def test_a_value_that_is_no_128_bit_hex_is_refused(self, value: str) -> None:
        """As `UUID(int=int(value, 16))` would: a `ValueError`, never a malformed id."""
        with pytest.raises(ValueError):
            _uuid(value)
