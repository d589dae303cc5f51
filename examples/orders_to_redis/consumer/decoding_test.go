package main

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestParseChangeReadsTestDecodingRows(t *testing.T) {
	cases := []struct {
		data string
		want Change
	}{
		{
			`table s.orders: INSERT: id[text]:'k1' customer[text]:'o''brien' status[text]:'new'`,
			Change{"s.orders", "INSERT", map[string]string{"id": "k1", "customer": "o'brien", "status": "new"}},
		},
		{
			`table s.lines: INSERT: order_id[text]:'k 1' line[integer]:2 amount[numeric]:10.50`,
			Change{"s.lines", "INSERT", map[string]string{"order_id": "k 1", "line": "2", "amount": "10.50"}},
		},
		{
			`table s.lines: DELETE: order_id[text]:'k1' line[integer]:3`,
			Change{"s.lines", "DELETE", map[string]string{"order_id": "k1", "line": "3"}},
		},
		{
			`table s.orders: UPDATE: old-key: id[text]:'k0' new-tuple: id[text]:'k1' customer[text]:null status[text]:'x'`,
			Change{"s.orders", "UPDATE", map[string]string{"id": "k1", "status": "x"}},
		},
		{
			`table s.tags: INSERT: tags[text[]]:'{a,b}'`,
			Change{"s.tags", "INSERT", map[string]string{"tags": "{a,b}"}},
		},
	}
	for _, c := range cases {
		got, ok, err := ParseChange(c.data)
		if err != nil || !ok || !reflect.DeepEqual(got, c.want) {
			t.Errorf("ParseChange(%q) = %v, %v, %v; want %v", c.data, got, ok, err, c.want)
		}
	}
	for _, other := range []string{"BEGIN", "COMMIT", "message: transactional: 1 prefix: p, sz: 0 content:"} {
		if _, ok, err := ParseChange(other); ok || err != nil {
			t.Errorf("ParseChange(%q): a row change (%v, %v)", other, ok, err)
		}
	}
	if _, _, err := ParseChange(`table s.orders: INSERT: id[text]:'k1`); err == nil {
		t.Error("an unterminated value parsed")
	}
}

func TestApplyBuildsTheOrdersDocument(t *testing.T) {
	tables := Tables{Orders: "s.orders", Lines: "s.lines"}
	docs := Docs{}
	steps := []string{
		`table s.orders: INSERT: id[text]:'k1' customer[text]:'c1' status[text]:'new'`,
		`table s.lines: INSERT: order_id[text]:'k1' line[integer]:2 amount[numeric]:5.00`,
		`table s.lines: INSERT: order_id[text]:'k1' line[integer]:1 amount[numeric]:7.25`,
		`table s.lines: UPDATE: order_id[text]:'k1' line[integer]:2 amount[numeric]:6.00`,
		`table s.orders: UPDATE: id[text]:'k1' customer[text]:'c1' status[text]:'paid'`,
		`table s.lines: INSERT: order_id[text]:'k9' line[integer]:1 amount[numeric]:1.00`,
		`table s.other: INSERT: id[text]:'k1'`,
	}
	for _, s := range steps {
		ch, _, err := ParseChange(s)
		if err == nil {
			err = tables.Apply(docs, ch)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	text, _ := json.Marshal(docs["k1"])
	want := `{"id":"k1","customer":"c1","status":"paid","lines":[{"line":1,"amount":7.25},{"line":2,"amount":6.00}]}`
	if string(text) != want {
		t.Errorf("document %s, want %s", text, want)
	}
	if _, held := docs["k9"]; held {
		t.Error("a line of an order the store does not hold made a document")
	}
	for _, s := range []string{
		`table s.lines: DELETE: order_id[text]:'k1' line[integer]:1`,
		`table s.lines: DELETE: order_id[text]:'k1' line[integer]:2`,
	} {
		ch, _, _ := ParseChange(s)
		if err := tables.Apply(docs, ch); err != nil {
			t.Fatal(err)
		}
	}
	if text, _ := json.Marshal(docs["k1"]); string(text) != `{"id":"k1","customer":"c1","status":"paid","lines":[]}` {
		t.Errorf("document without lines %s", text)
	}
	ch, _, _ := ParseChange(`table s.orders: DELETE: id[text]:'k1'`)
	if err := tables.Apply(docs, ch); err != nil || docs["k1"] != nil {
		t.Errorf("a deleted order kept its document: %v, %v", docs["k1"], err)
	}
}

func TestParseLSN(t *testing.T) {
	a, err := parseLSN("0/16B3748")
	b, err2 := parseLSN("1/0")
	if err != nil || err2 != nil || a != 0x16B3748 || b != 1<<32 || a >= b {
		t.Errorf("parseLSN: %x %x %v %v", a, b, err, err2)
	}
	if _, err := parseLSN("16B3748"); err == nil {
		t.Error("a position without / parsed")
	}
}
