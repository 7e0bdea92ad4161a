"""The read models (ADR 002), written once for both backends, and each backend on top.

Shared: `schema` (each table from one column list), `dialect` (how a backend spells the
SQL), `writes` (the projection's row changes as statements, one at a time), `bulk` (the same
end state in a few `executemany`s: rebuilds and large saves), `queries` (the `ReadModel`
port), `session_state` (`changesSince` in one statement), `store` (all of it over a
backend's connections) and `audit` (the scratch copy an audit rebuilds and compares).

On top, one module per backend, each extending the library's application recorder:
`sqlite` (with `sqlite_audit`) and `postgres` (with `postgres_audit`, and
`pg_round_trips`, its own two-round-trip write path, ADR 013).
"""
