"""The rating study's database: SQLite through the standard library, one file, schema versioned.

Why SQLite: a study outlives any one server process, several raters write at once, and a server
may be killed at any moment. Each submission is one `BEGIN IMMEDIATE` transaction (writers queue,
none overwrites another) committed before the browser is told "saved", in WAL mode with
`synchronous=FULL`, so a rating the browser saw acknowledged survives a SIGKILL or a power cut.

Ratings are never updated in place: every submission appends rows (`ratings`), and a rater's
current rating of a story and aspect is the row with the highest id. Each submission carries a
client-made id; the pair (rater, submission id) is unique, so a replayed request adds nothing.

The schema version is SQLite's `user_version`; `MIGRATIONS[v]` lifts a database from v to v + 1.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from generate.common.errors import UsageError

SCHEMA_VERSION = 1
_SCHEMA_V1 = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE stories (
    sid TEXT PRIMARY KEY,          -- opaque id: the only story id the browser ever sees
    position INTEGER NOT NULL UNIQUE,
    run TEXT NOT NULL, story_id TEXT NOT NULL, model TEXT, prompt_sha256 TEXT NOT NULL,
    prompt TEXT NOT NULL, text TEXT NOT NULL,
    judge TEXT NOT NULL,           -- JSON {aspect: judge score or null}
    verdicts TEXT NOT NULL         -- JSON {automatic verdict key: 0/1 or null}
);
CREATE TABLE raters (
    name TEXT PRIMARY KEY, token TEXT NOT NULL UNIQUE, seed INTEGER NOT NULL, created TEXT NOT NULL
);
CREATE TABLE queue (
    rater TEXT NOT NULL REFERENCES raters(name), position INTEGER NOT NULL,
    sid TEXT NOT NULL REFERENCES stories(sid),
    PRIMARY KEY (rater, position), UNIQUE (rater, sid)
);
CREATE TABLE ratings (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    rater TEXT NOT NULL REFERENCES raters(name), sid TEXT NOT NULL REFERENCES stories(sid),
    aspect TEXT NOT NULL, value INTEGER NOT NULL, submission TEXT NOT NULL,
    created TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    UNIQUE (rater, submission, aspect)
);
CREATE INDEX ratings_current ON ratings (rater, sid, aspect, id);
"""
MIGRATIONS: dict[int, str] = {0: _SCHEMA_V1}


@dataclass(frozen=True)
class Submitted:
    """What a submission did: `replayed` when the same submission id had already been stored."""

    replayed: bool
    rated: int  # stories of the rater's queue with a current rating, after this submission
    total: int


class Conflict(Exception):
    """A submission id reused with other content: refused, nothing written."""


def connect(path: str | Path) -> sqlite3.Connection:
    """A connection in autocommit mode (transactions are explicit), WAL, full sync, foreign keys."""
    conn = sqlite3.connect(str(path), timeout=30.0, isolation_level=None, check_same_thread=False)
    conn.row_factory = sqlite3.Row
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("PRAGMA foreign_keys=ON")
    return conn


@contextmanager
def transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One write transaction, taken at once (`BEGIN IMMEDIATE`): committed, or rolled back whole."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def open_db(path: str | Path) -> sqlite3.Connection:
    """Open (creating or migrating) a study database.

    Raises:
        UsageError: a file that is not SQLite, or a schema newer than this code.
    """
    try:
        conn = connect(path)
        version = conn.execute("PRAGMA user_version").fetchone()[0]
    except sqlite3.DatabaseError as exc:
        raise UsageError(f"{path}: not a rating database ({exc})") from None
    if version > SCHEMA_VERSION:
        raise UsageError(f"{path}: schema version {version} is newer than this code's ({SCHEMA_VERSION})")
    while version < SCHEMA_VERSION:
        with transaction(conn):
            for statement in MIGRATIONS[version].split(";"):
                if statement.strip():
                    conn.execute(statement)
            version += 1
            conn.execute(f"PRAGMA user_version = {version}")
    return conn


def get_meta(conn: sqlite3.Connection) -> dict:
    return {row["key"]: json.loads(row["value"]) for row in conn.execute("SELECT key, value FROM meta")}


def put_meta(conn: sqlite3.Connection, values: dict) -> None:
    conn.executemany("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
                     [(k, json.dumps(v, sort_keys=True)) for k, v in values.items()])


def rater_by_token(conn: sqlite3.Connection, token: str) -> str | None:
    row = conn.execute("SELECT name FROM raters WHERE token = ?", (token,)).fetchone()
    return row["name"] if row else None


def in_queue(conn: sqlite3.Connection, rater: str, sid: str) -> bool:
    return conn.execute("SELECT 1 FROM queue WHERE rater = ? AND sid = ?", (rater, sid)).fetchone() is not None


def current(conn: sqlite3.Connection, rater: str | None = None) -> list[sqlite3.Row]:
    """The current rating of every (rater, story, aspect): the last one submitted."""
    return conn.execute(
        "SELECT r.rater, r.sid, r.aspect, r.value FROM ratings r JOIN ("
        "  SELECT MAX(id) AS id FROM ratings WHERE ?1 IS NULL OR rater = ?1 GROUP BY rater, sid, aspect"
        ") last ON r.id = last.id ORDER BY r.rater, r.sid, r.aspect", (rater,)).fetchall()


def _progress(conn: sqlite3.Connection, rater: str, aspects: int) -> tuple[int, int]:
    total = conn.execute("SELECT COUNT(*) FROM queue WHERE rater = ?", (rater,)).fetchone()[0]
    rated = conn.execute(
        "SELECT COUNT(*) FROM (SELECT sid FROM ratings WHERE rater = ? GROUP BY sid "
        "HAVING COUNT(DISTINCT aspect) >= ?)", (rater, aspects)).fetchone()[0]
    return rated, total


def submit(conn: sqlite3.Connection, rater: str, sid: str, submission: str, values: dict[str, int],
           aspects: int) -> Submitted:
    """Store one rater's rating of one story (every aspect at once), in one transaction.

    The caller has validated rater, story and values. A submission id seen before with the same
    values changes nothing (`replayed`); with other values it raises `Conflict` and writes nothing.
    """
    with transaction(conn):
        stored = {row["aspect"]: (row["sid"], row["value"]) for row in conn.execute(
            "SELECT sid, aspect, value FROM ratings WHERE rater = ? AND submission = ?", (rater, submission))}
        if stored:
            if stored != {a: (sid, v) for a, v in values.items()}:
                raise Conflict(f"submission {submission} was already stored with other content")
        else:
            conn.executemany("INSERT INTO ratings (rater, sid, aspect, value, submission) VALUES (?, ?, ?, ?, ?)",
                             [(rater, sid, a, v, submission) for a, v in values.items()])
        rated, total = _progress(conn, rater, aspects)
    return Submitted(bool(stored), rated, total)
