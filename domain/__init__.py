"""The domain model of session-awareness: sessions, their signal log, and watch cursors.

Nothing here reads the wall clock, touches storage or logs: time arrives with each command.
"""
