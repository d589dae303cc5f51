package main

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
)

// Line is one line of an order in its document.
type Line struct {
	Line   int         `json:"line"`
	Amount json.Number `json:"amount"`
}

// Order is the document kept in Redis for one order: the order's row joined with its
// lines, in line order.
type Order struct {
	ID       string `json:"id"`
	Customer string `json:"customer"`
	Status   string `json:"status"`
	Lines    []Line `json:"lines"`
}

// Docs holds the documents a batch of changes touches: nil is an order the store does
// not hold (deleted, or never created).
type Docs map[string]*Order

// Tables names the source's two tables, as test_decoding prints them (schema.table).
type Tables struct {
	Orders, Lines string
}

// KeyOf is the order a change belongs to ("" for a change of another table).
func (t Tables) KeyOf(c Change) string {
	switch c.Table {
	case t.Orders:
		return c.Columns["id"]
	case t.Lines:
		return c.Columns["order_id"]
	}
	return ""
}

// Apply changes the document of c's order as c changed the source. A line of an order
// the store does not hold is dropped: every line belongs to an order written before it,
// in its transaction or an earlier one (the example's transactions never write another).
func (t Tables) Apply(docs Docs, c Change) error {
	key := t.KeyOf(c)
	if key == "" {
		return nil
	}
	doc := docs[key]
	switch c.Table {
	case t.Orders:
		if c.Action == "DELETE" {
			docs[key] = nil
			return nil
		}
		if doc == nil {
			doc = &Order{ID: key, Lines: []Line{}}
			docs[key] = doc
		}
		doc.Customer, doc.Status = c.Columns["customer"], c.Columns["status"]
	case t.Lines:
		if doc == nil {
			return nil
		}
		n, err := strconv.Atoi(c.Columns["line"])
		if err != nil {
			return fmt.Errorf("line number of %v: %w", c.Columns, err)
		}
		kept := []Line{}
		for _, l := range doc.Lines {
			if l.Line != n {
				kept = append(kept, l)
			}
		}
		if c.Action != "DELETE" {
			kept = append(kept, Line{Line: n, Amount: json.Number(c.Columns["amount"])})
			sort.Slice(kept, func(i, j int) bool { return kept[i].Line < kept[j].Line })
		}
		doc.Lines = kept
	}
	return nil
}
