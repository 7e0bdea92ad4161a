"""Which text `sessions_history` redacts as credential-like, and which it leaves alone
(R-T4): a table of positive cases, each with the part that must vanish and the part that
must stay, and a table of negative cases that must come back unchanged."""

from __future__ import annotations

import time

import pytest

from session_awareness.application.redaction import REDACTED, credential_name, redact

#: (text, the secret that must not survive, what must survive around it)
POSITIVE = [
    ("DB_PASSWORD=hunter2 psql", "hunter2", "DB_PASSWORD= psql"),
    ("POSTGRES_PASSWORD=Sup3r-S3cret!", "Sup3r-S3cret!", "POSTGRES_PASSWORD="),
    ("  MYSQL_ROOT_PASSWORD: rootpw123\n", "rootpw123", "MYSQL_ROOT_PASSWORD: "),
    ("SECRET_KEY=django-insecure-abc123", "django-insecure-abc123", "SECRET_KEY="),
    ("SESSION_SECRET='keyboard cat'", "keyboard cat", "SESSION_SECRET=''"),
    ("HF_TOKEN=hf_AbCdEfGhIjKlMnOpQrStUvWxYz12", "AbCdEfGhIjKlMnOp", "HF_TOKEN="),
    ("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCY", "wJalrXUtnFEMI", "aws_secret"),
    ('{"user": "ada", "password": "correct horse battery"}', "horse", '"user": "ada"'),
    ('{"command": "export DB_PASSWORD=\\"pw-9\\" && run"}', "pw-9", "&& run"),
    ("PGPASSWORD=s3cr3t pg_dump", "s3cr3t", "pg_dump"),
    ("const apiKey = 'abc123def456';", "abc123def456", "const apiKey"),
    ("X-Api-Key: 0123456789abcdef", "0123456789abcdef", "X-Api-Key: "),
    ("mysql --password hunter22 -u root", "hunter22", "-u root"),
    ("Password=Pa55word;Server=db", "Pa55word", "Server=db"),
    ("client_secret: 'zzz-yyy-xxx'", "zzz-yyy-xxx", "client_secret"),
    ("use sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz now", "AbCdEfGh", "use  now"),
    ("key sk-proj-AbCdEfGhIjKlMnOpQrStUv", "AbCdEfGh", "key "),
    ("ghp_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789", "AbCdEfGh", ""),
    ("slack xoxb-1234567890-abcdefghij", "1234567890", "slack "),
    ("id AKIAIOSFODNN7EXAMPLE", "IOSFODNN7", "id "),
    ("t eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NSJ9.c2lnbmF0dXJl", "eyJzdWIi", "t "),
    (
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\n-----END RSA PRIVATE KEY-----",
        "MIIEow",
        "",
    ),
    ("postgresql://gateway:s3cr3t!@db.internal/agents", "s3cr3t!", "gateway:"),
    ("redis://:hunter2@cache:6379", "hunter2", "@cache:6379"),
    ("Authorization: Bearer abc.DEF-123_456.789xyz", "DEF-123", "Authorization: Bearer "),
]

#: Text that carries no credential, though it may look close to one.
NEGATIVE = [
    "Stop — use the v2 pricing endpoint instead, v1 is being retired.",
    "I reset the password and the login works now; the token expired yesterday.",
    "Password reset: done. Tokens are rotated weekly.",
    "commit 3f2a9c41d0b7e8f6a5c4b3a2918f7e6d5c4b3a29\nAuthor: Ada <ada@example.com>",
    "a1b2c3d 2f9e8d7 Merge branch 'fix-tokens' (#41)",
    "session 7d1c9a52-3f0e-4c1a-9a57-2b7f3e0c6a11 resumed",
    '{"input_tokens": 1234, "max_tokens": 4096, "sessionKey": "agent:main:worker"}',
    "password_file: /run/secrets/db",
    "if password == expected: return True",
    '{"password": null, "token": "${API_TOKEN}"}',
    "a basic understanding of bearer authentication helps",
    "see https://example.com/docs and risk-assessment-framework-v2",
    "DB_PASSWORD=[REDACTED]",
]


class TestRedactionTable:
    @pytest.mark.parametrize(("text", "secret", "kept"), POSITIVE)
    def test_a_credential_is_redacted_and_its_context_kept(
        self, text: str, secret: str, kept: str
    ) -> None:
        """R-T4: each family is redacted; the key's name and the text around stay."""
        (out,), redacted = redact([text])
        assert redacted, text
        assert secret not in out and REDACTED in out
        assert out.replace(REDACTED, "").find(kept) >= 0, out

    @pytest.mark.parametrize("text", NEGATIVE)
    def test_text_without_a_credential_is_left_alone(self, text: str) -> None:
        """R-T4: prose, hashes, UUIDs and near misses are not secrets."""
        assert redact([text]) == ([text], False)


class TestCredentialNames:
    @pytest.mark.parametrize(
        "name",
        ["DB_PASSWORD", "PGPASSWORD", "SECRET_KEY", "SECRET_KEY_BASE", "HF_TOKEN", "accessToken",
         "aws_secret_access_key", "apiKey", "MYSQL_PWD", "db.pass", "credentials"],
    )  # fmt: skip
    def test_credential_names(self, name: str) -> None:
        """R-T4: the name's last word says it holds a credential."""
        assert credential_name(name)

    @pytest.mark.parametrize(
        "name",
        ["max_tokens", "password_file", "sessionKey", "tokenizer", "keyword", "bypass", "key"],
    )
    def test_names_that_only_mention_one(self, name: str) -> None:
        """R-T4: a word inside a longer name does not make it a credential's."""
        assert not credential_name(name)


def test_a_large_text_is_scanned_quickly() -> None:
    """R-T4: redaction stays linear on a megabyte of hint-laden text (no backtracking blow-up)."""
    text = "key=value token pass secret " * 40_000
    started = time.perf_counter()
    redact([text])
    assert time.perf_counter() - started < 5
