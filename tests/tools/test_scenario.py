"""A coordinator works through the tools alone: it sends to a worker by label and watches it,
a human steps in, and it reconciles exactly (R-W2, R-N1, R-N3, R-S1, R-T1)."""

from __future__ import annotations

import json

from session_awareness.application import SessionAwareness
from tests.conftest import FakeClock, RecordingWaker
from tests.contract.helpers import notice
from tests.tools.conftest import RecordingDispatcher, WorldFactory
from tests.tools.helpers import ms

COORDINATOR = "agent:main:coordinator"
WORKER = "agent:main:worker"


def call(svc: SessionAwareness, name: str, arguments: str) -> object:
    """One tool call as a host makes it: JSON text in from the agent, JSON text back out."""
    answer = svc.tools.call(name, json.loads(arguments), caller=COORDINATOR)
    return json.loads(json.dumps(answer))


class TestCoordinatorScenario:
    def test_a_watching_coordinator_gets_one_notice_and_reconciles_the_human_message(
        self,
        open_world: WorldFactory,
        clock: FakeClock,
        waker: RecordingWaker,
        dispatcher: RecordingDispatcher,
    ) -> None:
        """R-W2, R-N1, R-S1: send with watch, a human steps in, one notice, the exact delta."""
        svc = open_world(visibility="agent")
        svc.open_session(COORDINATOR)
        svc.open_session(WORKER, label="builder")
        svc.record_goal_changed(WORKER, summary="goal created")  # history before the watch

        # The coordinator delegates by label and asks to be told about interventions.
        sent = call(
            svc, "sessions_send", '{"label": "builder", "message": "build it", "watch": true}'
        )
        assert sent == {"status": "accepted", "sessionKey": WORKER, "watched": True}
        assert dispatcher.sent == [(COORDINATOR, WORKER, "build it")]
        assert svc.pending_notices(COORDINATOR) == []  # earlier history never notifies

        # A human messages the worker directly.
        clock.advance(minutes=1)
        svc.record_human_direct_message(WORKER, channel="telegram")

        # The coordinator is woken once and its turn drains exactly one notice.
        assert waker.woken == [COORDINATOR]
        assert svc.drain_notices(COORDINATOR) == [notice(WORKER, 1)]

        # It reconciles with the numbers the notice gave it.
        status = call(svc, "session_status", f'{{"sessionKey": "{WORKER}", "changesSince": 1}}')
        assert status == {
            "sessionKey": WORKER,
            "stateVersion": 2,
            "stateChanges": {
                "events": [
                    {
                        "sequence": 2,
                        "kind": "human_direct_message",
                        "actorType": "human",
                        "occurredAt": ms(6),
                        "summary": "human message via telegram",
                        "payload": {"channel": "telegram"},
                    }
                ],
                "truncated": False,
                "earliestAvailableSequence": 1,
                "historyGap": False,
            },
        }

        # Reading the status moved no cursor; the drain acknowledged, so nothing remains (R-N3).
        assert svc.drain_notices(COORDINATOR) == []
        assert waker.woken == [COORDINATOR]
