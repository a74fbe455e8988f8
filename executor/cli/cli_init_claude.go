package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"

	"github.com/stepseq/stepseq/executor/store"
)

// MCPServer is a server entry of Claude Code's .mcp.json.
type MCPServer struct {
	Type    string   `json:"type"`
	Command string   `json:"command"`
	Args    []string `json:"args"`
}

// ClaudeServer is the server stepseq registers for Claude Code, in a project's
// .mcp.json (`stepseq init --claude`) as in the plugin's: `stepseq mcp`, found on
// PATH and started in the project's folder, which is then its workspace.
var ClaudeServer = MCPServer{Type: "stdio", Command: "stepseq", Args: []string{"mcp"}}

// ClaudeServerName is ClaudeServer's key under mcpServers.
const ClaudeServerName = "stepseq"

// mcpJSONCap bounds the .mcp.json init reads.
var mcpJSONCap = store.Cap{Bytes: 1 << 20, What: "an .mcp.json"}

// claudeConfig is what `init --claude` makes of DIR/.mcp.json: the file with
// stepseq's server in it, other servers and keys kept in their order (a file that
// has it already is kept byte for byte). It refuses
// a file that is not a JSON object, and a "stepseq" server that is not stepseq's
// own unless force.
func claudeConfig(path string, force bool) ([]byte, error) {
	cur, err := store.ReadFile(path, mcpJSONCap)
	if errors.Is(err, fs.ErrNotExist) {
		cur, err = []byte("{}"), nil
	}
	if err != nil {
		return nil, err
	}
	// Unmarshal places a syntax error exactly; the decoder's tokens do not.
	var probe any
	if err := json.Unmarshal(cur, &probe); err != nil {
		return nil, &exitError{code: 1, err: fmt.Errorf("%s: %w; fix it, or move it away and run init --claude again", path, jsonError(cur, err))}
	}
	top, err := parseObject(cur)
	if err != nil {
		return nil, &exitError{code: 1, err: fmt.Errorf(`%s: %w, like {"mcpServers": {}}`, path, err)}
	}
	servers := orderedObject{}
	if raw, ok := top.get("mcpServers"); ok {
		if servers, err = parseObject(raw); err != nil {
			return nil, &exitError{code: 1, err: fmt.Errorf(`%s: mcpServers: want an object of servers, like {"mcpServers": {"name": {"command": ...}}}`, path)}
		}
	}
	ours, _ := json.Marshal(ClaudeServer)
	if raw, ok := servers.get(ClaudeServerName); ok {
		switch {
		case isClaudeServer(raw):
			return cur, nil // as it is: stepseq's, in the user's own layout
		case !force:
			return nil, &exitError{code: 1, err: fmt.Errorf("%s: its %q server is not stepseq's own (%s): left as it is (give --force to replace it with %s)",
				path, ClaudeServerName, compact(raw), ours)}
		}
	}
	servers.set(ClaudeServerName, ours)
	top.set("mcpServers", servers.encode(""))
	out := top.encode("")
	return append(out, '\n'), nil
}

// isClaudeServer reports whether an entry registers ClaudeServer: "type" may be
// left out, stdio being its default.
func isClaudeServer(raw json.RawMessage) bool {
	var got, want map[string]any
	if json.Unmarshal(raw, &got) != nil {
		return false
	}
	if _, ok := got["type"]; !ok {
		got["type"] = "stdio"
	}
	b, _ := json.Marshal(ClaudeServer)
	_ = json.Unmarshal(b, &want)
	return reflect.DeepEqual(got, want)
}

// writeClaude writes data to DIR/.mcp.json and says what Claude Code does with it.
func (in *initRun) writeClaude(path string, data []byte) error {
	if err := in.write(path, data, 0o644); err != nil {
		return err
	}
	if _, err := exec.LookPath(ClaudeServer.Command); err != nil {
		fmt.Fprintf(in.stderr, "stepseq: note: %s is not on PATH, where Claude Code looks for it: copy the binary there (make build in a clone makes bin/stepseq)\n", ClaudeServer.Command)
	}
	fmt.Fprintf(in.out, "Claude Code, started in %s, runs %q as its MCP server %q (it asks once to approve it)\n",
		in.dir, strings.Join(append([]string{ClaudeServer.Command}, ClaudeServer.Args...), " "), ClaudeServerName)
	return nil
}

// orderedObject is a JSON object's members in the order they came, their values
// as written.
type orderedObject struct {
	keys []string
	vals []json.RawMessage
}

func parseObject(data []byte) (orderedObject, error) {
	var o orderedObject
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return o, err
	}
	if tok != json.Delim('{') {
		return o, errors.New("not a JSON object")
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return o, err
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return o, err
		}
		o.set(tok.(string), v)
	}
	if _, err := dec.Token(); err != nil {
		return o, err
	}
	switch _, err := dec.Token(); {
	case errors.Is(err, io.EOF):
		return o, nil
	case err != nil:
		return o, err
	}
	return o, errors.New("more after the object")
}

func (o *orderedObject) get(key string) (json.RawMessage, bool) {
	for i, k := range o.keys {
		if k == key {
			return o.vals[i], true
		}
	}
	return nil, false
}

// set replaces key's value where it stands, or adds it last.
func (o *orderedObject) set(key string, v json.RawMessage) {
	for i, k := range o.keys {
		if k == key {
			o.vals[i] = v
			return
		}
	}
	o.keys = append(o.keys, key)
	o.vals = append(o.vals, v)
}

// encode writes the object indented by two spaces a level, prefix before each
// line after the first.
func (o orderedObject) encode(prefix string) []byte {
	if len(o.keys) == 0 {
		return []byte("{}")
	}
	var b bytes.Buffer
	b.WriteString("{\n")
	for i, k := range o.keys {
		key, _ := json.Marshal(k)
		b.WriteString(prefix + "  ")
		b.Write(key)
		b.WriteString(": ")
		if err := json.Indent(&b, o.vals[i], prefix+"  ", "  "); err != nil {
			b.Write(o.vals[i])
		}
		if i < len(o.keys)-1 {
			b.WriteByte(',')
		}
		b.WriteByte('\n')
	}
	b.WriteString(prefix + "}")
	return b.Bytes()
}

// jsonError places a decoding error at its line and column.
func jsonError(data []byte, err error) error {
	var se *json.SyntaxError
	if !errors.As(err, &se) {
		return fmt.Errorf("not valid JSON: %w", err)
	}
	before := data[:min(int(se.Offset), len(data))]
	line := bytes.Count(before, []byte("\n")) + 1
	col := len(before) - (bytes.LastIndexByte(before, '\n') + 1) // Offset counts the bad byte
	return fmt.Errorf("line %d, column %d: not valid JSON: %w", line, col, err)
}

func compact(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}

// claudePath is DIR/.mcp.json.
func (in *initRun) claudePath() string { return filepath.Join(in.dir, ".mcp.json") }
