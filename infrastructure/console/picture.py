"""The watches picture: watchers on the left, targets on the right, one line per cursor,
laid out by the server as plain numbers an SVG template draws (no script, R-O1)."""

from __future__ import annotations

from dataclasses import dataclass

from session_awareness.infrastructure.console.cursors import Edge
from session_awareness.infrastructure.console.views import session_href

#: Edges drawn at most; the table below the picture lists them all.
MOST_EDGES = 300
NODE_WIDTH, NODE_HEIGHT, GAP, TOP = 330, 34, 50, 40
LEFT_X, RIGHT_X = 10, 700
WIDTH = RIGHT_X + NODE_WIDTH + 10
#: Characters of a key drawn in a node; the whole key is its tooltip.
KEY_CHARS = 42


@dataclass(frozen=True)
class Node:
    key: str
    text: str
    href: str
    x: int
    y: int


@dataclass(frozen=True)
class Line:
    edge: Edge
    x1: int
    y1: int
    x2: int
    y2: int

    #: Where along the line its label sits: near the target, where lines fan out.
    LABEL_AT = 0.6

    @property
    def label_x(self) -> int:
        return round(self.x1 + (self.x2 - self.x1) * self.LABEL_AT)

    @property
    def label_y(self) -> int:
        return round(self.y1 + (self.y2 - self.y1) * self.LABEL_AT) - 6

    @property
    def label(self) -> str:
        return f"L {self.edge.acknowledged} · N {self.edge.notified} · M {self.edge.material}"


@dataclass(frozen=True)
class Picture:
    nodes: list[Node]
    lines: list[Line]
    width: int
    height: int
    left_out: int


def picture(edges: list[Edge]) -> Picture:
    """Where each watcher, target and cursor goes."""
    drawn = edges[:MOST_EDGES]
    watchers = sorted({e.watcher for e in drawn})
    targets = sorted({(e.target, e.target_agent) for e in drawn}, key=lambda t: (t[0], t[1] or ""))
    left = {key: _y(i) for i, key in enumerate(watchers)}
    right = {pair: _y(i) for i, pair in enumerate(targets)}
    nodes = [Node(k, _short(k), session_href(k), LEFT_X, y) for k, y in left.items()] + [
        Node(k, _short(k), session_href(k, agent), RIGHT_X, y) for (k, agent), y in right.items()
    ]
    mid = NODE_HEIGHT // 2
    lines = [
        Line(e, LEFT_X + NODE_WIDTH, left[e.watcher] + mid, RIGHT_X,
             right[e.target, e.target_agent] + mid)
        for e in drawn
    ]  # fmt: skip
    rows = max(len(watchers), len(targets), 1)
    return Picture(nodes, lines, WIDTH, TOP + rows * GAP, len(edges) - len(drawn))


def _y(index: int) -> int:
    return TOP + index * GAP


def _short(key: str) -> str:
    return key if len(key) <= KEY_CHARS else key[: KEY_CHARS - 1] + "…"
