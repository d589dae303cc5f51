// Command orders-to-redis keeps one JSON document per order in Redis (the order's row
// joined with its lines) from PostgreSQL's logical decoding (the test_decoding plugin,
// read by SQL polling of a replication slot).
//
// The slot is its position at the source and the key PREFIX+"position" its position in
// Redis: a batch of whole source transactions is written in one MULTI/EXEC with the
// commit position it reaches, and only then is the slot moved past it. A crash anywhere
// leaves Redis at a transaction boundary; the transactions peeked again after a restart
// that Redis already has (at or before its position) are skipped.
//
// Environment: PGDSN (libpq's URL, no password: pgx reads PGPASSWORD), REDIS_ADDR
// (host:port), REDIS_PASSWORD (empty: none), SLOT (a fresh name per run), SCHEMA (of the
// tables orders and lines), PREFIX (documents are PREFIX+"order:"+id).
//
// ROW_BY_ROW=1 plants a bug: the batch is read with pg_logical_slot_get_changes, which
// moves the slot past it as it is read ("one round trip less"), and each row is written
// to Redis on its own as it comes. A crash between two rows of one transaction leaves
// half of it in Redis, a document the source never held, and the slot, already past
// the transaction, never sends the rest.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
)

// batchSize is how many changes one poll asks for; the slot returns whole transactions.
const batchSize = 500

type consumer struct {
	dsn, slot, prefix string
	tables            Tables
	pg                *pgx.Conn
	rdb               *redis.Client
}

// Txn is one source transaction of a batch: its changes of the two tables, in order.
type Txn struct {
	Commit  uint64 // the position of its COMMIT record
	Changes []Change
}

func main() {
	log.SetFlags(0)
	env := func(name string) string {
		v := os.Getenv(name)
		if v == "" && name != "REDIS_PASSWORD" {
			log.Fatalf("%s is not set: see the comment at the top of main.go", name)
		}
		return v
	}
	schema := env("SCHEMA")
	c := &consumer{
		dsn:    env("PGDSN"),
		slot:   env("SLOT"),
		prefix: env("PREFIX"),
		tables: Tables{Orders: schema + ".orders", Lines: schema + ".lines"},
		rdb: redis.NewClient(&redis.Options{
			Addr: env("REDIS_ADDR"), Password: env("REDIS_PASSWORD"),
			DialTimeout: 2 * time.Second, ReadTimeout: 3 * time.Second, WriteTimeout: 3 * time.Second,
			MaxRetries: -1, // the loop retries a whole batch, never half a transaction
		}),
	}
	rowByRow := os.Getenv("ROW_BY_ROW") == "1"
	var restarted bool
	retry("create the slot", func() (err error) { restarted, err = c.ensureSlot(); return err })
	fmt.Printf("consumer ready (slot %s, restarted=%v, row_by_row=%v)\n", c.slot, restarted, rowByRow)
	for {
		var err error
		if rowByRow {
			err = c.rowByRowBatch()
		} else {
			err = c.transactionalBatch()
		}
		if errors.Is(err, errIdle) {
			time.Sleep(100 * time.Millisecond)
		} else if err != nil {
			log.Printf("batch failed, retrying: %v", err)
			time.Sleep(500 * time.Millisecond)
		}
	}
}

var errIdle = errors.New("no change")

// retry calls f until it succeeds.
func retry(what string, f func() error) {
	for {
		err := f()
		if err == nil {
			return
		}
		log.Printf("%s failed, retrying: %v", what, err)
		time.Sleep(500 * time.Millisecond)
	}
}

func timeout() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 10*time.Second)
}

// conn is the PostgreSQL connection, opened again after an error closed it.
func (c *consumer) conn() (*pgx.Conn, error) {
	if c.pg != nil && !c.pg.IsClosed() {
		return c.pg, nil
	}
	ctx, cancel := timeout()
	defer cancel()
	pg, err := pgx.Connect(ctx, c.dsn)
	if err != nil {
		return nil, err
	}
	c.pg = pg
	return pg, nil
}

// query runs sql and returns its rows of text columns; an error drops the connection.
func (c *consumer) query(sql string, args ...any) ([][]string, error) {
	pg, err := c.conn()
	if err != nil {
		return nil, err
	}
	ctx, cancel := timeout()
	defer cancel()
	rows, err := pg.Query(ctx, sql, args...)
	if err != nil {
		pg.Close(context.Background())
		return nil, err
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) ([]string, error) {
		var vals []string
		for _, v := range r.RawValues() {
			vals = append(vals, string(v))
		}
		return vals, nil
	})
	if err != nil {
		pg.Close(context.Background())
	}
	return out, err
}

// ensureSlot creates the slot unless it exists; true: it existed (a restart).
func (c *consumer) ensureSlot() (bool, error) {
	rows, err := c.query("SELECT 1 FROM pg_replication_slots WHERE slot_name = $1", c.slot)
	if err != nil || len(rows) > 0 {
		return len(rows) > 0, err
	}
	_, err = c.query("SELECT 1 FROM pg_create_logical_replication_slot($1, 'test_decoding')", c.slot)
	return false, err
}

// changes reads the next batch: lsn and data of each row. how is "peek" (the slot
// stays) or "get" (the slot moves past what is returned).
func (c *consumer) changes(how string) ([][]string, error) {
	return c.query(fmt.Sprintf(`SELECT lsn::text, data FROM pg_logical_slot_%s_changes($1, NULL, $2,
		'skip-empty-xacts', '1', 'include-xids', '0')`, how), c.slot, batchSize)
}

