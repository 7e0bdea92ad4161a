"""The CLI's name and exit codes, in a module of their own: the entry point needs them before
it knows which command runs, and imports nothing heavier."""

PROG = "session-awareness"
EXIT_OK, EXIT_FAILURE, EXIT_BAD_INPUT = 0, 1, 2
#: The shell's codes for a process ended by SIGINT and by SIGPIPE (128 + the signal number).
EXIT_INTERRUPTED, EXIT_BROKEN_PIPE = 130, 141
