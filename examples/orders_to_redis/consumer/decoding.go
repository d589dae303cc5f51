package main

import (
	"fmt"
	"strings"
)

// Change is one row change of test_decoding's output: "table s.orders: INSERT: id[text]:'k1' ...".
type Change struct {
	Table   string            // schema.table
	Action  string            // INSERT, UPDATE or DELETE
	Columns map[string]string // column -> value as text; a NULL column is absent
}

// ParseChange reads one line of test_decoding's output. ok is false for a line that is
// no row change (BEGIN, COMMIT, a message).
func ParseChange(data string) (Change, bool, error) {
	if !strings.HasPrefix(data, "table ") {
		return Change{}, false, nil
	}
	rest := data[len("table "):]
	head, body, found := strings.Cut(rest, ": ")
	if !found {
		return Change{}, false, fmt.Errorf("no table name in %q", data)
	}
	action, cols, _ := strings.Cut(body, ":")
	c := Change{Table: head, Action: action, Columns: map[string]string{}}
	cols = strings.TrimPrefix(cols, " ")
	// An UPDATE that changed the key (or of a table with REPLICA IDENTITY FULL) shows
	// the old key first; the row is the new tuple.
	if _, tuple, ok := strings.Cut(cols, "new-tuple: "); ok {
		cols = tuple
	}
	if cols == "(no-tuple-data)" {
		return c, true, nil
	}
	if err := parseColumns(cols, c.Columns); err != nil {
		return Change{}, false, fmt.Errorf("%w in %q", err, data)
	}
	return c, true, nil
}

// parseColumns reads `name[type]:value` pairs separated by spaces; text-like values are
// quoted with ' (doubled inside), others (numbers, booleans) are bare, NULL is `null`.
func parseColumns(s string, into map[string]string) error {
	for s != "" {
		open := strings.IndexByte(s, '[')
		if open < 0 {
			return fmt.Errorf("no column type")
		}
		name := strings.Trim(s[:open], `"`)
		// The type may itself hold brackets (text[]): it ends at the first "]:".
		end := strings.Index(s[open:], "]:")
		if end < 0 {
			return fmt.Errorf("unterminated column type")
		}
		s = s[open+end+2:]
		var value string
		isNull := false
		if strings.HasPrefix(s, "'") {
			var b strings.Builder
			i := 1
			for {
				if i >= len(s) {
					return fmt.Errorf("unterminated quoted value")
				}
				if s[i] == '\'' {
					if i+1 < len(s) && s[i+1] == '\'' {
						b.WriteByte('\'')
						i += 2
						continue
					}
					break
				}
				b.WriteByte(s[i])
				i++
			}
			value, s = b.String(), s[i+1:]
		} else {
			value, s, _ = strings.Cut(s, " ")
			isNull = value == "null"
		}
		if !isNull {
			into[name] = value
		}
		s = strings.TrimPrefix(s, " ")
	}
	return nil
}
