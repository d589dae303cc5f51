#!/usr/bin/env bash
# A consumer that mirrors a PostgreSQL table into Redis with psql and redis-cli, through
# PostgreSQL's logical decoding (the test_decoding plugin), and that catches up after a
# restart in paced chunks.
#
# The replication slot $SLOT is its position: changes stay in the slot until the
# consumer advances it, and it advances only past what Redis has acknowledged. A crash
# anywhere re-applies at most the last batch (a mirror's writes are idempotent).
#
# Environment: PGHOST, PGPORT, PGUSER, PGPASSWORD, PGDATABASE (read by psql itself, so
# no password is on a command line), REDIS_HOST, REDIS_PORT, REDISCLI_AUTH (read by
# redis-cli; empty: no password), SLOT (a fresh name per run), TABLE (schema.table),
# PREFIX (Redis keys are PREFIX<key>, hashes with fields value and version).
#
# FAST_CATCH_UP=1 plants a bug: a restarted consumer reads its backlog with
# pg_logical_slot_get_changes, which moves the slot past the backlog before Redis has it
# ("one round trip less"). A crash while it catches up, in the second or so after a
# restart, loses the rest of the backlog for good; a crash at any other time loses
# nothing.
set -u
: "${PGHOST:?}" "${PGPORT:?}" "${REDIS_HOST:?}" "${REDIS_PORT:?}" "${SLOT:?}" "${TABLE:?}" "${PREFIX:?}"
export PGCONNECT_TIMEOUT=3
[ -n "${REDISCLI_AUTH:-}" ] || unset REDISCLI_AUTH  # an empty one would send AUTH ""

q() { psql -X -q -At -v ON_ERROR_STOP=1 -F '|' "$@"; }

restarted=0
until
    if [ "$(q -c "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '$SLOT'")" = 1 ]; then
        restarted=1
    else
        q -c "SELECT pg_create_logical_replication_slot('$SLOT', 'test_decoding')" >/dev/null
    fi
do sleep 0.5; done

# One row per change, fields split by |: lsn, then for a row of $TABLE its key, value
# (\N: NULL) and version. $1: peek (leave the slot where it is) or get (move it past
# the rows returned); $2: up to that lsn (NULL: no limit); $3: at most that many
# changes (whole transactions; NULL: no limit).
changes() {
    echo "
SELECT lsn,
       coalesce((regexp_match(data, ' key\[text\]:''([^'']*)'''))[1], ''),
       coalesce((regexp_match(data, ' value\[text\]:''([^'']*)'''))[1], '\N'),
       coalesce((regexp_match(data, ' version\[bigint\]:([0-9]+)'))[1], '')
  FROM pg_logical_slot_$1_changes('$SLOT', $2, ${3:-NULL})
 WHERE data LIKE 'table $TABLE:%' OR data LIKE 'COMMIT%'"
}

# Redis commands for a batch of rows; sets $last to the batch's last lsn.
commands_of() {
    local lsn key value version out=""
    while IFS='|' read -r lsn key value version; do
        last=$lsn
        [ -z "$key" ] && continue
        if [ "$value" = '\N' ]; then
            out+="DEL \"$PREFIX$key\""$'\n'
        else
            out+="HSET \"$PREFIX$key\" value \"$value\" version $version"$'\n'
        fi
    done <<< "$1"
    commands=$out
}

# Until Redis has every command of $1 (--pipe fails unless each one was answered).
write_all() {
    [ -z "$1" ] && return
    until printf '%s' "$1" | redis-cli -h "$REDIS_HOST" -p "$REDIS_PORT" --no-auth-warning \
            --pipe --pipe-timeout 10 >/dev/null 2>&1; do
        echo "redis write failed; retrying the batch"
        sleep 0.5
    done
}

# Catching up after a restart: the backlog, up to where the WAL ended when it started
# again, read in one query (then the consumer says it is ready) and written to Redis in
# chunks of CHUNK rows, each waiting its turn (PACE seconds) so that the backlog never
# floods Redis while it serves live reads; the slot moves past the backlog once Redis
# has all of it.
CHUNK=10
PACE=0.1
if [ "$restarted" = 1 ]; then
    how=peek
    [ "${FAST_CATCH_UP:-0}" = 1 ] && how=get # the planted bug
    until backlog=$(q -c "$(changes $how "pg_current_wal_lsn()")"); do sleep 0.5; done
fi
echo "consumer ready (slot $SLOT, restarted=$restarted)"
if [ "$restarted" = 1 ]; then
    mapfile -t rows <<< "$backlog"
    last=""
    for ((i = 0; i < ${#rows[@]}; i += CHUNK)); do
        commands_of "$(printf '%s\n' "${rows[@]:i:CHUNK}")"
        sleep "$PACE"
        write_all "$commands"
    done
    if [ -n "$last" ] && [ "$how" = peek ]; then
        until q -c "SELECT pg_replication_slot_advance('$SLOT', greatest('$last'::pg_lsn + 1,
                    confirmed_flush_lsn)) FROM pg_replication_slots WHERE slot_name = '$SLOT'" >/dev/null
        do sleep 0.5; done
    fi
    echo "caught up"
fi

while true; do
    if ! batch=$(q -c "$(changes peek NULL 500)"); then sleep 0.5; continue; fi
    if [ -z "$batch" ]; then sleep 0.1; continue; fi
    last=""
    commands_of "$batch"
    write_all "$commands"
    # Past the batch's last commit: the next peek starts after it.
    # (Never behind the slot's position: an advance that succeeded unseen is no error.)
    until q -c "SELECT pg_replication_slot_advance('$SLOT', greatest('$last'::pg_lsn + 1,
                confirmed_flush_lsn)) FROM pg_replication_slots WHERE slot_name = '$SLOT'" >/dev/null
    do sleep 0.5; done
done