// batch reads the next batch (how: as changes says) as its transactions and the
// position of its last COMMIT; errIdle when the slot holds nothing new.
func (c *consumer) batch(how string) ([]Txn, string, error) {
	rows, err := c.changes(how)
	if err != nil {
		return nil, "", err
	}
	if len(rows) == 0 {
		return nil, "", errIdle
	}
	txns, err := c.transactions(rows)
	return txns, rows[len(rows)-1][0], err
}

// transactions groups a batch's rows into its transactions, keeping the changes of
// the two tables.
func (c *consumer) transactions(rows [][]string) ([]Txn, error) {
	var txns []Txn
	var cur Txn
	for _, row := range rows {
		lsn, data := row[0], row[1]
		switch {
		case data == "BEGIN":
			cur = Txn{}
		case data == "COMMIT":
			pos, err := parseLSN(lsn)
			if err != nil {
				return nil, err
			}
			cur.Commit = pos
			txns = append(txns, cur)
		default:
			ch, ok, err := ParseChange(data)
			if err != nil {
				return nil, err
			}
			if ok && c.tables.KeyOf(ch) != "" {
				cur.Changes = append(cur.Changes, ch)
			}
		}
	}
	return txns, nil
}

// transactionalBatch applies the next batch of whole transactions in one MULTI/EXEC
// with the position they reach, then moves the slot past them.
func (c *consumer) transactionalBatch() error {
	txns, end, err := c.batch("peek")
	if err != nil {
		return err
	}
	retry("write the batch to redis", func() error { return c.write(txns) })
	// Never behind the slot's position: an advance that succeeded unseen is no error.
	_, err = c.query(`SELECT 1 FROM (SELECT pg_replication_slot_advance($1, greatest($2::pg_lsn,
		confirmed_flush_lsn)) FROM pg_replication_slots WHERE slot_name = $1) a`, c.slot, end)
	return err
}

// write applies the transactions Redis does not hold yet, and the position they reach,
// in one MULTI/EXEC.
func (c *consumer) write(txns []Txn) error {
	ctx, cancel := timeout()
	defer cancel()
	held, err := c.rdb.Get(ctx, c.prefix+"position").Uint64()
	if err != nil && !errors.Is(err, redis.Nil) {
		return err
	}
	var todo []Txn
	for _, t := range txns {
		if t.Commit > held {
			todo = append(todo, t)
		}
	}
	if len(todo) == 0 {
		return nil
	}
	docs, err := c.load(ctx, todo)
	if err != nil {
		return err
	}
	for _, t := range todo {
		for _, ch := range t.Changes {
			if err := c.tables.Apply(docs, ch); err != nil {
				return err
			}
		}
	}
	pipe := c.rdb.TxPipeline()
	for key, doc := range docs {
		if err := c.put(ctx, pipe, key, doc); err != nil {
			return err
		}
	}
	pipe.Set(ctx, c.prefix+"position", todo[len(todo)-1].Commit, 0)
	_, err = pipe.Exec(ctx)
	return err
}

// load reads the documents of every order the transactions touch.
func (c *consumer) load(ctx context.Context, txns []Txn) (Docs, error) {
	var keys []string
	docs := Docs{}
	for _, t := range txns {
		for _, ch := range t.Changes {
			k := c.tables.KeyOf(ch)
			if _, seen := docs[k]; !seen {
				docs[k] = nil
				keys = append(keys, k)
			}
		}
	}
	if len(keys) == 0 {
		return docs, nil
	}
	names := make([]string, len(keys))
	for i, k := range keys {
		names[i] = c.prefix + "order:" + k
	}
	vals, err := c.rdb.MGet(ctx, names...).Result()
	if err != nil {
		return nil, err
	}
	for i, v := range vals {
		if s, ok := v.(string); ok {
			var doc Order
			if err := json.Unmarshal([]byte(s), &doc); err != nil {
				return nil, fmt.Errorf("document %s: %w", names[i], err)
			}
			docs[keys[i]] = &doc
		}
	}
	return docs, nil
}

// put queues the write of one document (nil: its key removed).
func (c *consumer) put(ctx context.Context, r redis.Cmdable, key string, doc *Order) error {
	name := c.prefix + "order:" + key
	if doc == nil {
		return r.Del(ctx, name).Err()
	}
	text, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	return r.Set(ctx, name, text, 0).Err()
}

// rowByRowBatch is the planted bug: the slot moves past the batch as it is read, then
// each row goes to Redis on its own.
func (c *consumer) rowByRowBatch() error {
	txns, _, err := c.batch("get")
	if err != nil {
		return err
	}
	for _, t := range txns {
		for _, ch := range t.Changes {
			retry("write a row to redis", func() error { return c.writeRow(ch) })
		}
	}
	return nil
}

// writeRow applies one change to its document in Redis.
func (c *consumer) writeRow(ch Change) error {
	ctx, cancel := timeout()
	defer cancel()
	docs, err := c.load(ctx, []Txn{{Changes: []Change{ch}}})
	if err != nil {
		return err
	}
	if err := c.tables.Apply(docs, ch); err != nil {
		return err
	}
	key := c.tables.KeyOf(ch)
	return c.put(ctx, c.rdb, key, docs[key])
}

// parseLSN reads PostgreSQL's X/Y notation of a WAL position.
func parseLSN(s string) (uint64, error) {
	hi, lo, ok := strings.Cut(s, "/")
	if !ok {
		return 0, fmt.Errorf("not a WAL position: %q", s)
	}
	h, err := strconv.ParseUint(hi, 16, 32)
	if err != nil {
		return 0, fmt.Errorf("not a WAL position: %q", s)
	}
	l, err := strconv.ParseUint(lo, 16, 32)
	if err != nil {
		return 0, fmt.Errorf("not a WAL position: %q", s)
	}
	return h<<32 | l, nil
}
