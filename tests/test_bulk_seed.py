"""`bench.bulk_seed` writes exactly what the service would: a store seeded by replicating
template families with COPY audits clean and reads as seeded (issue 39, item 6; R-R2)."""

from __future__ import annotations

import uuid

import psycopg

from bench import bulk_seed, scale
from session_awareness.application import open_service
from session_awareness.testing.pgcluster import PostgresCluster

#: Two rounds of the templates and a few more: every template copied, some twice.
FAMILIES = 2 * bulk_seed.TEMPLATES + 3


def test_a_bulk_seeded_store_audits_clean_and_reads_as_seeded(postgres: PostgresCluster) -> None:
    """R-R2: replaying every event copied reproduces every read-model row copied (ids, keys,
    agent ids, notification ids and positions substituted), nothing violates a rule, and
    the service's own reads of each family agree with the seeded shape."""
    name = f"bulk_{uuid.uuid4().hex[:12]}"
    url = postgres.create_database(name)
    template = postgres.create_database(f"{name}_template")
    events, _ = bulk_seed.bulk_seed(url, url, template, FAMILIES)
    with open_service(url, maintenance="manual") as svc:
        report = svc.audit()
        assert report.clean, report.as_dict()
        assert report.events == events
        sessions = FAMILIES * (scale.CHILDREN + 1)
        assert len(svc.sessions_list()) == sessions
        scale.check_reads(svc, sessions)  # raises on a family that does not read as seeded
        drained = [n for n in range(FAMILIES) if n % bulk_seed.TEMPLATES == 0]
        for number in range(FAMILIES):  # template 0 drained its first child's notice once:
            notices = svc.pending_notices(scale.parent(number))  # reopened from there (R-N3)
            since = int(notices[0].rsplit(" ", 1)[1].rstrip("."))
            assert since == (2 if number in drained else 1), (number, notices)
            assert len(notices) == scale.CHILDREN
    with psycopg.connect(url) as conn:
        last = conn.execute("SELECT max(notification_id) FROM sessionawareness_events").fetchone()
        assert last == (events,)
