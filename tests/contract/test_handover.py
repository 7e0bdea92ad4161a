"""Hand over, then acknowledge (R-N8, ADR 047): the notices read to be handed on stay pending
until their acknowledgement, which takes exactly the notices handed over that are still the
ones shown, stored as an ordinary drain (ADR 024)."""

from __future__ import annotations

import pytest

from session_awareness.application import SessionAwareness, UnknownSessionError
from session_awareness.domain.drains import Drains
from session_awareness.domain.keys import drains_id
from tests.conftest import ServiceFactory
from tests.contract.helpers import CHILD, MANAGER, OTHER, cursor, notice, restart, spawn


def stored_drains(svc: SessionAwareness) -> list[type]:
    """The classes of the manager's stored `Drains` events, oldest first."""
    return [type(e) for e in svc.store.repository.event_store.get(drains_id(MANAGER))]


class TestHandOverThenAcknowledge:
    def test_a_hand_over_acknowledges_nothing_until_it_is_acknowledged(
        self, svc: SessionAwareness
    ) -> None:
        """R-N8: reading the notices to hand them on leaves them pending (a hand-over that
        fails shows them again); the acknowledgement drains them as a drain does (R-N3)."""
        spawn(svc)
        svc.record_human_direct_message(CHILD, channel="telegram")  # 2: opens
        handover = svc.hand_over_notices(MANAGER)
        assert handover.notices == (notice(CHILD, 1),)
        assert svc.pending_notices(MANAGER) == [notice(CHILD, 1)]
        assert svc.hand_over_notices(MANAGER) == handover  # the next try hands the same over

        assert svc.acknowledge_handed(MANAGER, handover) == [notice(CHILD, 1)]
        assert svc.pending_notices(MANAGER) == []
        assert cursor(svc, MANAGER, CHILD) == (2, 2, 2)
        assert svc.acknowledge_handed(MANAGER, handover) == []  # a repeat acknowledges nothing
        assert svc.audit().clean

    def test_material_that_arrives_before_the_acknowledgement_opens_a_fresh_notice(
        self, svc: SessionAwareness
    ) -> None:
        """R-N8, R-N3: the notice handed over covers its N; a change recorded between the
        read and the acknowledgement moves only M, so the acknowledgement leaves one fresh
        notice for it, pending."""
        spawn(svc)
        svc.record_human_direct_message(CHILD, channel="telegram")  # 2: opens
        handover = svc.hand_over_notices(MANAGER)
        svc.record_goal_changed(CHILD, summary="goal updated")  # 3: M only, N frozen
        assert svc.acknowledge_handed(MANAGER, handover) == [notice(CHILD, 1)]
        assert svc.pending_notices(MANAGER) == [notice(CHILD, 2)]
        assert cursor(svc, MANAGER, CHILD) == (2, 3, 3)

    def test_a_notice_opened_after_the_hand_over_stays_pending(self, svc: SessionAwareness) -> None:
        """R-N8: a cursor that became pending after the read was never handed over, so the
        acknowledgement leaves it pending, untouched."""
        spawn(svc)
        spawn(svc, child=OTHER, run="run-2")
        svc.record_human_direct_message(CHILD, channel="telegram")
        handover = svc.hand_over_notices(MANAGER)
        svc.record_human_direct_message(OTHER, channel="telegram")  # opens after the read
        assert svc.acknowledge_handed(MANAGER, handover) == [notice(CHILD, 1)]
        assert svc.pending_notices(MANAGER) == [notice(OTHER, 1)]
        assert cursor(svc, MANAGER, OTHER) == (1, 2, 2)

    def test_a_notice_that_moved_on_since_the_hand_over_stays_pending(
        self, svc: SessionAwareness
    ) -> None:
        """R-N8: when the handed notice was drained elsewhere and a fresh one opened (N moved
        on), the acknowledgement leaves the fresh one pending: it was never shown."""
        spawn(svc)
        svc.record_human_direct_message(CHILD, channel="telegram")  # 2
        handover = svc.hand_over_notices(MANAGER)
        svc.record_goal_changed(CHILD, summary="goal updated")  # 3
        assert svc.drain_notices(MANAGER) == [notice(CHILD, 1)]  # reopens (L = 2, N = 3)
        assert svc.acknowledge_handed(MANAGER, handover) == []
        assert svc.pending_notices(MANAGER) == [notice(CHILD, 2)]

    def test_a_re_delivered_notice_is_shown_again_rather_than_acknowledged_unseen(
        self, svc: SessionAwareness, open_svc: ServiceFactory
    ) -> None:
        """R-N8 with R-N6: a sweep that raised the notice's N to M after it was handed over
        made it another notice (it covers more); the acknowledgement leaves it pending, to be
        handed over again, a repeat rather than a loss."""
        spawn(svc)
        svc.record_human_direct_message(CHILD, channel="telegram")  # 2: N = 2
        handover = svc.hand_over_notices(MANAGER)
        svc.record_goal_changed(CHILD, summary="goal updated")  # 3: M
        again = restart(open_svc)  # the sweep re-delivers: N = 3
        assert cursor(again, MANAGER, CHILD) == (1, 3, 3)
        assert again.acknowledge_handed(MANAGER, handover) == []
        assert again.pending_notices(MANAGER) == [notice(CHILD, 1)]

    def test_the_acknowledgement_is_stored_as_a_drain(self, svc: SessionAwareness) -> None:
        """R-N8, ADR 024: an acknowledgement stores one `Drains` event, the same shape a drain
        stores, so stores written before it replay unchanged; a rebuild matches (R-R2)."""
        spawn(svc)
        spawn(svc, child=OTHER, run="run-2")
        for child in (CHILD, OTHER):
            svc.record_human_direct_message(child, channel="telegram")
        svc.acknowledge_handed(MANAGER, svc.hand_over_notices(MANAGER))
        svc.record_human_direct_message(CHILD, channel="telegram")
        svc.acknowledge_handed(MANAGER, svc.hand_over_notices(MANAGER))
        assert stored_drains(svc) == [Drains.Started, Drains.Drained]
        assert svc.pending_notices(MANAGER) == []
        assert svc.audit().clean

    def test_a_key_never_seen_is_the_callers_mistake(self, svc: SessionAwareness) -> None:
        """R-L9: a hand-over for a key the service has never seen raises
        `UnknownSessionError`, as a drain does; so does acknowledging a hand-over under such
        a key, and nothing is acknowledged for the key it was read for."""
        spawn(svc)
        svc.record_human_direct_message(CHILD, channel="telegram")
        with pytest.raises(UnknownSessionError):
            svc.hand_over_notices("agent:main:nobody")
        handover = svc.hand_over_notices(MANAGER)
        with pytest.raises(UnknownSessionError):
            svc.acknowledge_handed("agent:main:nobody", handover)
        assert svc.pending_notices(MANAGER) == [notice(CHILD, 1)]

    def test_an_empty_hand_over_under_a_key_never_seen_is_the_callers_mistake(
        self, svc: SessionAwareness
    ) -> None:
        """R-L9: acknowledging an empty hand-over checks the key as any other does: a key
        the service has never seen raises `UnknownSessionError`, and a known one with
        nothing handed acknowledges nothing."""
        spawn(svc)
        empty = svc.hand_over_notices(MANAGER)
        assert empty.notices == ()
        with pytest.raises(UnknownSessionError):
            svc.acknowledge_handed("agent:main:nobody", empty)
        assert svc.acknowledge_handed(MANAGER, empty) == []
