"""Search over every stored message (sessions.search), kept up to date by the database itself.

The append path's INSERT (sessions.statements) is left as it is: on PostgreSQL the search
vector is a generated column, computed by the server from `content`, with a GIN index; on
SQLite an FTS5 table is filled by triggers on insert and delete. The searchable text of a
message is every string (and number) in its content except the structural ones (block types,
provenance, signatures, media types, base64 data), so tool inputs and results are searchable
as well as text.
"""

from django.db import migrations

# Keys whose strings are structure, not anything a person would search for.
SKIPPED_KEYS = ("type", "provenance", "signature", "media_type", "data")
_SKIPPED_SQL = ", ".join(f"'{key}'" for key in SKIPPED_KEYS)

# The vector is of the runs of letters and digits only: the parser would keep
# `Repo.Migrations.AddState.up/0` or `src/app.py` as one token, and a word inside it would not
# be found. A tsvector holds at most 1 MB: it reads the first 200,000 characters of a message
# (about 660 KB of vector in the worst case, every token unique), so no append can fail on it.
FTS_CHARS = 200_000
# A vector counts word positions up to 16,383 only, so words in order (a phrase, an identifier)
# are told from the positions only in a shorter message; a message whose text may pass that
# (16,383 one-letter words and their separators) carries this lexeme, which no text can make
# (text is cut into letters and digits), and sessions.search checks its text instead.
LONG_MARK = "_long_"
LONG_CHARS = 32_000
# PL/pgSQL, not SQL functions: PL/pgSQL keeps its statements' plans for the connection's life,
# where a SQL function with a recursive query is planned again by every INSERT that calls it
# (measured: 0.8 ms against 0.2 ms an append).
POSTGRES_FORWARD = [
    f"""
    CREATE OR REPLACE FUNCTION compactor_search_text(doc jsonb) RETURNS text
    LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
    DECLARE
      found text;
    BEGIN
      WITH RECURSIVE walk(key, value) AS (
        SELECT NULL::text, doc
        UNION ALL
        SELECT child.key, child.value FROM walk CROSS JOIN LATERAL (
          SELECT e.key, e.value FROM jsonb_each(
            CASE WHEN jsonb_typeof(walk.value) = 'object' THEN walk.value ELSE '{{}}'::jsonb END) e
          UNION ALL
          SELECT NULL::text, a.value FROM jsonb_array_elements(
            CASE WHEN jsonb_typeof(walk.value) = 'array' THEN walk.value ELSE '[]'::jsonb END) a
        ) child
      )
      SELECT coalesce(string_agg(value #>> '{{}}', E'\n'), '') INTO found FROM walk
      WHERE jsonb_typeof(value) IN ('string', 'number') AND coalesce(key, '') NOT IN ({_SKIPPED_SQL});
      RETURN found;
    END
    $$
    """,
    f"""
    CREATE OR REPLACE FUNCTION compactor_search_vector(doc jsonb) RETURNS tsvector
    LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
    DECLARE
      body text := {{schema}}.compactor_search_text(doc);
    BEGIN
      RETURN to_tsvector('simple'::regconfig, regexp_replace(left(body, {FTS_CHARS}), '[^[:alnum:]]+', ' ', 'g'))
        || CASE WHEN length(body) > {LONG_CHARS} THEN '{LONG_MARK}'::tsvector ELSE ''::tsvector END;
    END
    $$
    """,
    """
    ALTER TABLE agent_sessions_message ADD COLUMN search_vector tsvector
      GENERATED ALWAYS AS (compactor_search_vector(content)) STORED
    """,
    "CREATE INDEX message_search_vector ON agent_sessions_message USING gin (search_vector)",
]
POSTGRES_BACKWARD = [
    "DROP INDEX IF EXISTS message_search_vector",
    "ALTER TABLE agent_sessions_message DROP COLUMN IF EXISTS search_vector",
    "DROP FUNCTION IF EXISTS compactor_search_vector(jsonb)",
    "DROP FUNCTION IF EXISTS compactor_search_text(jsonb)",
]

_SQLITE_TEXT = f"""
  SELECT coalesce(group_concat(value, char(10)), '') FROM json_tree({{doc}})
  WHERE type IN ('text', 'integer', 'real') AND coalesce(key, '') NOT IN ({_SKIPPED_SQL})
"""
# The trigram tokenizer makes every term a case-insensitive substring match (identifiers with
# punctuation, hashes, paths) and a quoted phrase an exact substring, ranked by bm25.
SQLITE_FORWARD = [
    "CREATE VIRTUAL TABLE message_search USING fts5(body, tokenize = 'trigram')",
    f"""
    CREATE TRIGGER message_search_insert AFTER INSERT ON agent_sessions_message BEGIN
      INSERT INTO message_search(rowid, body) VALUES (NEW.id, ({_SQLITE_TEXT.format(doc="NEW.content")}));
    END
    """,
    """
    CREATE TRIGGER message_search_delete AFTER DELETE ON agent_sessions_message BEGIN
      DELETE FROM message_search WHERE rowid = OLD.id;
    END
    """,
    f"""
    INSERT INTO message_search(rowid, body)
      SELECT m.id, ({_SQLITE_TEXT.format(doc="m.content")}) FROM agent_sessions_message m
    """,
]
SQLITE_BACKWARD = [
    "DROP TRIGGER IF EXISTS message_search_delete",
    "DROP TRIGGER IF EXISTS message_search_insert",
    "DROP TABLE IF EXISTS message_search",
]


def _run(statements: dict[str, list[str]]):
    def run(apps, schema_editor):
        connection = schema_editor.connection
        schema = ""
        if connection.vendor == "postgresql":
            # One function calls the other by its schema's name: a restore (pg_restore runs with
            # an empty search_path) computes the generated column through it.
            with connection.cursor() as cursor:
                cursor.execute("SELECT current_schema()")
                schema = connection.ops.quote_name(cursor.fetchone()[0])
        for sql in statements.get(connection.vendor, []):
            schema_editor.execute(sql.replace("{schema}", schema))

    return run


class Migration(migrations.Migration):
    dependencies = [
        ("agent_sessions", "0009_message_provenance"),
    ]

    operations = [
        migrations.RunPython(
            _run({"postgresql": POSTGRES_FORWARD, "sqlite": SQLITE_FORWARD}),
            _run({"postgresql": POSTGRES_BACKWARD, "sqlite": SQLITE_BACKWARD}),
        ),
    ]
