#!/usr/bin/env bash
# A consumer that is not Python: it mirrors a PostgreSQL table into Redis with psql and
# redis-cli, through PostgreSQL's logical decoding (the test_decoding plugin).
#
# The replication slot $SLOT is its position: changes stay in the slot until the
# consumer advances it, and it advances only past what Redis has acknowledged. A
# crash anywhere re-applies at most the last batch (a mirror's writes are idempotent).
#
# Environment: PGDSN, REDIS_URL, SLOT (a fresh name per run), TABLE (schema.table),
# PREFIX (Redis keys are PREFIX<key>, hashes with fields value and version).
# PGDSN and REDIS_URL hold no password, since psql and redis-cli show their arguments
# to every local user (ps): psql finds it in PGPASSWORD, redis-cli in REDISCLI_AUTH,
# both set by driftlab in this script's environment, which only its own user reads.
# SKIP_AHEAD_ON_RESTART=1 plants a bug: a restarted consumer jumps to the end of the
# WAL "to catch up fast", and every change made while it was down is never mirrored.
set -u
: "${PGDSN:?}" "${PGPASSWORD:?}" "${REDIS_URL:?}" "${SLOT:?}" "${TABLE:?}" "${PREFIX:?}"
export PGCONNECT_TIMEOUT=3

q() { psql "$PGDSN" -X -q -At -v ON_ERROR_STOP=1 -F '|' "$@"; }

restarted=0
until
    if [ "$(q -c "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '$SLOT'")" = 1 ]; then
        restarted=1
    else
        q -c "SELECT pg_create_logical_replication_slot('$SLOT', 'test_decoding')" >/dev/null
    fi
do sleep 0.5; done

if [ "$restarted" = 1 ] && [ "${SKIP_AHEAD_ON_RESTART:-0}" = 1 ]; then
    until q -c "SELECT pg_replication_slot_advance('$SLOT', pg_current_wal_lsn())" >/dev/null
    do sleep 0.5; done
fi
echo "mirror ready (slot $SLOT, restarted=$restarted)"

# One row per change, fields split by |: lsn, then for a row of $TABLE its key, value (\N: NULL) and version.
CHANGES="
SELECT lsn,
       coalesce((regexp_match(data, ' key\[text\]:''([^'']*)'''))[1], ''),
       coalesce((regexp_match(data, ' value\[text\]:''([^'']*)'''))[1], '\N'),
       coalesce((regexp_match(data, ' version\[bigint\]:([0-9]+)'))[1], '')
  FROM pg_logical_slot_peek_changes('$SLOT', NULL, 500)
 WHERE data LIKE 'table $TABLE:%' OR data LIKE 'COMMIT%'"

while true; do
    if ! batch=$(q -c "$CHANGES"); then sleep 0.5; continue; fi
    if [ -z "$batch" ]; then sleep 0.1; continue; fi
    last=""
    commands=""
    while IFS='|' read -r lsn key value version; do
        last=$lsn
        [ -z "$key" ] && continue
        if [ "$value" = '\N' ]; then
            commands+="DEL \"$PREFIX$key\""$'\n'
        else
            commands+="HSET \"$PREFIX$key\" value \"$value\" version $version"$'\n'
        fi
    done <<< "$batch"
    if [ -n "$commands" ]; then
        # --pipe exits non-zero unless Redis answered every command without an error.
        if ! printf '%s' "$commands" | redis-cli -u "$REDIS_URL" --pipe --pipe-timeout 10 >/dev/null 2>&1; then
            echo "redis write failed; retrying the batch"
            sleep 0.5
            continue
        fi
    fi
    # Past the batch's last commit: the next peek starts after it.
    # (Never behind the slot's position: an advance that succeeded unseen is no error.)
    until q -c "SELECT pg_replication_slot_advance('$SLOT', greatest('$last'::pg_lsn + 1,
                confirmed_flush_lsn)) FROM pg_replication_slots WHERE slot_name = '$SLOT'" >/dev/null
    do sleep 0.5; done
done
